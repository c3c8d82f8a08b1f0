//! A cause is listed only where it can explain the error: a culprit wrong on its own (fed the reference's inputs)
//! does not list an upstream node's cancellation, whose error it never received.

use std::path::Path;

use tract_onnx::pb;

use crate::common::{
    attr_ints, ensure_runtime, f32_tensor, node, phantom, read_json, value, write_model,
};

/// `z = (y − mean(y)) · W2` with `y = x·W + 10,000`: the `Sub` cancels four decimal digits; `scale` multiplies W2.
fn model(path: &Path, scale: f32) {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut draw = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.4
            })
            .collect()
    };
    let (w, w2) = (draw(64 * 64), draw(64 * 16));
    let mut mean = node("ReduceMean", &["y"], "mean");
    mean.attribute.push(attr_ints("axes", &[1]));
    let graph = pb::GraphProto {
        name: "cancel_then_matmul".into(),
        node: vec![
            node("MatMul", &["x", "w"], "xw"),
            node("Add", &["xw", "b"], "y"),
            mean,
            node("Sub", &["y", "mean"], "d"),
            node("MatMul", &["d", "w2"], "z"),
        ],
        initializer: vec![
            f32_tensor("w", vec![64, 64], w),
            f32_tensor("b", vec![64], vec![10_000.0; 64]),
            f32_tensor("w2", vec![64, 16], w2.iter().map(|v| v * scale).collect()),
        ],
        input: vec![value("x", &[1, 64])],
        output: vec![value("z", &[1, 16])],
        ..Default::default()
    };
    write_model(path, graph, 13);
}

#[test]
fn a_culprit_wrong_on_its_own_lists_no_upstream_cancellation() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (clean, faulty) = (
        dir.path().join("clean.onnx"),
        dir.path().join("faulty.onnx"),
    );
    model(&clean, 1.0);
    model(&faulty, 1.01);
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        clean.to_str().unwrap(),
        "--target-model",
        faulty.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let r = read_json(&json);
    let z = (r["verdict"]["culprits"].as_array().unwrap().iter())
        .find(|c| c["node"] == "z")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(z["basis"], "introduced", "{out}");
    let kinds: Vec<&str> = (z["causes"].as_array().unwrap().iter())
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"weights_differ"), "{out}");
    assert!(!kinds.contains(&"cancellation"), "{kinds:?}: {out}");
}
