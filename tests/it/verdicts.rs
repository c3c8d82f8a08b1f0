//! Verdicts that scale cannot fool: a one-node fault is found whatever the magnitude of the activations, and clean
//! runs stay clean at every scale.

use std::path::Path;

use crate::common::*;

/// `phantom onnx` on the conv chain with inputs in ±`range`, against `target` when given; (exit, stdout, report).
fn run(
    model: &std::path::Path,
    range: f64,
    target: Option<&std::path::Path>,
) -> (i32, String, serde_json::Value) {
    run_with(model, range, target, &[])
}

/// [`run`] with more flags.
fn run_with(
    model: &std::path::Path,
    range: f64,
    target: Option<&std::path::Path>,
    extra: &[&str],
) -> (i32, String, serde_json::Value) {
    let dir = model.parent().unwrap();
    let json = dir.join(format!("r{range}.json"));
    let vr = format!("{},{}", -range, range);
    let mut args = vec![
        "onnx",
        model.to_str().unwrap(),
        "--val-range",
        &vr,
        "--json",
        json.to_str().unwrap(),
    ];
    if let Some(t) = target {
        args.extend(["--target-model", t.to_str().unwrap()]);
    }
    args.extend(extra);
    let (code, out, err) = phantom(&args);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    (code, out, read_json(&json))
}

#[test]
fn a_half_percent_fault_is_found_at_any_activation_scale() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (m, faulty) = (
        dir.path().join("chain.onnx"),
        dir.path().join("faulty.onnx"),
    );
    conv_chain(&m);
    perturbed_copy(&m, "conv2", 1.005, &faulty);
    for range in [2e-6, 1.0, 2e3] {
        let (code, out, r) = run(&m, range, None);
        assert_eq!(code, 0, "clean at ±{range}: {out}");
        assert_eq!(r["verdict"]["status"], "clean");
        let (code, out, r) = run(&m, range, Some(&faulty));
        assert_eq!(code, 1, "the fault at ±{range} is found: {out}");
        assert_eq!(
            r["verdict"]["first_divergence"]["node"], "conv2",
            "±{range}"
        );
        assert_eq!(r["verdict"]["culprits"][0]["node"], "conv2", "±{range}");
        // The applied atol follows the activations' scale.
        let c1 = &r["nodes"][0]["values"][0];
        let atol = c1["tolerance"]["atol"].as_f64().unwrap();
        let rms = c1["metrics"]["scale"].as_f64().unwrap();
        assert!(
            atol <= 1e-4 && atol <= 1e-3 * rms.max(range) * 1.01,
            "±{range}: atol {atol}, rms {rms}"
        );
    }
    // The same fault with a fixed absolute tolerance (as before scaling): 1e-4 swallows all of ±2e-6, so no value
    // fails; the fault is still far beyond rounding (the perturbing `Mul` and the Conv run alone as one chain).
    let json = dir.path().join("fixed.json");
    let (code, out, _) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--val-range=-2e-6,2e-6",
        "--atol",
        "1e-4",
        "--target-model",
        faulty.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    let r = read_json(&json);
    assert_eq!(
        r["verdict"]["failing_values"], 0,
        "an explicit --atol is applied as given: {out}"
    );
    assert_eq!(r["verdict"]["status"], "anomalous", "{out}");
    assert_eq!(r["verdict"]["anomalies"][0]["node"], "conv2", "{out}");
}

/// A 0.05% fault is within the fp32 tolerance (rtol 1e-3) but thousands of times the error of correct rounding:
/// `anomalous`, naming the Conv, at every scale; the JUnit report fails on it too.
#[test]
fn a_fault_under_the_tolerance_is_anomalous() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (m, faulty) = (
        dir.path().join("chain.onnx"),
        dir.path().join("faulty.onnx"),
    );
    conv_chain(&m);
    scaled_weights_copy(&m, "w2", 1.0005, &faulty);
    for range in [2e-6, 1.0, 2e3] {
        let (code, out, r) = run(&m, range, Some(&faulty));
        let v = &r["verdict"];
        assert_eq!(v["status"], "anomalous", "±{range}: {out}");
        assert_eq!(code, 1, "±{range}");
        assert_eq!(v["failing_values"], 0);
        assert_eq!(v["anomalies"][0]["node"], "conv2", "±{range}: {v}");
        let ratio = v["anomalies"][0]["rounding_ratio"].as_f64().unwrap();
        assert!(ratio > 2048.0, "{ratio}");
        assert!(
            out.contains("✗ ANOMALOUS") && out.contains("anomaly 1: node #2 Conv `conv2`"),
            "{out}"
        );
        // Nothing fails, so only the nodes whose graph error leaves room for an anomaly ran alone: the faulty
        // Conv (and what its error reaches), not the clean Conv before it.
        let scope = &r["coverage"]["introduced"];
        assert_eq!(scope["all"], false, "±{range}: {scope}");
        let measured = scope["measured"].as_u64().unwrap();
        assert!((1..5).contains(&measured), "±{range}: {scope}");
        let conv1 = (r["nodes"].as_array().unwrap().iter())
            .find(|n| n["name"] == "conv1")
            .unwrap();
        assert!(conv1["values"][0]["introduced"].is_null(), "±{range}");
    }
    // Every node run alone finds the same anomaly.
    let (code, _, r) = run_with(&m, 1.0, Some(&faulty), &["--attribute-all"]);
    assert_eq!(code, 1);
    assert_eq!(r["verdict"]["anomalies"][0]["node"], "conv2");
    assert_eq!(r["verdict"]["anomalies"].as_array().unwrap().len(), 1);
    assert_eq!(r["coverage"]["introduced"]["all"], true);
    assert_eq!(r["coverage"]["introduced"]["measured"], 5);
    let xml = dir.path().join("r.xml");
    let (code, _, _) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--target-model",
        faulty.to_str().unwrap(),
        "--junit",
        xml.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 1);
    let xml = std::fs::read_to_string(xml).unwrap();
    assert!(
        xml.contains("classname=\"phantom.anomaly\"") && xml.contains("<failure"),
        "{xml}"
    );
    // Without the introduced-error measurement there is nothing to call anomalous: clean, exit 0.
    let (code, out, _) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--target-model",
        faulty.to_str().unwrap(),
        "--attribution",
        "off",
        "-q",
    ]);
    assert_eq!(
        (code, out.trim()),
        (0, "clean: all 5 compared values within tolerance")
    );
}

/// A 3% weight change in the target model is named for what it is: the culprit's first cause is `weights_differ`
/// with the initializer and the numbers, not an arithmetic cause whose bound cannot explain a 3% error.
#[test]
fn changed_weights_are_named_as_the_cause() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (m, faulty) = (
        dir.path().join("chain.onnx"),
        dir.path().join("faulty.onnx"),
    );
    conv_chain(&m);
    scaled_weights_copy(&m, "w2", 1.03, &faulty);
    let (code, out, r) = run(&m, 1.0, Some(&faulty));
    assert_eq!(code, 1, "{out}");
    let c = &r["verdict"]["culprits"][0];
    assert_eq!(c["node"], "conv2");
    let first = &c["causes"][0];
    assert_eq!(first["kind"], "weights_differ", "{c}");
    assert_eq!(first["confidence"], "high");
    let rel = first["evidence"]["relative"].as_f64().unwrap();
    assert!((rel - 0.03).abs() < 1e-3, "{rel}");
    assert!(
        first["summary"]
            .as_str()
            .unwrap()
            .contains("initializer `w2`"),
        "{first}"
    );
    for k in c["causes"].as_array().unwrap() {
        assert!(
            !["long_reduction", "precision"].contains(&k["kind"].as_str().unwrap()),
            "{k}"
        );
    }
    assert!(out.contains("cause (weights_differ, high)"), "{out}");
}

/// A copy of `src` whose initializer `name` has its first element moved by `delta`.
fn shifted_first(src: &Path, name: &str, delta: f32, dst: &Path) {
    use prost::Message;
    use tract_onnx::pb;
    let mut m = pb::ModelProto::decode(std::fs::read(src).unwrap().as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    let t = g.initializer.iter_mut().find(|t| t.name == name).unwrap();
    match t.float_data.first_mut() {
        Some(x) => *x += delta,
        None => {
            let x = f32::from_le_bytes(t.raw_data[..4].try_into().unwrap()) + delta;
            t.raw_data[..4].copy_from_slice(&x.to_le_bytes());
        }
    }
    std::fs::write(dst, m.encode_to_vec()).unwrap();
}

/// Issue 33, item 5: a fault in the last layer is judged like any other. One bias of a CNN classifier's head (before
/// its Softmax) and of a transformer encoder's last feed-forward layer (before its residual and mean-pooled output),
/// moved by 1% of that layer's output RMS, is drift at that layer; moved by 0.05%, within the tolerance, it is
/// anomalous there. Exit 1 both ways.
#[test]
fn a_one_percent_bias_shift_in_the_last_layer_is_caught() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    for (file, bias, value, node) in [
        ("convnet.onnx", "fc.b", "logits", "fc"),
        ("encoder.onnx", "b2", "f2", "ff2_bias"),
    ] {
        let m = crate::common::model(file);
        let (code, out, r) = run_models(&m, None, dir.path());
        assert_eq!(code, 0, "{file}: {out}");
        let s = &value_reports(&r).find(|v| v["name"] == value).unwrap()["reference_stats"];
        let (mean, std) = (s["mean"].as_f64().unwrap(), s["std"].as_f64().unwrap());
        let rms = (mean * mean + std * std).sqrt();
        // 1% of the RMS is beyond the tolerance (drift); 0.05% within it, far beyond rounding (anomalous).
        for (shift, status) in [(0.01, "drift"), (0.0005, "anomalous")] {
            let faulty = dir.path().join(format!("faulty_{file}"));
            shifted_first(&m, bias, (shift * rms) as f32, &faulty);
            let (code, out, r) = run_models(&m, Some(&faulty), dir.path());
            assert_eq!(code, 1, "{file} {shift}: {out}");
            let v = &r["verdict"];
            assert_eq!(v["status"], status, "{file} {shift}: {out}");
            let named = (v["culprits"].as_array().unwrap().iter())
                .chain(v["anomalies"].as_array().into_iter().flatten())
                .any(|c| c["node"] == node);
            assert!(named, "{file} {shift}: {v:#}");
        }
    }
}

/// `phantom onnx M [--target-model T] --json`: code, output, report.
fn run_models(m: &Path, target: Option<&Path>, dir: &Path) -> (i32, String, serde_json::Value) {
    let json = dir.join("r.json");
    let mut args = vec![
        "onnx",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    if let Some(t) = target {
        args.extend(["--target-model", t.to_str().unwrap()]);
    }
    let (code, out, err) = phantom(&args);
    assert!(code <= 1, "{out}{err}");
    (code, out, read_json(&json))
}
