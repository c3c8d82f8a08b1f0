//! `phantom scan`: one f64 reference run ranks the nodes at risk in fp16; on the purpose-built fp16 cases the node
//! `phantom onnx --precision fp16` blames (or the node its cause names) is among the top three, with the numbers.

use crate::common::*;

/// The scan's JSON for a case of tests/data/fp16.
fn scan(name: &str, extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("scan.json");
    let m = root().join(format!("tests/data/fp16/{name}.onnx"));
    let mut args = vec![
        "scan",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = phantom(&args);
    assert_eq!(code, 0, "{name}: {out}\n{err}");
    read_json(&json)
}

/// `node` is among the top three risks, with a cause of `kind`; returns that risk.
fn ranked(s: &serde_json::Value, node: &str, kind: &str) -> serde_json::Value {
    let top: Vec<&serde_json::Value> = s["risks"].as_array().unwrap().iter().take(3).collect();
    let r = top
        .iter()
        .find(|r| r["node"] == node)
        .unwrap_or_else(|| panic!("{node} not in the top three: {top:#?}"));
    assert!(
        r["causes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["kind"] == kind),
        "{node}: no {kind} cause: {r:#}"
    );
    (*r).clone()
}

#[test]
fn known_fp16_culprits_rank_in_the_top_three() {
    let s = scan("ln_variance_overflow", &[]);
    let r = ranked(&s, "ln/pow", "overflow");
    assert!(
        r["causes"][0]["evidence"]["reference_max_abs"]
            .as_f64()
            .unwrap()
            > 65504.0
    );
    let v = s["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["node"] == "ln/pow")
        .unwrap();
    assert!(v["fp16_headroom"].as_f64().unwrap() < 1.0, "{v}");
    let s = scan("bn_var_overflow", &[]);
    ranked(&s, "bn", "initializer_range");
    let var = s["initializers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "var")
        .unwrap();
    assert_eq!(var["issues"][0]["kind"], "overflow");
    ranked(
        &scan("long_matmul", &["--val-range", "1,2"]),
        "long_matmul",
        "overflow",
    );
    // `phantom onnx` blames ln/div, whose cause names the Add holding the epsilon: the scan ranks that Add.
    let r = ranked(&scan("small_epsilon", &[]), "ln/add_eps", "epsilon");
    assert_eq!(r["causes"][0]["evidence"]["stored"], 0.0);
    ranked(
        &scan("softmax_large_logits", &[]),
        "softmax",
        "softmax_range",
    );
    // NaN from a division needs the target run; the scan names the cancellation behind it.
    ranked(
        &scan("nan_division", &["--val-range", "1,2"]),
        "diff",
        "cancellation",
    );
}

#[test]
fn a_healthy_model_has_no_high_risk_and_fp32_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("scan.json");
    let m = model("convnet.onnx");
    let (code, out, err) = phantom(&[
        "scan",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let s = read_json(&json);
    assert_eq!(s["values"].as_array().unwrap().len(), 13);
    assert!(
        s["risks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["causes"][0]["confidence"] != "high"),
        "{:#}",
        s["risks"]
    );
    assert!(out.contains("least fp16 headroom"), "{out}");
    let (code, _, err) = phantom(&["scan", m.to_str().unwrap(), "--precision", "fp32"]);
    assert_eq!(code, 2, "{err}");
}
