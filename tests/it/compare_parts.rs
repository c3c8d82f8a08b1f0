//! `phantom onnx` on part of the work: a memory budget that compares in chunks, a slice of each tensor.

use crate::common::*;

#[test]
fn bounded_memory_gives_the_same_verdict_in_chunks() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("p.onnx");
    perturbed_copy(&model("convnet.onnx"), "dwconv3", 1.01, &target);
    let run = |extra: &[&str]| {
        let json = dir.path().join("r.json");
        let mut args = vec![
            "onnx",
            model("convnet.onnx").to_str().unwrap().to_string().leak() as &str,
            "--target-model",
            target.to_str().unwrap().to_string().leak(),
            "--json",
            json.to_str().unwrap().to_string().leak(),
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = phantom(&args);
        assert_eq!(code, 1, "{out}{err}");
        read_json(&json)
    };
    let full = run(&[]);
    let bounded = run(&["--max-memory", "64KiB"]);
    assert_eq!(
        full["verdict"]["first_divergence"],
        bounded["verdict"]["first_divergence"]
    );
    assert_eq!(
        full["verdict"]["failing_values"],
        bounded["verdict"]["failing_values"]
    );
    let note = bounded["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|n| n.as_str().filter(|n| n.starts_with("bounded memory")))
        .unwrap()
        .to_string();
    let runs: usize = note
        .split("compared in ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(runs > 2, "a 64 KiB budget takes several chunks: {note}");
    // Same values: each chunk runs a cut of the model with every value it computes exposed, fed with the target's
    // own earlier values, so nothing fuses across a value, as in the whole run (to a few float32 steps: ONNX
    // Runtime's vectorized Sigmoid splits its work by the tensors it is given).
    for (a, b) in full["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .zip(bounded["nodes"].as_array().unwrap())
    {
        let (va, vb) = (&a["values"][0], &b["values"][0]);
        assert_eq!(va["status"], vb["status"], "{}", a["name"]);
        let d =
            va["metrics"]["max_abs"].as_f64().unwrap() - vb["metrics"]["max_abs"].as_f64().unwrap();
        assert!(d.abs() < 1e-5, "{}: {d}", a["name"]);
    }
}

#[test]
fn slice_compares_part_of_each_tensor() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--slice",
        ":,:2,:4,:4",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    let conv1 = &r["nodes"][0]["values"][0];
    assert_eq!(conv1["shape"], serde_json::json!([1, 2, 4, 4]));
    assert_eq!(conv1["metrics"]["elements"], 32);
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--slice",
        "::0",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--slice ::0"), "{err}");
}

/// The reference runs ahead of the comparison on its own thread (`PHANTOM_REFERENCE_AHEAD`, on by default): the
/// report is the one the reference gives in step with it, whole and bounded, and its op timings still count every
/// value.
#[test]
fn the_reference_ahead_of_the_comparison_gives_the_same_report() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("p.onnx");
    perturbed_copy(&model("convnet.onnx"), "dwconv3", 1.01, &target);
    let run = |ahead: &str, extra: &[&str]| {
        let json = dir.path().join(format!("r{ahead}.json"));
        let (m, t, j) = (model("convnet.onnx"), target.clone(), json.clone());
        let mut args = vec![
            "onnx".to_string(),
            m.display().to_string(),
            "--target-model".into(),
            t.display().to_string(),
            "--json".into(),
            j.display().to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = phantom_env(&args, &[("PHANTOM_REFERENCE_AHEAD", ahead)]);
        assert_eq!(code, 1, "{out}{err}");
        read_json(&json)
    };
    for extra in [&[][..], &["--max-memory", "64KiB"][..]] {
        let (ahead, step) = (run("1", extra), run("0", extra));
        assert_eq!(ahead["verdict"], step["verdict"], "{extra:?}");
        assert_eq!(ahead["nodes"], step["nodes"], "{extra:?}");
        let values = |r: &serde_json::Value| -> u64 {
            let ops = r["timings"]["by_op"].as_object().unwrap();
            ops.values().map(|o| o["values"].as_u64().unwrap()).sum()
        };
        assert_eq!(values(&ahead), values(&step), "{extra:?}");
        assert!(ahead["timings"]["reference_ms"].as_f64().unwrap() > 0.0);
        assert_eq!(ahead["timings"]["reference_ahead"], true, "{extra:?}");
        assert!(step["timings"]["reference_ahead"].is_null(), "{extra:?}");
    }
}
