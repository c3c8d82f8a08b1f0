//! NaN in given inputs is a value, and the reference computes with it as the ONNX reference implementation
//! (numpy) does: `Max`, `Min`, `Relu`, `Clip`, `Celu`, `HardSigmoid` and the max reductions propagate it; `ArgMax`,
//! `ArgMin` and `Hardmax` answer the first NaN's index; `TopK` ranks it above every number. The expected values are
//! `onnx.reference.ReferenceEvaluator`'s on the same models (tract's own f64 loops dropped NaN in each of these).

use phantom::model::inputs::Inputs;
use phantom::runner::{reference::ReferenceRunner, Runner};
use phantom::tensor::{DType, Tensor};
use tract_onnx::pb;

use crate::common::{attr_int, f32_tensor, i64_tensor, node, value, write_model};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;
/// Input `x`, shape [2, 4].
const X: [f64; 8] = [NAN, -2.0, 0.5, 3.0, 1.0, NAN, -INF, INF];
/// Input `y`, shape [2, 4].
const Y: [f64; 8] = [1.0, 1.0, NAN, 1.0, NAN, 2.0, 0.0, -1.0];

/// Runs a one-node model on `X` (and `Y` when the node reads it) and returns its outputs' values.
fn run(
    n: pb::NodeProto,
    inits: Vec<pb::TensorProto>,
    x_dims: &[i64],
    outs: usize,
) -> Vec<Vec<f64>> {
    let dir = tempfile::tempdir().unwrap();
    let reads_y = n.input.iter().any(|i| i == "y");
    let mut input = vec![value("x", x_dims)];
    if reads_y {
        input.push(value("y", &[2, 4]));
    }
    let names: Vec<String> = n.output.clone();
    let g = pb::GraphProto {
        name: "nan".into(),
        node: vec![n],
        initializer: inits,
        input,
        output: names
            .iter()
            .take(outs)
            .map(|o| pb::ValueInfoProto {
                name: o.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let path = write_model(&dir.path().join("m.onnx"), g, 21);
    let graph = phantom::model::load(&path).unwrap();
    let shape: Vec<usize> = x_dims.iter().map(|&d| d as usize).collect();
    let tensor = |v: &[f64], s: &[usize]| {
        Tensor::from_f64(
            DType::F32,
            ndarray::ArrayD::from_shape_vec(s, v.to_vec()).unwrap(),
        )
        .unwrap()
    };
    let mut inputs = Inputs::default();
    inputs.tensors.push(("x".into(), tensor(&X, &shape)));
    if reads_y {
        inputs.tensors.push(("y".into(), tensor(&Y, &[2, 4])));
    }
    let out = ReferenceRunner::default().run(&graph, &inputs).unwrap();
    (names.iter().take(outs))
        .map(|o| out.values[o].to_f64_array().iter().copied().collect())
        .collect()
}

fn unary(op: &str) -> Vec<f64> {
    run(node(op, &["x"], "o"), vec![], &[2, 4], 1).remove(0)
}

/// Equal element by element, NaN equal to NaN.
#[track_caller]
fn same(got: &[f64], want: &[f64]) {
    let eq = got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 1e-7 * w.abs());
    assert!(eq, "got {got:?}, want {want:?}");
}

#[test]
fn elementwise_extrema_propagate_nan() {
    same(&unary("Relu"), &[NAN, 0.0, 0.5, 3.0, 1.0, NAN, 0.0, INF]);
    let max = run(node("Max", &["x", "y"], "o"), vec![], &[2, 4], 1).remove(0);
    same(&max, &[NAN, 1.0, NAN, 3.0, NAN, NAN, 0.0, INF]);
    let min = run(node("Min", &["x", "y"], "o"), vec![], &[2, 4], 1).remove(0);
    same(&min, &[NAN, -2.0, NAN, 1.0, NAN, NAN, -INF, -1.0]);
    let bounds = vec![
        f32_tensor("lo", vec![], vec![-1.0]),
        f32_tensor("hi", vec![], vec![1.0]),
    ];
    let clip = run(node("Clip", &["x", "lo", "hi"], "o"), bounds, &[2, 4], 1).remove(0);
    same(&clip, &[NAN, -1.0, 0.5, 1.0, 1.0, NAN, -1.0, 1.0]);
    same(
        &unary("Celu"),
        &[NAN, -0.864_664_716_763_387_3, 0.5, 3.0, 1.0, NAN, -1.0, INF],
    );
    same(
        &unary("HardSigmoid"),
        &[NAN, 0.1, 0.6, 1.0, 0.7, NAN, 0.0, 1.0],
    );
}

#[test]
fn max_reductions_propagate_nan() {
    let axes = || vec![i64_tensor("axes", vec![1], vec![1])];
    let mut reduce_max = node("ReduceMax", &["x", "axes"], "o");
    reduce_max.attribute.push(attr_int("keepdims", 0));
    same(&run(reduce_max, axes(), &[2, 4], 1)[0], &[NAN, NAN]);
    same(
        &run(node("GlobalMaxPool", &["x"], "o"), vec![], &[1, 2, 2, 2], 1)[0],
        &[NAN, NAN],
    );
}

#[test]
fn arg_reductions_answer_the_first_nan() {
    for op in ["ArgMax", "ArgMin"] {
        let mut n = node(op, &["x"], "o");
        n.attribute.push(attr_int("axis", 1));
        same(&run(n, vec![], &[2, 4], 1)[0], &[0.0, 1.0]);
    }
    same(&unary("Hardmax"), &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
}

#[test]
fn top_k_ranks_nan_above_every_number() {
    let mut n = node("TopK", &["x", "k"], "values");
    n.output.push("indices".into());
    n.attribute.push(attr_int("axis", 1));
    let out = run(n, vec![i64_tensor("k", vec![1], vec![2])], &[2, 4], 2);
    same(&out[0], &[NAN, 3.0, NAN, INF]);
    same(&out[1], &[0.0, 3.0, 1.0, 3.0]);
}
