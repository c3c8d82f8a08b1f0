//! Degrade, never die (issue 32): each optional stage made to fail (`PHANTOM_INJECT_FAILURE`) leaves its figures
//! not measured, says so, and the verdict comes out unchanged with its own exit code.

use crate::common::{ensure_runtime, model, perturbed_copy, phantom_env, read_json};

/// The demo CNN against `m` (its copy with a fault) with `fail` injected.
fn run(m: &std::path::Path, dir: &std::path::Path, fail: &str) -> (i32, serde_json::Value) {
    let json = dir.join(format!("r-{fail}.json"));
    let reference = model("convnet.onnx");
    let args = [
        "onnx",
        reference.to_str().unwrap(),
        "--target-model",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, out, err) = phantom_env(&args, &[("PHANTOM_INJECT_FAILURE", fail)]);
    assert!(code == 0 || code == 1, "{fail}: exit {code}\n{out}{err}");
    (code, read_json(&json))
}

fn notes(r: &serde_json::Value) -> Vec<String> {
    r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn each_optional_stage_can_fail_without_losing_the_verdict() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("perturbed.onnx");
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &m);
    let (code, whole) = run(&m, dir.path(), "");
    assert_eq!(code, 1, "a 1% fault at conv2 is drift");
    let says = |r: &serde_json::Value, what: &str| notes(r).iter().any(|n| n.contains(what));
    for (stage, note) in [
        (
            "noise",
            "expected noise not measured: noise: failure injected",
        ),
        (
            "attribution",
            "introduced error not measured: attribution: failure injected",
        ),
        ("attribution-node", "its run alone failed"),
    ] {
        let (c, r) = run(&m, dir.path(), stage);
        assert_eq!(c, code, "{stage}: the exit code is the verdict's");
        assert_eq!(
            r["verdict"]["status"], whole["verdict"]["status"],
            "{stage}"
        );
        assert_eq!(
            r["verdict"]["first_divergence"], whole["verdict"]["first_divergence"],
            "{stage}"
        );
        assert!(says(&r, note), "{stage}: {:?}", notes(&r));
        assert!(!says(&whole, "not measured"), "{:?}", notes(&whole));
    }
    // With introduced error gone, no value carries it; with expected noise gone, none carries noise.
    let (_, r) = run(&m, dir.path(), "attribution");
    let values = r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["values"].as_array().unwrap().clone());
    assert!(values.clone().all(|v| v["introduced"].is_null()));
    let (_, r) = run(&m, dir.path(), "noise");
    let values: Vec<_> = r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["values"].as_array().unwrap().clone())
        .collect();
    assert!(
        values.iter().all(|v| v["noise"].is_null()),
        "no expected noise without its run"
    );
}
