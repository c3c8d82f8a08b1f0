//! An error born within tolerance and amplified past it downstream is traced to where it starts: the amplifier
//! names its origin (an `inherited` cause), and the origin is blamed when the numbers say the failure needs it.

use std::path::{Path, PathBuf};

use tract_onnx::pb;

use crate::common::{
    attr_int, attr_ints, ensure_runtime, f32_tensor, node, phantom, read_json, value, write_model,
};

/// `d = (x·W + b) − mean(x·W + b)`: a bias of 10,000 makes the subtraction cancel 4 decimal digits, so an error of
/// 0.05 in one bias element (1e-5 of the value's scale, within the `Add`'s tolerance; about 100× the rounding of
/// fp32 at 10,000, far from an anomaly) fails `d`, while the correctly rounded run keeps it within tolerance.
/// With `half`, the target's model stores `y` in float16 and reads it back (`y` then comes from a `Cast`).
fn cancelling(path: &Path, fault: f32, half: bool) {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut w = vec![];
    for _ in 0..64 * 64 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        w.push(((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.4);
    }
    let mut b = vec![10_000f32; 64];
    b[7] += fault;
    let mut mean = node("ReduceMean", &["y"], "mean");
    mean.attribute.push(attr_ints("axes", &[1]));
    let mut nodes = vec![
        node("MatMul", &["x", "w"], "xw"),
        node("Add", &["xw", "b"], "y"),
    ];
    if half {
        nodes[1].output[0] = "y32".into();
        let mut to16 = node("Cast", &["y32"], "y16");
        to16.attribute.push(attr_int("to", 10));
        let mut to32 = node("Cast", &["y16"], "y");
        to32.name = "y_to_fp32".into();
        to32.attribute.push(attr_int("to", 1));
        nodes.extend([to16, to32]);
    }
    nodes.extend([mean, node("Sub", &["y", "mean"], "d")]);
    let graph = pb::GraphProto {
        name: "cancelling".into(),
        node: nodes,
        initializer: vec![
            f32_tensor("w", vec![64, 64], w),
            f32_tensor("b", vec![64], b),
        ],
        input: vec![value("x", &[1, 64])],
        output: vec![value("d", &[1, 64])],
        ..Default::default()
    };
    write_model(path, graph, 13);
}

/// The clean model against its copy with `fault` in the bias (and `y` stored in float16 with `half`), in `dir`:
/// drift (exit 1) asserted; the clean model, the terminal output and the JSON report.
fn compared(dir: &Path, fault: f32, half: bool) -> (PathBuf, String, serde_json::Value) {
    ensure_runtime();
    let (clean, faulty) = (dir.join("clean.onnx"), dir.join("faulty.onnx"));
    cancelling(&clean, 0.0, false);
    cancelling(&faulty, fault, half);
    let json = dir.join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        clean.to_str().unwrap(),
        "--target-model",
        faulty.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    (clean, out, read_json(&json))
}

#[test]
fn an_amplified_bias_fault_is_traced_to_its_origin() {
    let dir = tempfile::tempdir().unwrap();
    let (clean, out, r) = compared(dir.path(), 0.05, false);
    let culprits = r["verdict"]["culprits"].as_array().unwrap();
    let by = |name: &str| culprits.iter().find(|c| c["node"] == name).unwrap();
    // The bias `Add` is within tolerance, and not an anomaly: only the trace names it.
    assert!(
        r["verdict"]["anomalies"].as_array().unwrap().is_empty(),
        "{out}"
    );
    let origin = by("y");
    assert_eq!(origin["basis"], "origin", "{out}");
    let ratio = origin["noise_ratio"].as_f64().unwrap();
    assert!((8.0..2048.0).contains(&ratio), "{ratio}");
    assert!(
        (origin["max_abs"].as_f64().unwrap() - 0.05).abs() < 0.005,
        "{out}"
    );
    // With --target-model the differing bias is its first cause.
    assert_eq!(origin["causes"][0]["kind"], "weights_differ", "{out}");
    // The amplifier: fails in the graph, passes alone, and names where what it amplifies starts.
    let sub = by("d");
    assert_eq!(sub["basis"], "cumulative", "{out}");
    let inherited = (sub["causes"].as_array().unwrap().iter())
        .find(|k| k["kind"] == "inherited")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(inherited["nodes"][0], "y");
    assert!(
        inherited["evidence"]["ideal_tolerance_used"]
            .as_f64()
            .unwrap()
            < 1.0
    );
    assert!(out.contains("culprit 1: node #1 Add `y`"), "{out}");
    // Without the fault the same model is clean: the trace blames nothing on rounding.
    let (code, out, _) = phantom(&["onnx", clean.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
}

/// The same amplifier when the target's model computes `y` otherwise (stored in float16 and read back: a `Cast`
/// where the reference has the `Add`): the chain `Add → Cast → Cast` runs alone in its place, so its own error is
/// measured (fp16's rounding at 10,000, about 2,000× fp32's) and the models' difference comes first.
#[test]
fn an_amplified_error_where_the_target_model_differs_is_traced_to_that_node() {
    let dir = tempfile::tempdir().unwrap();
    let (_, out, r) = compared(dir.path(), 0.0, true);
    let c = &r["verdict"]["culprits"];
    assert_eq!(c[0]["node"], "y", "{out}");
    assert_eq!(c[0]["basis"], "origin", "{out}");
    let ratio = c[0]["noise_ratio"]
        .as_f64()
        .unwrap_or_else(|| panic!("measured alone: {out}"));
    assert!(
        (1000.0..5000.0).contains(&ratio),
        "fp16 over fp32 rounding: {ratio}"
    );
    assert_eq!(c[0]["causes"][0]["kind"], "node_differs", "{out}");
    assert_eq!(c[1]["node"], "d", "{out}");
    let inherited = (c[1]["causes"].as_array().unwrap().iter())
        .find(|k| k["kind"] == "inherited")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(inherited["nodes"][0], "y", "{out}");
}
