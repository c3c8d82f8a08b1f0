//! ONNX-level rewrites applied to the float64 model before tract parses it, where tract's own expansion of an op
//! would not be a faithful f64 reference:
//! - `Gelu` (exact and tanh): tract expands it with float32 constants; rewritten with f64 constants, so its `Erf`
//!   and `Tanh` run on f64 kernels.
//! - `Swish`: tract ignores its `alpha`; rewritten as `x · sigmoid(alpha · x)`.
//! - `IsNaN`, `IsInf`: tract has no f64 kernel for them and types their output as f64 when their input is, which a
//!   `Where` reading them refuses; rewritten as comparisons (`x ≠ x`, `x = ±∞`), exact in f64.
//! - Slice bounds built by a `Concat` of shape values and an int64 constant holding i64::MAX ("to the end", as torch
//!   exports write it): tract turns that constant into −1 in the concatenated value, which cuts one element too
//!   many; the `Slice` reads a copy of the `Concat` with the constant clamped to the i32 range (the same slice for
//!   any axis shorter than 2³¹), and the original `Concat` is marked unavailable.
//! - `Pad` (constant mode) with pads not known to be ≥ 0: ONNX crops where a pad is negative, tract overflows (a
//!   panic); rewritten as a `Pad` by the positive parts followed by a `Slice` cropping the negative ones.
//! - `Selu`: tract's built-in defaults are truncated; the spec defaults are written out as attributes.
//! - `Gemm` with a `C` or an `alpha` ≠ 1: tract's expansion multiplies by float32 `alpha`/`beta` constants, which
//!   an f64 `C` refuses where tract folds the node at import (its inputs all constant once folded, as in a
//!   segment's cut of an LSTM cell's first step); rewritten as `Gemm(A, B)` then `· alpha` and `+ beta · C` with f64
//!   constants.
//!
//! - `Sigmoid` of a value computed from constants and shapes alone (Swin-V2's continuous position bias MLP): tract
//!   evaluates it while typing the model, with its own kernel, which has no f64 version, so the float64 model would
//!   not load; rewritten as `1 / (1 + exp(−x))` with f64 constants (exact to a few f64 ulps). A `Sigmoid` of data
//!   runs on phantom's own f64 kernel and is left as it is.
//!
//! - `Range` fed one-element tensors of rank 1 (ONNX's AffineGrid function writes them; ONNX Runtime runs them, the
//!   spec asks for scalars, tract refuses): after tract fails to type it, its inputs are reshaped to scalars
//!   ([`scalar_range_inputs`]) and typing is tried again.
//!
//! - `FusedConv` (com.microsoft): expanded into the ops it fuses ([`super::fused_conv`]).
//! - ONNX Runtime's NCHWc ops (com.microsoft.nchwc): expanded into the ONNX op each blocks, between layout
//!   kernels ([`super::nchwc`]).
//!
//! Inserted nodes are named `<node name>.rw<k>`, so phantom attributes them to the original ONNX node. The
//! node-for-node expansions (`Gelu`, `Swish`, `IsNaN`, `IsInf`, `Pad`) are one table ([`expansions`]).

mod expansions;

use tract_onnx::pb::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto, TensorProto,
};

const DOUBLE: i32 = 11;

struct Builder<'a> {
    node: &'a NodeProto,
    nodes: Vec<NodeProto>,
    consts: Vec<TensorProto>,
}

impl Builder<'_> {
    fn constant(&mut self, v: f64) -> String {
        let name = format!("{}.rw_c{}", self.node.name, self.consts.len());
        self.consts.push(TensorProto {
            name: name.clone(),
            data_type: DOUBLE,
            double_data: vec![v],
            ..Default::default()
        });
        name
    }
    fn int(&mut self, v: &[i64]) -> String {
        let name = format!("{}.rw_c{}", self.node.name, self.consts.len());
        self.consts.push(TensorProto {
            name: name.clone(),
            dims: vec![v.len() as i64],
            data_type: 7,
            int64_data: v.to_vec(),
            ..Default::default()
        });
        name
    }
    fn op(&mut self, op: &str, inputs: &[&str], out: Option<&str>) -> String {
        let k = self.nodes.len();
        let output = out
            .map(String::from)
            .unwrap_or_else(|| format!("{}__phantom_rw{k}", self.node.output[0]));
        self.nodes.push(NodeProto {
            name: format!("{}.rw{k}", self.node.name),
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.clone()],
            ..Default::default()
        });
        output
    }
}

fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

/// `Pad` as a `Pad` by the positive parts of its pads, then a `Slice` cropping by the negative parts.
fn crop_negative_pads(b: &mut Builder, y: &str) {
    let n = b.node;
    let (x, pads) = (n.input[0].as_str(), n.input[1].as_str());
    let rest: Vec<&str> = n.input.iter().skip(2).map(|s| s.as_str()).collect();
    let axes = rest.get(1).copied().filter(|a| !a.is_empty());
    let (zero, two, first) = (b.int(&[0]), b.int(&[2]), b.int(&[0]));
    let grown_pads = b.op("Max", &[pads, &zero], None);
    let mut pad_inputs = vec![x, grown_pads.as_str()];
    pad_inputs.extend(rest.iter().copied());
    let grown = b.op("Pad", &pad_inputs, None);
    if let Some(k) = b.nodes.last_mut() {
        k.attribute = n.attribute.clone();
    }
    let count = b.op("Shape", &[pads], None);
    let half = b.op("Div", &[&count, &two], None);
    let begins = b.op("Slice", &[pads, &first, &half], None);
    let ends = b.op("Slice", &[pads, &half, &count], None);
    let cut_begins = b.op("Min", &[&begins, &zero], None);
    let starts = b.op("Neg", &[&cut_begins], None);
    let cut_ends = b.op("Min", &[&ends, &zero], None);
    let mut dims = b.op("Shape", &[&grown], None);
    if let Some(a) = axes {
        dims = b.op("Gather", &[&dims, a], None);
    }
    let stops = b.op("Add", &[&dims, &cut_ends], None);
    match axes {
        Some(a) => b.op("Slice", &[&grown, &starts, &stops, a], Some(y)),
        None => b.op("Slice", &[&grown, &starts, &stops], Some(y)),
    };
}

/// Whether Pad `n` may crop: constant mode, and pads not an initializer known to be ≥ 0.
fn may_crop(n: &NodeProto, inits: &std::collections::HashMap<&str, &TensorProto>) -> bool {
    let constant_mode = attr(n, "mode").is_none_or(|a| a.s == b"constant");
    let Some(pads) = n.input.get(1).filter(|p| !p.is_empty()) else {
        return false;
    };
    let known_positive = inits.get(pads.as_str()).is_some_and(|t| {
        matches!(crate::model::proto::tensor_from_proto(t, None),
            Ok(crate::tensor::Tensor::I64(a)) if a.iter().all(|&v| v >= 0))
    });
    constant_mode && !known_positive
}

/// Whether tract's expansion of Gemm `n` would multiply by a float32 constant: it has a `C` or an `alpha` ≠ 1.
fn scaled_gemm(n: &NodeProto) -> bool {
    let c = n.input.get(2).is_some_and(|c| !c.is_empty());
    let alpha = attr(n, "alpha").map_or(1.0, |a| a.f);
    n.output.len() == 1 && (c || alpha != 1.0)
}

/// `Gemm(A, B, C)` as `Gemm(A, B)` (transposes kept, alpha 1), `· alpha` and `+ beta · C`, with f64 constants.
fn split_gemm(n: &NodeProto) -> (Vec<NodeProto>, Vec<TensorProto>) {
    let mut b = Builder {
        node: n,
        nodes: vec![],
        consts: vec![],
    };
    let f = |name: &str| attr(n, name).map_or(1.0, |a| a.f as f64);
    let (alpha, beta) = (f("alpha"), f("beta"));
    let c = n.input.get(2).filter(|c| !c.is_empty() && beta != 0.0);
    let y = n.output[0].as_str();
    let last = |done: bool| (done && c.is_none()).then_some(y);
    let mut ab = b.op("Gemm", &[&n.input[0], &n.input[1]], last(alpha == 1.0));
    if let Some(k) = b.nodes.last_mut() {
        k.attribute = n
            .attribute
            .iter()
            .filter(|a| a.name == "transA" || a.name == "transB")
            .cloned()
            .collect();
    }
    if alpha != 1.0 {
        let a = b.constant(alpha);
        ab = b.op("Mul", &[&ab, &a], last(true));
    }
    if let Some(c) = c {
        let bc = match beta == 1.0 {
            true => c.clone(),
            false => {
                let k = b.constant(beta);
                b.op("Mul", &[c, &k], None)
            }
        };
        b.op("Add", &[&ab, &bc], Some(y));
    }
    (b.nodes, b.consts)
}

/// The replacement nodes and constants for `n`, or `None` to keep it as it is.
fn replace(n: &NodeProto) -> Option<(Vec<NodeProto>, Vec<TensorProto>)> {
    if !(n.domain.is_empty() || n.domain == "ai.onnx") || n.input.is_empty() || n.output.len() != 1
    {
        return None;
    }

    let mut b = Builder {
        node: n,
        nodes: vec![],
        consts: vec![],
    };
    let (x, y) = (n.input[0].as_str(), n.output[0].as_str());
    let (_, expand) = expansions::EXPANSIONS
        .iter()
        .find(|(op, _)| *op == n.op_type)?;
    if !expand(&mut b, x, y) {
        return None;
    }
    Some((b.nodes, b.consts))
}

/// Name prefix of the copies [`clamp_slice_sentinels`] makes (no ONNX node index: never attributed to a node).
pub const I32_COPY: &str = "i32_copy/";

/// Where a `Concat` joins an int64 initializer holding a value beyond the i32 range into a `Slice`'s starts or
/// ends, the `Slice` reads a copy of that `Concat` with the value clamped (the same slice for any axis shorter than
/// 2³¹); the original `Concat`, whose value is compared, is joined by phantom's own kernel (`contrib/concat.rs`).
/// Returns how many were copied.
fn clamp_slice_sentinels(g: &mut GraphProto) -> usize {
    use std::collections::{HashMap, HashSet};
    let bounds: HashSet<String> = g
        .node
        .iter()
        .filter(|n| n.op_type == "Slice")
        .flat_map(|n| n.input.iter().skip(1).take(2).cloned())
        .collect();
    // Only the initializers a Concat joins into a bound are decoded (a model's int64 tables can be large).
    let joined: HashSet<&str> = g
        .node
        .iter()
        .filter(|n| n.op_type == "Concat" && n.output.first().is_some_and(|o| bounds.contains(o)))
        .flat_map(|n| n.input.iter().map(|s| s.as_str()))
        .collect();
    let (lo, hi) = (i32::MIN as i64, i32::MAX as i64);
    let mut clamped: HashMap<String, String> = HashMap::new();
    let mut new_inits = vec![];
    for t in g
        .initializer
        .iter()
        .filter(|t| t.data_type == 7 && joined.contains(t.name.as_str()))
    {
        let Ok(crate::tensor::Tensor::I64(a)) = crate::model::proto::tensor_from_proto(t, None)
        else {
            continue;
        };
        if a.iter().any(|&x| x < lo || x > hi) {
            let name = format!("{}\u{1}i32", t.name);
            new_inits.push(TensorProto {
                name: name.clone(),
                dims: t.dims.clone(),
                data_type: 7,
                int64_data: a.iter().map(|&x| x.clamp(lo, hi)).collect(),
                ..Default::default()
            });
            clamped.insert(t.name.clone(), name);
        }
    }
    let mut copies: HashMap<String, String> = HashMap::new();
    let mut added = vec![];
    for n in g.node.iter().filter(|n| n.op_type == "Concat") {
        let Some(out) = n.output.first().filter(|o| bounds.contains(*o)) else {
            continue;
        };
        if !n.input.iter().any(|i| clamped.contains_key(i)) {
            continue;
        }
        let copy = format!("{out}\u{1}i32");
        let mut c = n.clone();
        c.name = format!("{I32_COPY}{}", n.name);
        c.output = vec![copy.clone()];
        for i in c.input.iter_mut() {
            if let Some(k) = clamped.get(i) {
                *i = k.clone();
            }
        }
        added.push(c);
        copies.insert(out.clone(), copy);
    }
    for n in g.node.iter_mut().filter(|n| n.op_type == "Slice") {
        for i in n.input.iter_mut().skip(1).take(2) {
            if let Some(c) = copies.get(i) {
                *i = c.clone();
            }
        }
    }
    for n in g.node.iter_mut().filter(|n| n.op_type == "Concat") {
        if n.output.first().is_some_and(|o| copies.contains_key(o)) {
            n.op_type = format!("{}Concat", super::contrib::PREFIX);
        }
    }
    let count = added.len();
    if count > 0 {
        // Each copy goes right after the node it copies: before every Slice that reads it.
        for c in added {
            let original = c.name.trim_start_matches(I32_COPY);
            let at = g
                .node
                .iter()
                .position(|n| n.name == original)
                .map_or(0, |k| k + 1);
            g.node.insert(at, c);
        }
        g.initializer.extend(new_inits);
    }
    count
}

/// Values of `g` computed from its initializers, `Constant`s and shapes alone: tract computes them while typing the
/// model (graph inputs, and anything read from an enclosing graph, are not).
fn folded_at_typing(g: &GraphProto) -> std::collections::HashSet<String> {
    let mut folded: std::collections::HashSet<String> =
        g.initializer.iter().map(|t| t.name.clone()).collect();
    for n in &g.node {
        let from_shape = matches!(n.op_type.as_str(), "Shape" | "Size");
        let has_body = n
            .attribute
            .iter()
            .any(|a| a.g.is_some() || !a.graphs.is_empty());
        let inputs_folded = n.input.iter().all(|i| i.is_empty() || folded.contains(i));
        if from_shape || (!has_body && inputs_folded && !is_random(&n.op_type)) {
            folded.extend(n.output.iter().cloned());
        }
    }
    folded
}

/// Ops whose output is drawn at random: never folded.
fn is_random(op: &str) -> bool {
    op.starts_with("Random") || op == "Multinomial" || op == "Bernoulli"
}

/// `Sigmoid(x)` as `1 / (1 + exp(−x))`, for an `x` tract folds at typing ([`folded_at_typing`]).
fn folded_sigmoid(n: &NodeProto) -> (Vec<NodeProto>, Vec<TensorProto>) {
    let mut b = Builder {
        node: n,
        nodes: vec![],
        consts: vec![],
    };
    let one = b.constant(1.0);
    let neg = b.op("Neg", &[&n.input[0]], None);
    let exp = b.op("Exp", &[&neg], None);
    let den = b.op("Add", &[&exp, &one], None);
    b.op("Div", &[&one, &den], Some(&n.output[0]));
    (b.nodes, b.consts)
}

/// Applies the rewrites to `g` and its bodies; returns how many nodes were rewritten.
pub fn rewrite(g: &mut GraphProto) -> usize {
    let mut count = clamp_slice_sentinels(g);
    let folded = folded_at_typing(g);
    let croppable: std::collections::HashSet<String> = {
        let inits = g.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
        g.node
            .iter()
            .filter(|n| n.op_type == "Pad" && may_crop(n, &inits))
            .map(|n| n.name.clone())
            .collect()
    };
    let mut out = Vec::with_capacity(g.node.len());
    for mut n in std::mem::take(&mut g.node) {
        for a in n.attribute.iter_mut() {
            for sg in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                count += rewrite(sg);
            }
        }
        if n.op_type == "Selu" {
            for (name, default) in [("alpha", 1.673_263_2_f32), ("gamma", 1.050_701_f32)] {
                if attr(&n, name).is_none() {
                    n.attribute.push(AttributeProto {
                        name: name.into(),
                        r#type: AttributeType::Float as i32,
                        f: default,
                        ..Default::default()
                    });
                }
            }
        }
        let rewritten = match n.op_type.as_str() {
            "Pad" if !croppable.contains(&n.name) => None,
            "Gemm" => scaled_gemm(&n).then(|| split_gemm(&n)),
            "FusedConv" => super::fused_conv::expand(&n),
            _ if n.domain == super::nchwc::DOMAIN => super::nchwc::expand(&n),
            "Sigmoid" if n.input.first().is_some_and(|x| folded.contains(x)) => {
                Some(folded_sigmoid(&n))
            }
            _ => replace(&n),
        };
        match rewritten {
            Some((nodes, consts)) => {
                count += 1;
                out.extend(nodes);
                g.initializer.extend(consts);
            }
            None => out.push(n),
        }
    }
    g.node = out;
    count
}

/// The inputs of the `Range` node named `name` reshaped to scalars (a one-element tensor of any rank becomes its
/// element; more elements fail at run time, as the spec has them). `false` where there is no such node or it was
/// done already.
pub fn scalar_range_inputs(g: &mut GraphProto, name: &str) -> bool {
    let Some(at) = g
        .node
        .iter()
        .position(|n| n.name == name && n.op_type == "Range")
    else {
        return false;
    };
    let shape = format!("{name}.rw_scalar");
    if g.initializer.iter().any(|t| t.name == shape) {
        return false;
    }
    g.initializer.push(TensorProto {
        name: shape.clone(),
        dims: vec![0],
        data_type: 7,
        ..Default::default()
    });
    let inputs = g.node[at].input.clone();
    let mut reshapes = vec![];
    for (k, x) in inputs.iter().enumerate() {
        let scalar = format!("{x}__phantom_scalar{k}_{name}");
        reshapes.push(NodeProto {
            name: format!("{name}.rw{k}"),
            op_type: "Reshape".into(),
            input: vec![x.clone(), shape.clone()],
            output: vec![scalar.clone()],
            ..Default::default()
        });
        g.node[at].input[k] = scalar;
    }
    g.node.splice(at..at, reshapes);
    true
}
