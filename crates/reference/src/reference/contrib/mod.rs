//! phantom's own f64 kernels for ONNX Runtime's contrib ops (`com.microsoft`: the fused layer norms, GELUs,
//! attention and quantized matmuls that ORT's optimizers and onnxruntime-genai write). tract implements few of
//! them, some in f32 only, and reads a contrib `Attention` as the unrelated ONNX `Attention`; so before tract
//! parses the model, every node phantom has a kernel for is renamed `phantom.<Op>` ([`claim`]) and built as one
//! tract op ([`op::ContribOp`]) that evaluates the kernel in f64. Each kernel is written from the op's definition
//! (ORT's ContribOperators.md and its CPU kernel, which decides where the two differ; each kernel says where).

mod act;
mod affine_grid;
mod attend;
mod attention;
mod batchnorm;
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
mod linalg;
mod linear_attention;
mod looping;
mod loss;
mod lstm;
mod matmul;
pub use matmul::nbits_weight;
mod mha;
mod ml;
mod narrow_cast;
mod nchwc;
mod nms;
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
use tract_onnx::prelude::*;

pub use node::{Fact, Node};

/// Prefix of the op types phantom claims.
pub const PREFIX: &str = "phantom.";

/// Starts a kernel's typing error that is the model's fault (an axis outside the rank), not a gap in the reference:
/// such a node is never stood in for; the model is refused.
pub const INVALID: &str = "the model is invalid: ";

/// One contrib op: the facts of its outputs and their values, both for every ONNX output slot.
///
/// A kernel implements [`Kernel::facts`], or, when input values decide its outputs' shapes,
/// [`Kernel::value_slots`] and [`Kernel::facts_valued`] (each defaults to the other: implement one).
pub trait Kernel: Sync {
    /// Element type and shape of every ONNX output, from the inputs' facts (indexed by ONNX slot); for a kernel
    /// with [`Kernel::value_slots`], its [`Kernel::facts_valued`] with no value known.
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        self.facts_valued(n, ins, &[])
    }
    /// Every ONNX output, computed in f64 (integer outputs in their own type).
    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>>;
    /// Whether tract may evaluate the node while typing, when its inputs are known then (false for a stand-in).
    fn folds(&self) -> bool {
        true
    }
    /// ONNX input slots whose values, not only their types and shapes, decide the outputs' facts (axes, pads).
    fn value_slots(&self) -> &'static [usize] {
        &[]
    }
    /// [`Kernel::facts`] for a kernel with [`Kernel::value_slots`]: `values` holds the value of each ONNX slot
    /// that tract knows before the run (`None` elsewhere).
    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        _values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        self.facts(n, ins)
    }
}

/// The kernel phantom has for `op`.
fn kernel(op: &str) -> Option<&'static dyn Kernel> {
    act::kernel(op)
        .or_else(|| norm::kernel(op))
        .or_else(|| matmul::kernel(op))
        .or_else(|| embed::kernel(op))
        .or_else(|| attention::kernel(op))
        .or_else(|| onnx_attention::kernel(op))
        .or_else(|| gqa::kernel(op))
        .or_else(|| rotary::kernel(op))
        .or_else(|| quant::kernel(op))
        .or_else(|| lstm::kernel(op))
        .or_else(|| batchnorm::kernel(op))
        .or_else(|| squeeze::kernel(op))
        .or_else(|| concat::kernel(op))
        .or_else(|| cumsum::kernel(op))
        .or_else(|| reduce::kernel(op))
        .or_else(|| nms::kernel(op))
        .or_else(|| looping::kernel(op))
        .or_else(|| ml::kernel(op))
        .or_else(|| qdq::kernel(op))
        .or_else(|| trees::kernel(op))
        .or_else(|| trees_cls::kernel(op))
        .or_else(|| trees5::kernel(op))
        .or_else(|| svm::kernel(op))
        .or_else(|| prep::kernel(op))
        .or_else(|| encode::kernel(op))
        .or_else(|| loss::kernel(op))
        .or_else(|| grid_sample::kernel(op))
        .or_else(|| crop_pad::kernel(op))
        .or_else(|| pool_lp::kernel(op))
        .or_else(|| col2im::kernel(op))
        .or_else(|| affine_grid::kernel(op))
        .or_else(|| bitcast::kernel(op))
        .or_else(|| deform_conv::kernel(op))
        .or_else(|| linalg::kernel(op))
        .or_else(|| signal::kernel(op))
        .or_else(|| stft::kernel(op))
        .or_else(|| tensor_scatter::kernel(op))
        .or_else(|| unpool::kernel(op))
        .or_else(|| upsample::kernel(op))
        .or_else(|| strings::kernel(op))
        .or_else(|| tfidf::kernel(op))
        .or_else(|| tokenizer::kernel(op))
        .or_else(|| roi_align::kernel(op))
        .or_else(|| unique::kernel(op))
        .or_else(|| optim::kernel(op))
        .or_else(|| dot::kernel(op))
        .or_else(|| compress::kernel(op))
        .or_else(|| one_hot::kernel(op))
        .or_else(|| reverse_sequence::kernel(op))
        .or_else(|| space_to_depth::kernel(op))
        .or_else(|| bitshift::kernel(op))
        .or_else(|| narrow_cast::kernel(op))
        .or_else(|| nchwc::kernel(op))
        .or_else(|| linear_attention::kernel(op))
        .or_else(|| causal_conv::kernel(op))
        .or_else(|| flex_attention::kernel(op))
        .or_else(|| image_decoder::kernel(op))
        .or_else(|| optional::kernel(op))
        .or_else(|| trilu::kernel(op))
        .or_else(|| standin::kernel(op))
}

/// Ops phantom evaluates whatever their domain: SimplifiedLayerNormalization (ORT registers it in the ONNX domain
/// although ONNX does not define it), and ONNX ops tract computes in f32 (DynamicQuantizeLinear, RMSNormalization,
/// GridSample), wrongly (Celu; Softplus, which overflows; ReduceMax/ReduceMin of an empty set or of booleans; ReduceLogSumExp, which overflows) or not at all (CumProd, the
/// training losses SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss; CenterCropPad, LpPool, Col2Im, AffineGrid,
/// BitCast; Det, MaxUnpool, NonMaxSuppression, TensorScatter, Upsample, DeformConv; the string ops StringConcat,
/// StringSplit, RegexFullMatch, StringNormalizer, and TfIdfVectorizer; RoiAlign, Unique, and the training optimizers
/// Adagrad, Adam and Momentum, whose domain `ai.onnx.preview.training` is neither ONNX's nor ORT's; Compress,
/// OneHot and ReverseSequence, which tract cannot type; BitShift, whose out-of-range amounts tract gets wrong; SwiGLU;
/// LinearAttention and CausalConvWithState, which tract has no kernel for; ImageDecoder, which tract lacks; the
/// optional ops Optional, OptionalHasElement and OptionalGetElement, which tract cannot type;
/// and SpaceToDepth in CRD mode, which tract computes as DCR, claimed apart). The window ops and MelWeightMatrix tract folds into
/// f32 constants at import, and its STFT needs a constant window: phantom takes them before tract parses.
const ANY_DOMAIN: &[&str] = &[
    "SimplifiedLayerNormalization",
    "DynamicQuantizeLinear",
    "RMSNormalization",
    "Celu",
    "Softplus",
    "Round",
    "CumProd",
    "ReduceMax",
    "ReduceMin",
    "ReduceLogSumExp",
    "SoftmaxCrossEntropyLoss",
    "NegativeLogLikelihoodLoss",
    "GridSample",
    "CenterCropPad",
    "LpPool",
    "Col2Im",
    "AffineGrid",
    "BitCast",
    "HannWindow",
    "HammingWindow",
    "BlackmanWindow",
    "MelWeightMatrix",
    "STFT",
    "Det",
    "MaxUnpool",
    "TensorScatter",
    "Upsample",
    "DeformConv",
    "StringConcat",
    "StringSplit",
    "RegexFullMatch",
    "StringNormalizer",
    "TfIdfVectorizer",
    "NonMaxSuppression",
    "RoiAlign",
    "Unique",
    "Adagrad",
    "Adam",
    "Momentum",
    "Compress",
    "OneHot",
    "ReverseSequence",
    "BitShift",
    "SwiGLU",
    "LinearAttention",
    "CausalConvWithState",
    "ImageDecoder",
    "Optional",
    "OptionalHasElement",
    "OptionalGetElement",
];

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
    if lstm::claims_recurrent(n) || qdq::claims_qdq(n) || narrow_cast::claims(n) {
        return true;
    }
    // ORT's contrib domain, and the classic-ML ops (`ai.onnx.ml`) phantom has kernels for.
    let ours = matches!(n.domain.as_str(), "com.microsoft" | "ai.onnx.ml")
        || ANY_DOMAIN.contains(&n.op_type.as_str());
    ours && kernel(&n.op_type).is_some()
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
    for op in act::OPS
        .iter()
        .chain(norm::OPS)
        .chain(matmul::OPS)
        .chain(embed::OPS)
        .chain(attention::OPS)
        .chain(onnx_attention::OPS)
        .chain(gqa::OPS)
        .chain(rotary::OPS)
        .chain(quant::OPS)
        .chain(lstm::OPS)
        .chain(batchnorm::OPS)
        .chain(squeeze::OPS)
        .chain(concat::OPS)
        .chain(cumsum::OPS)
        .chain(reduce::OPS)
        .chain(nms::OPS)
        .chain(looping::OPS)
        .chain(ml::OPS)
        .chain(nchwc::OPS)
        .chain(tokenizer::OPS)
        .chain(qdq::OPS)
        .chain(trees::OPS)
        .chain(trees_cls::OPS)
        .chain(trees5::OPS)
        .chain(svm::OPS)
        .chain(prep::OPS)
        .chain(encode::OPS)
        .chain(loss::OPS)
        .chain(grid_sample::OPS)
        .chain(crop_pad::OPS)
        .chain(pool_lp::OPS)
        .chain(col2im::OPS)
        .chain(affine_grid::OPS)
        .chain(bitcast::OPS)
        .chain(deform_conv::OPS)
        .chain(linalg::OPS)
        .chain(signal::OPS)
        .chain(stft::OPS)
        .chain(tensor_scatter::OPS)
        .chain(unpool::OPS)
        .chain(upsample::OPS)
        .chain(strings::OPS)
        .chain(tfidf::OPS)
        .chain(roi_align::OPS)
        .chain(unique::OPS)
        .chain(optim::OPS)
        .chain(dot::OPS)
        .chain(compress::OPS)
        .chain(one_hot::OPS)
        .chain(reverse_sequence::OPS)
        .chain(space_to_depth::OPS)
        .chain(bitshift::OPS)
        .chain(narrow_cast::OPS)
        .chain(linear_attention::OPS)
        .chain(causal_conv::OPS)
        .chain(flex_attention::OPS)
        .chain(image_decoder::OPS)
        .chain(optional::OPS)
        .chain(trilu::OPS)
        .chain(standin::OPS)
    {
        onnx.op_register
            .0
            .insert(format!("{PREFIX}{op}"), op::build);
    }
}
