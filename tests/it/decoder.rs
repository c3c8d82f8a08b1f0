//! A Llama-style KV-cache decoder (`benches/make_llama.py --cache`): its causal mask computes Trilu's `k` from the
//! cache's shape, and `--steps` decodes with each side fed its own cache, every value compared at every step.

use std::process::Command;

use crate::common::*;

#[test]
fn a_kv_cache_decoder_decodes_three_steps_compared_whole() {
    ensure_runtime();
    let work = root().join("target/conformance");
    let _lock = file_lock(&work.with_extension("lock"));
    let (python, _) = crate::conformance::cases(&work);
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(python)
        .arg(root().join("benches/make_llama.py"))
        .arg(dir.path())
        .args(["--preset", "tiny", "--cache", "--tokens", "16"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = dir.path().join("llama.onnx");
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
