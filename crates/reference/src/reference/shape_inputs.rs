//! Graph inputs whose values decide shapes: a `Reshape`'s target shape, a `Slice`'s starts and ends, a `Reduce*`'s
//! axes, a `Resize`'s sizes, given as graph inputs rather than initializers (as the ONNX conformance suite and
//! cut models do), and inputs tract requires constant (BatchNormalization's parameters). tract types a model
//! before it runs, so it needs these values then: the reference hands it the
//! run's values of such inputs (given with `--input`, generated, or a cut's boundary values) as typing facts
//! ([`InputFact`]). Inputs read directly at such a position are handed over; so are small integer inputs from which
//! such a value is computed (a function's expansion computes a `Pad`'s pads from a `shape` input through `Max`, `Sub`,
//! `Div`, `Concat`): integer arithmetic folds exactly. The walk back stops at `Shape` and `Size`, which read no
//! values, and nothing else is handed over, so nothing else is folded at import.

use std::collections::HashSet;

use tract_onnx::prelude::*;

use crate::model::inputs::Inputs;
use crate::model::Graph;

/// What typing the model needs of a graph input: its name, element type and shape, and its value where it decides
/// shapes (read at a position `positions` lists).
#[derive(Clone, Debug, PartialEq)]
pub struct InputFact {
    pub name: String,
    pub dtype: crate::tensor::DType,
    pub shape: Vec<usize>,
    pub value: Option<crate::tensor::Tensor>,
}

impl InputFact {
    /// An input known by its type and shape alone.
    pub fn typed(name: String, dtype: crate::tensor::DType, shape: Vec<usize>) -> InputFact {
        InputFact {
            name,
            dtype,
            shape,
            value: None,
        }
    }
}

/// The most elements of an integer input handed over because a shape is computed from it (a shape vector's, not a
/// batch of token ids').
const DERIVED_MAX: usize = 16;

/// The typing facts of `inputs`, with the values of those that decide shapes.
pub(super) fn facts_of(graph: &Graph, inputs: &Inputs) -> Vec<InputFact> {
    let (direct, derived) = (deciding(graph), deciding_through(graph));
    let hand = |n: &String, t: &crate::tensor::Tensor| {
        direct.contains(n)
            || (derived.contains(n) && !t.dtype().is_float() && t.len() <= DERIVED_MAX)
    };
    (inputs.tensors.iter())
        .map(|(n, t)| InputFact {
            value: hand(n, t).then(|| t.clone()),
            ..InputFact::typed(n.clone(), t.dtype(), t.shape().to_vec())
        })
        .collect()
}

/// The tract fact of graph input `f`: floats as f64 when `wide`; with its value where it decides shapes.
pub(super) fn input_fact(f: &InputFact, wide: bool) -> InferenceFact {
    let dt = if wide && f.dtype.is_float() {
        f64::datum_type()
    } else {
        crate::model::tract::datum_type(f.dtype)
    };
    match &f.value {
        Some(t) if wide || !t.dtype().is_float() => {
            InferenceFact::from(crate::model::tract::to_tract_f64(t).into_tensor())
        }
        _ => InferenceFact::dt_shape(dt, f.shape.iter().copied().collect::<TVec<_>>()),
    }
}

/// The input positions of an op (default domain) whose values decide its output's shape or layout.
fn positions(op: &str) -> &'static [usize] {
    match op {
        "Reshape" | "Expand" | "Tile" | "Split" | "Squeeze" | "Unsqueeze" | "CumSum"
        | "CumProd" | "TopK" | "OneHot" | "Upsample" | "CenterCropPad" | "Trilu" | "AffineGrid"
        | "Compress" => &[1],
        "ConstantOfShape" | "HannWindow" | "HammingWindow" | "BlackmanWindow" | "StringSplit"
        | "StringNormalizer" => &[0],
        "Slice" => &[1, 2, 3, 4],
        "Pad" => &[1, 3],
        "Resize" => &[1, 2, 3],
        "Range" => &[0, 1, 2],
        "Col2Im" => &[1, 2],
        "MaxUnpool" => &[2],
        // Its output's length is the number of boxes kept: typing needs every input.
        "NonMaxSuppression" => &[0, 1, 2, 3, 4],
        // Its outputs' lengths are the number of distinct values of X.
        "Unique" => &[0],
        // Its output's shape is the encoded image's.
        "ImageDecoder" => &[0],
        // Not shapes, but tract builds its (inference-mode) BatchNormalization only from constant parameters.
        "BatchNormalization" => &[1, 2, 3, 4],
        "DFT" => &[1, 2],
        "STFT" => &[1, 3],
        "MelWeightMatrix" => &[0, 1, 2, 3, 4],
        op if op.starts_with("Reduce") => &[1],
        _ => &[],
    }
}

/// The names of the graph inputs of `graph` read at a shape-deciding position of some node.
pub(super) fn deciding(graph: &Graph) -> HashSet<String> {
    let inputs: HashSet<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    let mut out = HashSet::new();
    for n in graph.nodes.iter().filter(|n| n.domain.is_empty()) {
        for &k in positions(&n.op_type) {
            if let Some(name) = n.inputs.get(k).filter(|i| inputs.contains(i.as_str())) {
                out.insert(name.clone());
            }
        }
    }
    out
}

/// The names of the graph inputs from which a value read at a shape-deciding position is computed, through any
/// nodes but `Shape` and `Size`.
fn deciding_through(graph: &Graph) -> HashSet<String> {
    let inputs: HashSet<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    let producers = graph.producers();
    let mut stack: Vec<&str> = (graph.nodes.iter())
        .filter(|n| n.domain.is_empty())
        .flat_map(|n| {
            positions(&n.op_type)
                .iter()
                .filter_map(|&k| n.inputs.get(k))
        })
        .map(|s| s.as_str())
        .collect();
    let (mut seen, mut out) = (HashSet::new(), HashSet::new());
    while let Some(v) = stack.pop() {
        if v.is_empty() || !seen.insert(v) {
            continue;
        }
        if inputs.contains(v) {
            out.insert(v.to_string());
        }
        let Some(&p) = producers.get(v) else { continue };
        let node = &graph.nodes[p];
        if !matches!(node.op_type.as_str(), "Shape" | "Size") {
            stack.extend(node.inputs.iter().map(|s| s.as_str()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_cover_the_shape_inputs() {
        assert_eq!(positions("Reshape"), &[1]);
        assert_eq!(positions("ReduceLogSumExp"), &[1]);
        assert_eq!(positions("Slice"), &[1, 2, 3, 4]);
        assert!(positions("Add").is_empty());
    }
}
