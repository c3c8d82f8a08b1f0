//! Boundary semantics of phantom's shaders, as the ONNX spec states them: `ThresholdedRelu` keeps `x` only when
//! `x > alpha` strictly, `Round` takes halves to the even neighbour, comparisons are strict or not as named and false
//! on NaN, `Max`/`Min`/`Relu`/`Clip` propagate NaN, `ArgMax`/`ArgMin` answer the first NaN and the first (or last)
//! of equals, `TopK` ranks NaN above every number and equals in index order, `Trilu` keeps the diagonal k in both
//! modes, `IsInf` detects the signs it is asked to. Each case puts an input exactly on the boundary.

use phantom::model::inputs::Inputs;
use phantom::runner::wgpu::{F16Mode, WgpuOptions, WgpuRunner};
use phantom::tensor::Tensor;
use tract_onnx::pb;

use crate::common::*;
use crate::wgpu::have_adapter;

/// The output of the one-node model `op` (with `attrs`) on the f32 inputs `xs` (same length), computed on the
/// device (the test fails if the node ran on the host).
fn on_device_n(op: &str, attrs: Vec<pb::AttributeProto>, xs: &[&[f32]]) -> Tensor {
    let n = xs[0].len() as i64;
    let names: Vec<String> = (0..xs.len()).map(|i| format!("x{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut nd = node(op, &refs, "y");
    nd.attribute = attrs;
    let graph = pb::GraphProto {
        name: op.into(),
        node: vec![nd],
        input: names.iter().map(|x| value(x, &[n])).collect(),
        output: vec![pb::ValueInfoProto {
            name: "y".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    on_device_graph(graph, xs).remove("y").unwrap()
}

/// Every output of `graph` (opset 17) with the f32 inputs `xs` as `x0`, `x1`…, computed on the device (the test
/// fails if a node ran on the host).
fn on_device_graph(
    graph: pb::GraphProto,
    xs: &[&[f32]],
) -> std::collections::HashMap<String, Tensor> {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let op = graph.node[0].op_type.clone();
    let path = write_model(&dir.path().join("m.onnx"), graph, 17);
    let graph = phantom::model::load(&path).unwrap();
    let lib = phantom::runner::ort_lib::locate(None, false).unwrap();
    let opts = WgpuOptions {
        adapter: None,
        f16: false,
        accumulate_f16: false,
        f16_mode: F16Mode::Auto,
    };
    let mut r = WgpuRunner::new(&opts, &lib).unwrap();
    let mut inputs = Inputs::default();
    for (i, x) in xs.iter().enumerate() {
        let t = Tensor::F32(ndarray::Array1::from(x.to_vec()).into_dyn());
        inputs.tensors.push((format!("x{i}"), t));
    }
    let out = r.run(&graph, &inputs).unwrap();
    assert!(
        out.placement.is_empty(),
        "{op} ran on the host: {:?}",
        out.placement
    );
    out.values.into_iter().collect()
}

/// The f32 result of the one-node model `op` on `x`, computed on the device.
fn on_device(op: &str, attrs: Vec<pb::AttributeProto>, x: &[f32]) -> Vec<f32> {
    let Tensor::F32(y) = on_device_n(op, attrs, &[x]) else {
        panic!("y is not f32")
    };
    y.iter().copied().collect()
}

/// A boolean result of the device.
fn bools(t: Tensor) -> Vec<bool> {
    let Tensor::Bool(b) = t else {
        panic!("not booleans: {:?}", t.dtype())
    };
    b.iter().copied().collect()
}

fn int(name: &str, i: i64) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Int as i32,
        i,
        ..Default::default()
    }
}

fn alpha(v: f32) -> pb::AttributeProto {
    pb::AttributeProto {
        name: "alpha".into(),
        r#type: pb::attribute_proto::AttributeType::Float as i32,
        f: v,
        ..Default::default()
    }
}

#[test]
fn thresholded_relu_is_strict_at_alpha() {
    if !have_adapter() {
        return;
    }
    let y = on_device("ThresholdedRelu", vec![alpha(2.0)], &[1.0, 2.0, 2.5, -3.0]);
    assert_eq!(y, vec![0.0, 0.0, 2.5, 0.0]);
}

#[test]
fn round_takes_halves_to_even() {
    if !have_adapter() {
        return;
    }
    let y = on_device("Round", vec![], &[0.5, 1.5, 2.5, -0.5, -1.5, 2.4]);
    assert_eq!(y, vec![0.0, 2.0, 2.0, -0.0, -2.0, 2.0]);
}

#[test]
fn comparisons_are_strict_or_not_as_named_and_false_on_nan() {
    if !have_adapter() {
        return;
    }
    let nan = f32::NAN;
    let (a, b) = ([1.0, 2.0, nan, 3.0], [2.0, 2.0, nan, 2.0]);
    let cmp = |op| bools(on_device_n(op, vec![], &[&a, &b]));
    assert_eq!(cmp("Less"), [true, false, false, false]);
    assert_eq!(cmp("LessOrEqual"), [true, true, false, false]);
    assert_eq!(cmp("Greater"), [false, false, false, true]);
    assert_eq!(cmp("GreaterOrEqual"), [false, true, false, true]);
    assert_eq!(cmp("Equal"), [false, true, false, false]);
    let x = [f32::INFINITY, f32::NEG_INFINITY, 1.0, nan];
    let inf = bools(on_device_n("IsInf", vec![int("detect_negative", 0)], &[&x]));
    assert_eq!(inf, [true, false, false, false]);
    assert_eq!(
        bools(on_device_n("IsNaN", vec![], &[&x])),
        [false, false, false, true]
    );
}

#[test]
fn extrema_propagate_nan() {
    if !have_adapter() {
        return;
    }
    let nan = f32::NAN;
    for op in ["Max", "Min"] {
        let Tensor::F32(y) = on_device_n(op, vec![], &[&[nan, 1.0, 2.0], &[1.0, nan, 3.0]]) else {
            panic!("{op}: not f32")
        };
        assert!(y[0].is_nan() && y[1].is_nan(), "{op}: {y:?}");
        assert_eq!(y[2], if op == "Max" { 3.0 } else { 2.0 });
    }
    let y = on_device("Relu", vec![], &[nan, -1.0, 2.0]);
    assert!(y[0].is_nan() && y[1..] == [0.0, 2.0], "Relu: {y:?}");
    let y = on_device("Clip", vec![], &[nan, -1.0]);
    assert!(y[0].is_nan() && y[1] == -1.0, "Clip: {y:?}");
}

#[test]
fn arg_reductions_answer_the_first_nan_and_first_or_last_of_equals() {
    if !have_adapter() {
        return;
    }
    let arg = |op, attrs, x: &[f32]| {
        let Tensor::I64(y) = on_device_n(op, attrs, &[x]) else {
            panic!("{op}: not int64")
        };
        y.iter().copied().collect::<Vec<i64>>()
    };
    let nan = f32::NAN;
    assert_eq!(arg("ArgMax", vec![], &[1.0, nan, 3.0, nan]), [1]);
    assert_eq!(arg("ArgMin", vec![], &[1.0, 0.0, nan]), [2]);
    assert_eq!(arg("ArgMax", vec![], &[3.0, 1.0, 3.0]), [0]);
    let last = vec![int("select_last_index", 1)];
    assert_eq!(arg("ArgMin", last, &[2.0, 1.0, 1.0]), [2]);
}

#[test]
fn topk_ranks_nan_above_every_number_and_equals_in_index_order() {
    if !have_adapter() {
        return;
    }
    let nan = f32::NAN;
    let x = [1.0, nan, 3.0, 1.0, 3.0];
    let topk = |largest: i64| {
        let mut nd = node("TopK", &["x0", "k"], "v");
        nd.output.push("i".into());
        nd.attribute = vec![int("largest", largest)];
        let graph = pb::GraphProto {
            name: "topk".into(),
            node: vec![nd],
            input: vec![value("x0", &[5])],
            initializer: vec![i64_tensor("k", vec![1], vec![3])],
            output: ["v", "i"]
                .iter()
                .map(|n| pb::ValueInfoProto {
                    name: n.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let mut out = on_device_graph(graph, &[&x]);
        let Some(Tensor::I64(i)) = out.remove("i") else {
            panic!("TopK's indices are not int64")
        };
        i.iter().copied().collect::<Vec<i64>>()
    };
    // As the ONNX reference sorts: NaN first when largest, last when smallest; equal values by index.
    assert_eq!(topk(1), [1, 2, 4]);
    assert_eq!(topk(0), [0, 3, 2]);
}

#[test]
fn trilu_keeps_the_kth_diagonal_in_both_modes() {
    if !have_adapter() {
        return;
    }
    let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let trilu = |upper: i64, k: i64| {
        let mut nd = node("Trilu", &["m", "k"], "y");
        nd.attribute = vec![int("upper", upper)];
        let graph = pb::GraphProto {
            name: "trilu".into(),
            node: vec![node("Reshape", &["x0", "shape"], "m"), nd],
            input: vec![value("x0", &[9])],
            initializer: vec![
                i64_tensor("shape", vec![2], vec![3, 3]),
                i64_tensor("k", vec![], vec![k]),
            ],
            output: vec![pb::ValueInfoProto {
                name: "y".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let Some(Tensor::F32(y)) = on_device_graph(graph, &[&x]).remove("y") else {
            panic!("Trilu gave no f32")
        };
        y.iter().copied().collect::<Vec<f32>>()
    };
    // [[1 2 3] [4 5 6] [7 8 9]]: j − i ≥ k (upper) or ≤ k (lower), the boundary diagonal kept by both.
    assert_eq!(trilu(1, 1), [0., 2., 3., 0., 0., 6., 0., 0., 0.]);
    assert_eq!(trilu(0, -1), [0., 0., 0., 4., 0., 0., 7., 8., 0.]);
    assert_eq!(trilu(1, 0), [1., 2., 3., 0., 5., 6., 0., 0., 9.]);
}

/// Integers cast to a float (sizes from shape arithmetic, as ONNX's AffineGrid function computes them) go to the
/// device as an upload of their exact values, rounded once: 2^24 + 1 becomes 2^24 in f32, as a Cast rounds it.
#[test]
fn integers_cast_to_float_are_rounded_once_on_upload() {
    if !have_adapter() {
        return;
    }
    let mut cast = node("Cast", &["ints"], "f");
    cast.attribute = vec![int("to", 1)];
    let graph = pb::GraphProto {
        name: "cast_ints".into(),
        node: vec![cast, node("Add", &["f", "x0"], "y")],
        input: vec![value("x0", &[4])],
        initializer: vec![i64_tensor(
            "ints",
            vec![4],
            vec![3, (1 << 24) + 1, 2049, -5],
        )],
        output: vec![pb::ValueInfoProto {
            name: "y".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let Some(Tensor::F32(y)) = on_device_graph(graph, &[&[0.0; 4]]).remove("y") else {
        panic!("no f32 y")
    };
    assert_eq!(
        y.iter().copied().collect::<Vec<f32>>(),
        [3.0, 16_777_216.0, 2049.0, -5.0]
    );
}
