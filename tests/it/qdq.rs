//! Statically quantized models (QDQ: ORT's `quantize_static`, `tests/data/qdq/make_qdq.py`): every
//! QuantizeLinear/DequantizeLinear runs on phantom's f64 kernel, so every value is compared, and a fault in a
//! weight's scale is found at its node.

use std::path::PathBuf;

use crate::common::{ensure_runtime, phantom, read_json, root, scaled_weights_copy, value_reports};

fn qdq() -> PathBuf {
    root().join("tests/data/qdq/convnet_qdq.onnx")
}

#[test]
fn a_qdq_model_is_compared_value_by_value() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let m = qdq();
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    // ORT's fused kernel lands one level below the reference's rounding on one element of `probs` (exact level
    // 88.70, ORT 88): a faithful rounding, taken and counted, not drift.
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    let probs = value_reports(&r).find(|v| v["name"] == "probs").unwrap();
    assert_eq!(probs["adopted"]["faithful"], 1, "{probs}");
    assert!(
        out.contains("1 quantized level(s) rounded to the other neighbour"),
        "{out}"
    );
    for n in r["nodes"].as_array().unwrap() {
        if n["op_type"] == "DequantizeLinear" || n["op_type"] == "QuantizeLinear" {
            // Computed by phantom's kernel at run time, or folded by tract with it at import: f64 either way.
            let kind = n["reference"]["kind"].as_str().unwrap();
            assert!(kind == "f64_phantom" || kind == "f64", "{n}");
        }
    }
    // Every value is within tolerance (after the faithful level is taken) or one 1/255 quantum.
    for v in value_reports(&r) {
        let max_abs = v["metrics"]["max_abs"].as_f64().unwrap();
        assert!(
            v["status"] == "pass" || max_abs <= 1.0 / 255.0 + 1e-6,
            "{}: {max_abs}",
            v["name"]
        );
    }
}

#[test]
fn a_fault_in_a_weight_scale_is_found_at_its_node() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let faulty = dir.path().join("faulty.onnx");
    scaled_weights_copy(&qdq(), "c2.w_scale", 1.05, &faulty);
    let json = dir.path().join("r.json");
    let m = qdq();
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--target-model",
        faulty.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let r = read_json(&json);
    assert_eq!(
        r["verdict"]["first_divergence"]["node"], "c2.w_DequantizeLinear",
        "{out}"
    );
}

/// `phantom onnx convnet_qop.onnx --json` with `args`: exit code, stdout, report.
fn qop(args: &[&str]) -> (i32, String, serde_json::Value) {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let m = root().join("tests/data/qdq/convnet_qop.onnx");
    let mut all = vec![
        "onnx",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    all.extend(args);
    let (code, out, err) = phantom(&all);
    assert!(code == 0 || code == 1, "{out}{err}");
    (code, out, read_json(&json))
}

/// The QOperator format (QLinearConv, ORT's QLinearSigmoid/Mul/Add/GlobalAveragePool/Softmax, QGemm): each node is
/// computed as its definition says (dequantize, the op in f64, quantize), so every value is compared, and ORT's
/// levels match the reference's exactly.
#[test]
fn a_qoperator_model_is_computed_by_its_definition_and_every_level_matches() {
    let (code, out, r) = qop(&[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    let mut quantized = 0;
    for n in r["nodes"].as_array().unwrap() {
        let op = n["op_type"].as_str().unwrap();
        if op.starts_with("QLinear") || op == "QGemm" {
            quantized += 1;
            assert_eq!(n["reference"]["kind"], "f64_phantom", "{n}");
            assert_eq!(n["values"][0]["metrics"]["max_abs"], 0.0, "{n}");
        }
    }
    assert!(quantized >= 8, "{out}");
}

#[test]
fn a_fault_in_a_qoperator_weight_scale_is_found_at_its_node() {
    let fault = root().join("tests/data/qdq/convnet_qop_fault.onnx");
    let (code, out, r) = qop(&["--target-model", fault.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        r["verdict"]["first_divergence"]["value"], "c2_quantized",
        "{out}"
    );
}

/// ONNX Runtime's `QLinearSoftmax` kernel multiplies by floor(1 / y_scale) levels: at a y_scale of float32 1/255
/// (just above 1/255, so 254.99998 levels) it writes round(y · 254), some levels one below the exact value's
/// rounding. Such a level is the exact value's other neighbour, a faithful rounding of ONNX Runtime's integer kernel
/// (as its fused QDQ kernels give): taken and counted, and the verdict is clean.
#[test]
fn a_qlinear_softmax_level_onnx_runtime_s_kernel_floors_is_a_faithful_rounding() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("qop_255.onnx");
    let src = root().join("tests/data/qdq/convnet_qop.onnx");
    // 1/256 × 256/255 in float32: float32's 1/255.
    scaled_weights_copy(&src, "probs_scale", 256.0 / 255.0, &m);
    let (code, out, r) = crate::contrib::onnx_report(&m, &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["verdict"]["status"], "clean", "{out}");
    let softmax = (r["nodes"].as_array().unwrap().iter())
        .find(|n| n["op_type"] == "QLinearSoftmax")
        .unwrap();
    let adopted = &softmax["values"][0]["adopted"];
    assert!(adopted["faithful"].as_u64().unwrap() >= 1, "{softmax}");
    assert_eq!(adopted["beyond"], 0, "{softmax}");
}
