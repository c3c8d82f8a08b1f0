//! Llama-style decoders from `benches/make_llama.py`: with a KV cache (`--cache`), whose causal mask computes Trilu's
//! `k` from the cache's shape, `--steps` decodes with each side fed its own cache, every value compared at every
//! step; in native fp16 with rotary tables computed in the graph (`--rope-in-graph`), the correctly rounded run
//! rounds what tract folds at import.

use std::process::Command;

use crate::common::*;

/// `benches/make_llama.py DIR ARGS` run by the conformance environment (locked): the decoder's path.
fn llama(dir: &std::path::Path, args: &[&str]) -> std::path::PathBuf {
    ensure_runtime();
    let work = root().join("target/conformance");
    let python = {
        let _lock = file_lock(&work.with_extension("lock"));
        crate::conformance::cases(&work).0
    };
    let out = Command::new(python)
        .arg(root().join("benches/make_llama.py"))
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("llama.onnx")
}

#[test]
fn a_kv_cache_decoder_decodes_three_steps_compared_whole() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama(
        dir.path(),
        &["--preset", "tiny", "--cache", "--tokens", "16"],
    );
    let json = dir.path().join("r.json");
    let args = [
        "onnx",
        m.to_str().unwrap(),
        "--steps",
        "3",
        "--dim",
        "seq=16",
        "--dim",
        "past=0",
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, stdout, err) = phantom(&args);
    assert_eq!(code, 0, "{stdout}{err}");
    let r = read_json(&json);
    assert_eq!(
        r["coverage"]["unchecked"], 0,
        "the mask's Trilu computed: {}",
        r["coverage"]
    );
    let notes: Vec<&str> = (r["notes"].as_array().unwrap().iter())
        .filter_map(|n| n.as_str())
        .collect();
    for step in 0..3 {
        let line = notes
            .iter()
            .find(|n| n.starts_with(&format!("step {step}: clean")))
            .unwrap_or_else(|| panic!("step {step}: {notes:?}"));
        assert!(line.ends_with(" s)"), "time per step: {line}");
    }
    let fed = (r["inputs"].as_array().unwrap().iter())
        .find(|i| i["name"] == "past_key_values.0.key")
        .unwrap();
    assert_eq!(
        fed["shape"],
        serde_json::json!([1, 4, 17, 16]),
        "the cache after two steps"
    );
}

/// A native fp16 decoder whose rotary tables are computed in the graph (`--rope-in-graph`: positions × inv_freq, then
/// Cos and Sin, each in fp16), which tract folds at import: the correctly rounded run rounds the folded angles as
/// the target does, so ONNX Runtime's faithful fp16 is precision-limited, not drift with Cos/Sin as culprits.
#[test]
fn an_fp16_decoder_with_rotary_tables_computed_in_the_graph_is_not_drift() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--preset",
        "tiny",
        "--dtype",
        "fp16",
        "--rope-in-graph",
        "--tokens",
        "128",
    ];
    let m = llama(dir.path(), &args);
    let json = dir.path().join("r.json");
    let (code, stdout, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{err}");
    let r = read_json(&json);
    assert_eq!(r["verdict"]["status"], "precision_limited", "{stdout}");
    let value = |name: &str| {
        (r["nodes"].as_array().unwrap().iter())
            .flat_map(|n| n["values"].as_array().unwrap())
            .find(|v| v["name"] == name)
            .unwrap()
            .clone()
    };
    // cos of the fp16 angle (positions up to 127, a step of 0.0625 there) is off the exact one by 0.0146; the
    // correctly rounded run says the same, and ONNX Runtime lands on it.
    let cos = value("/rotary/Cos_output_0");
    let (error, noise) = (
        cos["metrics"]["max_abs"].as_f64().unwrap(),
        cos["noise"]["max_abs"].as_f64().unwrap(),
    );
    assert!(error > 0.01 && (error - noise).abs() <= 0.001, "{cos}");
    for culprit in r["verdict"]["culprits"].as_array().unwrap() {
        assert_ne!(culprit["op_type"], "Cos", "{stdout}");
        assert_ne!(culprit["op_type"], "Sin", "{stdout}");
        // The model is fp16 itself: phantom's --keep-fp32 (for its own conversion) would be refused.
        for cause in culprit["causes"].as_array().unwrap() {
            let fix = cause["fix"].as_str().unwrap();
            assert!(!fix.contains("--keep-fp32 '"), "{fix}");
        }
    }
    assert!(stdout.contains("the model itself computes"), "{stdout}");
}
