//! NaN in given inputs is a value, and the reference computes with it as the ONNX reference implementation
//! (numpy) does: `Max`, `Min`, `Relu`, `Clip`, `Celu`, `HardSigmoid` and the max reductions propagate it; `ArgMax`,
//! `ArgMin` and `Hardmax` answer the first NaN's index; `TopK` ranks it above every number. The expected values are
//! `onnx.reference.ReferenceEvaluator`'s on the same models (tract's own f64 loops dropped NaN in each of these).
//! And values at the ends of the range do not overflow where the exact result is finite.

use phantom::model::inputs::Inputs;
use phantom::runner::reference::ReferenceRunner;
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
    run_on(n, inits, (&X, x_dims, DType::F32), outs)
}

/// Runs a one-node model on input `x` of the given values, dims and type (and `Y` when the node reads it).
fn run_on(
    n: pb::NodeProto,
    inits: Vec<pb::TensorProto>,
    x: (&[f64], &[i64], DType),
    outs: usize,
) -> Vec<Vec<f64>> {
    let (x_values, x_dims, x_type) = x;
    let dir = tempfile::tempdir().unwrap();
    let reads_y = n.input.iter().any(|i| i == "y");
    let mut input = vec![value("x", x_dims)];
    if let Some(pb::type_proto::Value::TensorType(t)) =
        input[0].r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = x_type.onnx_code();
    }
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
    let tensor = |v: &[f64], s: &[usize], dt| {
        let a = ndarray::ArrayD::from_shape_vec(s, v.to_vec()).unwrap();
        Tensor::from_f64(dt, a).unwrap()
    };
    let mut inputs = Inputs::default();
    inputs
        .tensors
        .push(("x".into(), tensor(x_values, &shape, x_type)));
    if reads_y {
        inputs
            .tensors
            .push(("y".into(), tensor(&Y, &[2, 4], DType::F32)));
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

/// Where tract overflowed: Softplus and ReduceLogSumExp from x ≈ 710 (inside float32's range), Asinh and Acosh of
/// f64 values beyond 9e307.
#[test]
fn large_values_do_not_overflow() {
    let big = [1000.0, 0.0, -1000.0, 3e38];
    let softplus = run_on(
        node("Softplus", &["x"], "o"),
        vec![],
        (&big, &[4], DType::F32),
        1,
    );
    same(&softplus[0], &[1000.0, std::f64::consts::LN_2, 0.0, 3e38]);
    let mut lse = node("ReduceLogSumExp", &["x", "axes"], "o");
    lse.attribute.push(attr_int("keepdims", 0));
    let axes = vec![i64_tensor("axes", vec![1], vec![1])];
    let rows = [1000.0, 1000.0, -INF, -INF];
    let lse = run_on(lse, axes, (&rows, &[2, 2], DType::F32), 1);
    same(&lse[0], &[1000.0 + std::f64::consts::LN_2, -INF]);
    let huge = [1e308, -1e308];
    let asinh = run_on(
        node("Asinh", &["x"], "o"),
        vec![],
        (&huge, &[2], DType::F64),
        1,
    );
    same(&asinh[0], &[709.889_355_822_726, -709.889_355_822_726]);
    let acosh = run_on(
        node("Acosh", &["x"], "o"),
        vec![],
        (&huge[..1], &[1], DType::F64),
        1,
    );
    same(&acosh[0], &[709.889_355_822_726]);
}
