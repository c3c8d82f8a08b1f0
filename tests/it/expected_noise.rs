//! When the expected-noise run runs (`--expected-noise`): a run in the model's own precision whose values all pass
//! skips it and measures each value's error of correct rounding instead, for the anomaly screen; a failing value
//! brings it back, and the report is then the one `--expected-noise always` gives.

use serde_json::Value;

use crate::common::{ensure_runtime, model, perturbed_copy, phantom, read_json};

/// `phantom onnx` on the demo CNN against `target` (or itself) with `extra` flags: exit code and JSON report.
fn run(dir: &std::path::Path, target: Option<&std::path::Path>, extra: &[&str]) -> (i32, Value) {
    let json = dir.join(format!("r{}.json", extra.join("").replace(['-', ' '], "")));
    let reference = model("convnet.onnx");
    let mut args = vec!["onnx", reference.to_str().unwrap()];
    if let Some(t) = target {
        args.extend(["--target-model", t.to_str().unwrap()]);
    }
    args.extend(["--json", json.to_str().unwrap()]);
    args.extend(extra);
    let (code, out, err) = phantom(&args);
    assert!(code == 0 || code == 1, "exit {code}\n{out}{err}");
    (code, read_json(&json))
}

/// Every compared value of a report.
fn values(r: &Value) -> Vec<Value> {
    (r["nodes"].as_array().unwrap().iter())
        .flat_map(|n| n["values"].as_array().unwrap().clone())
        .filter(|v| v["status"] != "unchecked")
        .collect()
}

#[test]
fn a_clean_run_in_the_models_precision_skips_the_run_and_screens_the_same_nodes() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    for bounded in [&[][..], &["--max-memory", "64KiB"][..]] {
        let (code, auto) = run(dir.path(), None, bounded);
        let always_flags = [bounded, &["--expected-noise", "always"][..]].concat();
        let (code_always, always) = run(dir.path(), None, &always_flags);
        assert_eq!((code, code_always), (0, 0), "{bounded:?}");
        assert_eq!(auto["verdict"], always["verdict"], "{bounded:?}");
        let why = auto["coverage"]["noise_skipped"].as_str().unwrap();
        assert!(why.starts_with("every value passed"), "{why}");
        assert!(always["coverage"]["noise_skipped"].is_null());
        assert_eq!(auto["timings"]["noise_ms"], 0.0);
        // The anomaly screen runs the same nodes alone: it reads the same error of correct rounding.
        assert_eq!(
            auto["coverage"]["introduced"], always["coverage"]["introduced"],
            "{bounded:?}"
        );
        let (a, b) = (values(&auto), values(&always));
        assert_eq!(a.len(), b.len());
        let mut rounded = 0;
        for (a, b) in a.iter().zip(&b) {
            assert!(a["noise"].is_null(), "{}", a["name"]);
            assert_eq!(a["rounding"], b["noise"]["rounding"], "{}", a["name"]);
            rounded += (a["rounding"].as_f64().unwrap_or(0.0) > 0.0) as usize;
        }
        assert!(rounded * 2 > a.len(), "{rounded} of {} rounded", a.len());
    }
}

#[test]
fn a_failing_value_brings_the_expected_noise_back() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("perturbed.onnx");
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &m);
    let (code, auto) = run(dir.path(), Some(&m), &[]);
    let (code_always, always) = run(dir.path(), Some(&m), &["--expected-noise", "always"]);
    assert_eq!((code, code_always), (1, 1));
    assert_eq!(auto["verdict"], always["verdict"]);
    assert!(auto["coverage"]["noise_skipped"].is_null());
    assert!(auto["timings"]["noise_ms"].as_f64().unwrap() > 0.0);
    let notes = auto["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("first pass without the expected noise")),
        "{notes:?}"
    );
    for (a, b) in values(&auto).iter().zip(&values(&always)) {
        assert_eq!(a["status"], b["status"], "{}", a["name"]);
        assert_eq!(
            a["noise"]["max_abs"], b["noise"]["max_abs"],
            "{}",
            a["name"]
        );
        assert!(a["noise"]["max_abs"].is_f64(), "{}", a["name"]);
        assert!(a["rounding"].is_null());
    }
}
