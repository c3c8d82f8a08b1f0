//! Several targets in one run (`--ep cpu --ep wgpu`): one f64 reference, each target compared with it and with the
//! other; a perturbed target is named as the wrong one with its first divergent node.

use crate::common::*;

/// `phantom onnx convnet --ep cpu --ep wgpu` with ONNX Runtime running `target` (when given); the JSON report.
fn run(
    dir: &std::path::Path,
    target: Option<&std::path::Path>,
) -> (i32, String, serde_json::Value) {
    let m = model("convnet.onnx");
    let json = dir.join("multi.json");
    let mut args = vec![
        "onnx",
        m.to_str().unwrap(),
        "--ep",
        "cpu",
        "--ep",
        "wgpu",
        "--json",
        json.to_str().unwrap(),
    ];
    let extra: Vec<String> = ["junit", "summary-md", "html"]
        .iter()
        .map(|k| dir.join(format!("multi.{k}")).display().to_string())
        .collect();
    for (flag, path) in ["--junit", "--summary-md", "--html"].iter().zip(&extra) {
        args.extend([*flag, path.as_str()]);
    }
    if let Some(t) = target {
        args.extend(["--target-model", t.to_str().unwrap()]);
    }
    let (code, out, err) = phantom(&args);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    (code, out, read_json(&json))
}

#[test]
fn perturbed_target_is_named_wrong_with_its_first_divergence() {
    ensure_runtime();
    if !crate::wgpu::have_adapter() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let perturbed = dir.path().join("perturbed.onnx");
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &perturbed);
    let (code, out, r) = run(dir.path(), Some(&perturbed));
    assert_eq!(code, 1, "{out}");
    assert_eq!(r["schema"], "phantom-multi/1");
    crate::schema::assert_valid(&r, true);
    assert_eq!(
        r["agreement"]["labels"],
        serde_json::json!(["ort-cpu-target-model", "wgpu"])
    );
    // Both against the same reference run; the perturbed one drifts from conv2, the clean one does not.
    let (cpu, gpu) = (&r["targets"][0], &r["targets"][1]);
    assert_eq!(cpu["verdict"]["first_divergence"]["node"], "conv2");
    assert_eq!(gpu["verdict"]["status"], "clean", "{}", gpu["verdict"]);
    assert_eq!(gpu["target"]["details"]["kind"], "wgpu");
    assert_eq!(cpu["target"]["details"]["kind"], "ort");
    let d = &r["agreement"]["first_disagreement"];
    assert_eq!(d["at"]["node"], "conv2", "{d}");
    assert_eq!(d["wrong"], "ort-cpu-target-model", "{d}");
    assert_eq!(d["wrong_first_divergence"]["node"], "conv2");
    let (ea, eb) = (
        d["a_error"].as_f64().unwrap(),
        d["b_error"].as_f64().unwrap(),
    );
    assert!(
        ea >= 2.0 * eb,
        "the wrong target is the one further from f64: {ea} vs {eb}"
    );
    assert!(d["tolerance_used"].as_f64().unwrap() > 1.0);
    // Per node: before conv2 the targets agree; at conv2 wgpu is the one closer to f64.
    let nodes = r["agreement"]["nodes"].as_array().unwrap();
    let at = nodes.iter().position(|n| n["name"] == "conv2").unwrap();
    for n in &nodes[..at] {
        assert!(
            n["pairs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["status"] != "fail"),
            "{n}"
        );
    }
    assert_eq!(nodes[at]["closer"], "wgpu");
    assert_eq!(nodes[at]["status"], serde_json::json!(["fail", "pass"]));
    assert!(
        out.contains("ort-cpu-target-model is the one that goes wrong"),
        "{out}"
    );
    assert!(
        out.contains("first disagree at node #4 Conv `conv2`"),
        "{out}"
    );
    let read = |k: &str| std::fs::read_to_string(dir.path().join(format!("multi.{k}"))).unwrap();
    let xml = read("junit");
    assert_eq!(xml.matches("<testsuite ").count(), 3, "{xml}");
    assert!(
        xml.contains("name=\"ort-cpu-target-model vs wgpu\"")
            && xml.contains("first disagree at node #4"),
        "{xml}"
    );
    let md = read("summary-md");
    assert!(
        md.contains("| ort-cpu-target-model | wgpu |") && md.contains("`conv2`"),
        "{md}"
    );
    let html = read("html");
    assert_eq!(html.matches("<iframe").count(), 2);
    assert!(html.contains("ort-cpu-target-model is the one that goes wrong"));
}

#[test]
fn clean_targets_agree_and_closer_means_closer() {
    ensure_runtime();
    if !crate::wgpu::have_adapter() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, out, r) = run(dir.path(), None);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["status"], "clean");
    assert_eq!(
        r["agreement"]["status"], "agree",
        "{}",
        r["agreement"]["conclusion"]
    );
    assert!(r["agreement"]["first_disagreement"].is_null());
    for n in r["agreement"]["nodes"].as_array().unwrap() {
        let Some(c) = n["closer"].as_str() else {
            continue;
        };
        let k = if c == "ort-cpu" { 0 } else { 1 };
        let (mine, other) = (
            n["max_abs"][k].as_f64().unwrap(),
            n["max_abs"][1 - k].as_f64().unwrap(),
        );
        assert!(2.0 * mine <= other, "{n}");
    }
    let pairs: usize = r["agreement"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["pairs"].as_array().unwrap().len())
        .sum();
    assert!(
        pairs >= 10,
        "every node compared between the targets: {pairs}"
    );
}

#[test]
fn one_target_options_are_refused_with_several() {
    let m = model("convnet.onnx");
    for extra in [
        &["--max-memory", "1MiB"][..],
        &["--bisect"][..],
        &["--save-run", "/tmp/never"][..],
    ] {
        let mut args = vec!["onnx", m.to_str().unwrap(), "--ep", "cpu", "--ep", "wgpu"];
        args.extend_from_slice(extra);
        let (code, out, err) = phantom(&args);
        assert_eq!(code, 2, "{extra:?}: {out}\n{err}");
        assert!(
            err.contains(extra[0]) && err.contains("one target"),
            "{err}"
        );
    }
}
