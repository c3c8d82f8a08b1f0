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

/// A causal mask added to attention scores (broadcast over heads) does not cancel: each element is either a score
/// plus 0 or −3.4e38 plus a score. The cancellation factor is taken element by element, operands broadcast to the
/// result; before, the largest operand anywhere was set against the smallest result anywhere (a factor of 1e44).
#[test]
fn a_broadcast_mask_is_no_cancellation() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("mask.onnx");
    let t = 8;
    let mask: Vec<f32> = (0..t * t)
        .map(|i| if i % t > i / t { f32::MIN } else { 0.0 })
        .collect();
    let mut softmax = node("Softmax", &["s"], "p");
    softmax.attribute.push(crate::common::attr_int("axis", -1));
    let graph = pb::GraphProto {
        name: "masked_scores".into(),
        node: vec![node("Add", &["x", "mask"], "s"), softmax],
        initializer: vec![f32_tensor("mask", vec![1, 1, t as i64, t as i64], mask)],
        input: vec![value("x", &[1, 2, t as i64, t as i64])],
        output: vec![value("p", &[1, 2, t as i64, t as i64])],
        ..Default::default()
    };
    write_model(&m, graph, 13);
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--precision",
        "fp16",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 1, "{out}{err}");
    let r = read_json(&json);
    let s = (r["verdict"]["culprits"].as_array().unwrap().iter())
        .find(|c| c["node"] == "s")
        .unwrap_or_else(|| panic!("{out}"));
    let kinds: Vec<&str> = (s["causes"].as_array().unwrap().iter())
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"initializer_range"), "{kinds:?}: {out}");
    assert!(!kinds.contains(&"cancellation"), "{kinds:?}: {out}");
}
