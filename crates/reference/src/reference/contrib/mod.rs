//! phantom's own f64 kernels for ONNX Runtime's contrib ops (`com.microsoft`: the fused layer norms, GELUs,
//! attention and quantized matmuls that ORT's optimizers and onnxruntime-genai write). tract implements few of
//! them, some in f32 only, and reads a contrib `Attention` as the unrelated ONNX `Attention`; so before tract
//! parses the model, every node phantom has a kernel for is renamed `phantom.<Op>` ([`claim`]) and built as one
//! tract op ([`op::ContribOp`]) that evaluates the kernel in f64. Each kernel is written from the op's definition
//! (ORT's ContribOperators.md and its CPU kernel, which decides where the two differ; each kernel says where).
//!
//! Each op family (one file) declares its ops in one table of [`kernel::Row`]s (op, kernel, domains claimed);
//! [`FAMILIES`] gathers the tables, and registering, claiming and building a node all read it.

mod act;
mod affine_grid;
mod attend;
mod attention;
mod batchnorm;
mod bert_tokenizer;
mod bitcast;
mod bitshift;
mod causal_conv;
mod col2im;
mod compress;
mod concat;
mod crop_pad;
mod cumsum;
mod deform_conv;
mod dot;
mod embed;
mod encode;
mod flex_attention;
mod gather_narrow;
mod gqa;
mod grid_sample;
mod image_decoder;
mod kernel;
mod linalg;
mod linear_attention;
mod looping;
mod loss;
mod lstm;
mod matmul;
mod mha;
mod ml;
mod narrow_cast;
mod nchwc;
mod nms;
pub mod nms_settle;
mod node;
mod norm;
mod one_hot;
mod onnx_attention;
mod onnx_attn_rows;
pub mod op;
mod optim;
mod optional;
mod pool_lp;
mod prep;
mod qdq;
mod quant;
mod reduce;
mod regex_match;
mod reverse_sequence;
mod roi_align;
mod rotary;
mod signal;
mod space_to_depth;
mod squeeze;
pub mod standin;
mod stft;
mod strings;
pub(super) mod subgraph;
mod svm;
mod svm_cls;
mod symbolic;
mod tensor_scatter;
mod tfidf;
mod tokenizer;
mod trees;
mod trees5;
mod trees_cls;
mod trilu;
mod unique;
mod unpool;
mod upsample;
mod util;

use tract_onnx::pb::{GraphProto, NodeProto, OperatorSetIdProto};

pub use kernel::PREFIX;
use kernel::{Kernel, Row};
pub use node::{Fact, Node};

/// Every op family's table of ops and kernels ([`Row`]), in the order a lookup tries them (no op is in two).
const FAMILIES: &[&[Row]] = &[
    act::TABLE,
    norm::TABLE,
    matmul::TABLE,
    embed::TABLE,
    attention::TABLE,
    onnx_attention::TABLE,
    gqa::TABLE,
    rotary::TABLE,
    quant::TABLE,
    lstm::TABLE,
    bert_tokenizer::TABLE,
    batchnorm::TABLE,
    squeeze::TABLE,
    concat::TABLE,
    cumsum::TABLE,
    reduce::TABLE,
    nms::TABLE,
    looping::TABLE,
    ml::TABLE,
    qdq::TABLE,
    trees::TABLE,
    trees_cls::TABLE,
    trees5::TABLE,
    svm::TABLE,
    prep::TABLE,
    encode::TABLE,
    loss::TABLE,
    grid_sample::TABLE,
    crop_pad::TABLE,
    pool_lp::TABLE,
    col2im::TABLE,
    affine_grid::TABLE,
    bitcast::TABLE,
    deform_conv::TABLE,
    linalg::TABLE,
    signal::TABLE,
    stft::TABLE,
    tensor_scatter::TABLE,
    unpool::TABLE,
    upsample::TABLE,
    strings::TABLE,
    tfidf::TABLE,
    tokenizer::TABLE,
    roi_align::TABLE,
    unique::TABLE,
    optim::TABLE,
    dot::TABLE,
    compress::TABLE,
    one_hot::TABLE,
    reverse_sequence::TABLE,
    space_to_depth::TABLE,
    bitshift::TABLE,
    narrow_cast::TABLE,
    nchwc::TABLE,
    linear_attention::TABLE,
    causal_conv::TABLE,
    flex_attention::TABLE,
    image_decoder::TABLE,
    optional::TABLE,
    trilu::TABLE,
    standin::TABLE,
];

/// Every op phantom has a kernel for.
fn rows() -> impl Iterator<Item = &'static Row> {
    FAMILIES.iter().flat_map(|family| family.iter())
}

/// The row of `op`.
fn row(op: &str) -> Option<&'static Row> {
    rows().find(|r| r.op == op)
}

/// The kernel phantom has for `op`.
fn kernel_for(op: &str) -> Option<&'static dyn Kernel> {
    row(op).map(|r| r.kernel)
}

/// Whether phantom evaluates `n`: an op of ORT's contrib domain or `ai.onnx.ml` it has a kernel for, one it claims
/// in any domain ([`Row::any_domain`]: an ONNX op tract computes in f32, wrongly or not at all, each family's table
/// says why), or one a family's predicate takes.
fn claims(n: &NodeProto) -> bool {
    if n.op_type == "BatchNormalization" {
        // Inference mode is tract's; training mode (statistics outputs) is phantom's.
        return batchnorm::training(n);
    }
    if n.op_type == "LayerNormalization" {
        return norm::claims_layer_norm(n);
    }
    if n.op_type == "SpaceToDepth" {
        return space_to_depth::claims(n);
    }
    if n.op_type == "Squeeze" {
        return squeeze::claims_squeeze(n);
    }
    if n.op_type == "OneHotEncoder" && !prep::claims_one_hot(n) {
        return false;
    }
    if lstm::claims_recurrent(n)
        || qdq::claims_qdq(n)
        || narrow_cast::claims(n)
        || bert_tokenizer::claims(n)
    {
        return true;
    }
    // ORT's contrib domain and the classic-ML ops (`ai.onnx.ml`); any domain where the row says so.
    row(&n.op_type).is_some_and(|r| {
        r.any_domain || matches!(n.domain.as_str(), "com.microsoft" | "ai.onnx.ml")
    })
}

/// Renames every node phantom evaluates itself to `phantom.<Op>`, in `g` and its subgraphs (a `Loop`'s or a
/// FlexAttention's after its graphs', whose outer reads it then makes inputs), once `g`'s optional values are
/// settled ([`optional::settle`]). `opsets` are the model's imports. Returns how many.
pub fn claim(g: &mut GraphProto, opsets: &[OperatorSetIdProto]) -> usize {
    optional::settle(g);
    claim_graph(g, opsets)
}

/// [`claim`] in `g` and its subgraphs.
fn claim_graph(g: &mut GraphProto, opsets: &[OperatorSetIdProto]) -> usize {
    let mut count = 0;
    let integer_sums = cumsum::over_integers(g);
    // Pads tract cannot build (mode `wrap`, a computed constant_value or axes); tract keeps the others.
    let pads = crop_pad::claimed_pads(g);
    // MatMuls of two vectors, which tract refuses.
    let dots = dot::claimed_dots(g);
    // Trilus whose k a node computes, which tract cannot type.
    let trilus = trilu::claimed(g);
    for (i, n) in g.node.iter_mut().enumerate() {
        for a in n.attribute.iter_mut() {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                count += claim_graph(sub, opsets);
            }
        }
        roi_align::pin_default(n, opsets);
        if looping::claims_loop(n) {
            looping::explicit(n, opsets);
            count += 1;
        } else if flex_attention::claims(n) {
            // Its modifier graphs' outer-scope reads become inputs, as a Loop body's.
            flex_attention::explicit(n, opsets);
            count += 1;
        } else if onnx_attention::claims(n) {
            // ONNX-domain Attention, under its own name: plain `phantom.Attention` is com.microsoft's.
            n.op_type = format!("{PREFIX}{}", onnx_attention::OP);
            count += 1;
        } else if claims(n)
            || integer_sums.contains(&i)
            || pads.contains(&i)
            || dots.contains(&i)
            || trilus.contains(&i)
        {
            n.op_type = format!("{PREFIX}{}", n.op_type);
            count += 1;
        }
    }
    count
}

/// Drops top-level `ZipMap` nodes (ai.onnx.ml) and the graph outputs they write: a sequence of maps, which tract
/// cannot type and phantom does not compare (its values are its input's, compared there; that input becomes a
/// graph output, so it stays live). Returns how many outputs were dropped.
pub fn drop_zipmaps(g: &mut GraphProto) -> usize {
    let zipmap = |n: &NodeProto| n.op_type == "ZipMap" && n.domain == "ai.onnx.ml";
    let written: Vec<String> = g
        .node
        .iter()
        .filter(|n| zipmap(n))
        .flat_map(|n| n.output.clone())
        .collect();
    let read: Vec<String> = g
        .node
        .iter()
        .filter(|n| zipmap(n))
        .flat_map(|n| n.input.first().cloned())
        .collect();
    g.node.retain(|n| !zipmap(n));
    g.output.retain(|o| !written.contains(&o.name));
    // What a ZipMap read stays live: the output it spoke for depends on it.
    for name in read {
        if !g.output.iter().any(|o| o.name == name) {
            g.output.push(crate::model::surgery::untyped_value(&name));
        }
    }
    written.len()
}

/// Registers phantom's kernels with tract's ONNX parser.
pub fn register(onnx: &mut tract_onnx::Onnx) {
    for r in rows() {
        onnx.op_register
            .0
            .insert(format!("{PREFIX}{}", r.op), op::build);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use tract_onnx::pb::NodeProto;

    use super::*;

    fn node(op: &str, domain: &str) -> NodeProto {
        NodeProto {
            op_type: op.into(),
            domain: domain.into(),
            ..Default::default()
        }
    }

    #[test]
    fn every_op_is_in_one_row_and_registered() {
        let mut seen = HashSet::new();
        for r in rows() {
            assert!(seen.insert(r.op), "{} is in two rows", r.op);
        }
        assert_eq!(seen.len(), 108);
        let mut onnx = tract_onnx::onnx();
        register(&mut onnx);
        for op in &seen {
            assert!(
                onnx.op_register.0.contains_key(&format!("{PREFIX}{op}")),
                "{op} is not registered"
            );
        }
    }

    #[test]
    fn rows_decide_the_domains_claimed() {
        let claimed = |op, domain| claims(&node(op, domain));
        // Contrib and classic-ML ops: their own domains only.
        assert!(claimed("Gelu", "com.microsoft") && claimed("Scaler", "ai.onnx.ml"));
        assert!(!claimed("Gelu", "") && !claimed("Scaler", "custom"));
        // Rows claimed in any domain.
        for op in [
            "Celu",
            "SimplifiedLayerNormalization",
            "CumProd",
            "HannWindow",
            "Adam",
            "OptionalHasElement",
        ] {
            assert!(
                claimed(op, "") && claimed(op, "ai.onnx.preview.training"),
                "{op}"
            );
        }
        // Predicates: Q/DQ in ONNX's and ORT's domains, the recurrent ops in ONNX's, Squeeze without axes.
        assert!(claimed("QuantizeLinear", "") && !claimed("QuantizeLinear", "custom"));
        assert!(claimed("GRU", "") && claimed("GRU", "ai.onnx") && !claimed("GRU", "custom"));
        assert!(claimed("Squeeze", "") && !claimed("LayerNormalization", ""));
        assert!(!claimed("Foo", "com.microsoft") && kernel_for("Foo").is_none());
    }
}
