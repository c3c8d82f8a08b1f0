//! Hostile shapes (issue 55 item 5): a LayerNormalization axis below the rank, stored data that contradicts its
//! dims, an impossible Reshape target and a pool kernel larger than its input are refused before any engine runs,
//! exit 2 naming the node, never a hang or a wrong verdict.

use tract_onnx::pb;

use crate::common::*;

/// A LayerNormalization whose axis is below −rank, on a value whose rank only shape inference knows: tract's
/// shape rules never finish on it (they count to 2^64), so phantom evaluates it and refuses the axis, on every path.
#[test]
fn a_layer_norm_axis_below_the_rank_is_refused_not_hung() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut ln = node("LayerNormalization", &["r", "s"], "y");
    ln.name = "ln".into();
    ln.attribute = vec![attr_int("axis", -10)];
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![node("Relu", &["x"], "r"), ln],
        initializer: vec![f32_tensor("s", vec![8], vec![1.0; 8])],
        input: vec![value("x", &[1, 3, 8, 8])],
        output: vec![value("y", &[1, 3, 8, 8])],
        ..Default::default()
    };
    let mut valid = g.clone();
    valid.node[1].attribute = vec![attr_int("axis", -1)];
    let m = write_model(&dir.path().join("ln.onnx"), g, 17);
    let m = m.to_str().unwrap();
    let ok = write_model(&dir.path().join("ok.onnx"), valid, 17);
    let ok = ok.to_str().unwrap();
    for args in [
        vec!["run", m, "--runner", "reference", "--timeout", "60"],
        vec!["onnx", m, "--ep", "wgpu", "--timeout", "60"],
        // Beside a valid --target-model the node is not stood in for: the model itself is wrong.
        vec!["onnx", m, "--target-model", ok, "--timeout", "60"],
    ] {
        refused(&args, &["axis -10"]);
    }
}

/// Stored data that contradicts its dims (a Constant of dims [0] holding one float) and a Reshape target no tensor
/// can have (INT64_MAX) are refused before any engine runs, naming the node, on the reference and on wgpu.
#[test]
fn data_against_its_dims_and_impossible_reshapes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut konst = node("Constant", &[], "k");
    konst.attribute = vec![pb::AttributeProto {
        name: "value".into(),
        r#type: pb::attribute_proto::AttributeType::Tensor as i32,
        t: Some(f32_tensor("", vec![0], vec![1.0])),
        ..Default::default()
    }];
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![konst, node("Add", &["x", "k"], "y")],
        input: vec![value("x", &[0])],
        output: vec![value("y", &[0])],
        ..Default::default()
    };
    let c = write_model(&dir.path().join("c.onnx"), g, 17);
    let mut reshape = node("Reshape", &["r", "s"], "y");
    reshape.name = "rs".into();
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![node("Relu", &["x"], "r"), reshape],
        initializer: vec![i64_tensor("s", vec![2], vec![i64::MAX, 1])],
        input: vec![value("x", &[2, 3])],
        output: vec![value("y", &[6, 1])],
        ..Default::default()
    };
    let r = write_model(&dir.path().join("r.onnx"), g, 17);
    for (m, names) in [
        (c.to_str().unwrap(), ["Constant", "holds 1"]),
        (r.to_str().unwrap(), ["`rs`", "9223372036854775807"]),
    ] {
        for args in [
            vec!["run", m, "--runner", "reference", "--timeout", "60"],
            vec!["onnx", m, "--ep", "wgpu", "--timeout", "60"],
        ] {
            refused(&args, &names);
        }
    }
}

/// A pool whose kernel spans more than its padded input: ONNX Runtime fails it ("output dimension is negative"),
/// tract would compute a 1×1 output; phantom refuses it before the reference computes any value, on every path.
#[test]
fn a_pool_kernel_larger_than_its_input_is_refused() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut pool = node("MaxPool", &["r"], "y");
    pool.name = "pool".into();
    pool.attribute = vec![attr_ints("kernel_shape", &[10, 10])];
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![node("Relu", &["x"], "r"), pool],
        input: vec![value("x", &[1, 3, 8, 8])],
        output: vec![value("y", &[1, 3, 1, 1])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("pool.onnx"), g, 17);
    let m = m.to_str().unwrap();
    for args in [
        vec!["run", m, "--runner", "reference"],
        vec!["onnx", m, "--ep", "wgpu"],
    ] {
        refused(&args, &["`pool`", "spans 10"]);
    }
    // On ONNX Runtime its own error may come first; either names the node.
    refused(&["onnx", m], &["pool"]);
}
