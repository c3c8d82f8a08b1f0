//! ResNet-18s quantized by ONNX Runtime's `quantize_static` in QDQ format (`tests/data/toolchains/resnet_qdq.py`,
//! written at test time by the locked environment): ONNX Runtime fuses them into integer kernels whose levels
//! differ from its unfused run near boundaries. The fused run's logits are judged against the variation of
//! faithful integer kernels, not called drift; a fault in a weight is still named at its node.

use std::path::PathBuf;

use crate::common::{ensure_runtime, file_lock, root, scaled_weights_copy};

/// The two quantized ResNet-18s, written once per version of the script.
fn models() -> (PathBuf, PathBuf) {
    let work = root().join("target/conformance");
    let _lock = file_lock(&work.with_extension("lock"));
    let (python, _) = crate::conformance::cases(&work);
    let dir = root().join("target/toolchains-test/resnet_qdq");
    let script = root().join("tests/data/toolchains/resnet_qdq.py");
    let stamp = dir.join("script.used");
    let current = std::fs::read(&script).unwrap();
    if std::fs::read(&stamp).ok() != Some(current.clone()) {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let out = std::process::Command::new(python)
            .arg(&script)
            .arg(&dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        std::fs::write(&stamp, current).unwrap();
    }
    (
        dir.join("resnet18_qdq.onnx"),
        dir.join("resnet18_qdq_pc_u8_entropy.onnx"),
    )
}

/// `phantom onnx MODEL --json` with `extra` ([`crate::contrib::onnx_report`]); a verdict (exit 0 or 1) is required.
fn report(model: &std::path::Path, extra: &[&str]) -> (i32, String, serde_json::Value) {
    ensure_runtime();
    let (code, out, r) = crate::contrib::onnx_report(model, extra);
    assert!(code == 0 || code == 1, "{out}");
    (code, out, r)
}

fn logits(r: &serde_json::Value) -> &serde_json::Value {
    (r["nodes"].as_array().unwrap().iter())
        .flat_map(|n| n["values"].as_array().unwrap())
        .find(|v| v["name"] == "logits")
        .unwrap()
}

#[test]
fn quantized_resnets_read_clean_with_the_fused_runs_logits_within_the_variation() {
    let (default, per_channel) = models();
    for m in [&default, &per_channel] {
        let (code, out, r) = report(m, &[]);
        assert_eq!(code, 0, "{}: {out}", m.display());
        assert_eq!(r["verdict"]["status"], "clean", "{out}");
        assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    }
    // The per-channel model's fused run moves its logits (measured on this machine: by one quantum, 1.569, at
    // 5 elements beyond the faithful rounding of the reference's level): judged against the variation, passed.
    let (_, out, r) = report(&per_channel, &[]);
    assert_eq!(r["instrumentation"]["outputs_moved"], true, "{out}");
    let v = &logits(&r)["variation"];
    assert_eq!(v["excused"], true, "{v}");
    assert!(v["flips"].as_u64().unwrap() > 100, "{v}");
    let (error, spread) = (v["error"].as_f64().unwrap(), v["max_abs"].as_f64().unwrap());
    assert!(error > 1.0 && error <= 2.0 * spread, "{v}");
    assert!(
        out.contains("passed as the variation of faithful integer kernels"),
        "{out}"
    );
    // A bounded run (chunk by chunk, as phantom runs a model whose values exceed its memory budget) reads the fused
    // run's logits and judges them the same way.
    let (code, out, r) = report(&per_channel, &["--max-memory", "8MiB"]);
    assert!(out.contains("values compared in"), "{out}");
    assert_eq!(
        (code, &r["verdict"]["status"]),
        (0, &serde_json::json!("clean")),
        "{out}"
    );
    assert_eq!(r["instrumentation"]["outputs_moved"], true, "{out}");
    assert_eq!(logits(&r)["variation"]["excused"], true, "{out}");
    // With the optimizations off, the runs agree: nothing to judge.
    let (code, out, r) = report(&per_channel, &["--ort-opt-level", "disable"]);
    assert_eq!(
        (code, &r["instrumentation"]["outputs_moved"]),
        (0, &serde_json::json!(false)),
        "{out}"
    );
}

#[test]
fn a_weight_fault_in_a_fused_quantized_resnet_is_named_at_its_node() {
    let (_, per_channel) = models();
    let dir = tempfile::tempdir().unwrap();
    for (weight, node) in [
        ("b4.c1.w_scale", "b4.c1.w_DequantizeLinear"),
        ("fc.w_scale", "fc.w_DequantizeLinear"),
    ] {
        let faulty = dir.path().join("faulty.onnx");
        scaled_weights_copy(&per_channel, weight, 1.02, &faulty);
        let (code, out, r) = report(&per_channel, &["--target-model", faulty.to_str().unwrap()]);
        assert_eq!(code, 1, "{weight}: {out}");
        assert_eq!(r["verdict"]["first_divergence"]["node"], node, "{out}");
    }
}
