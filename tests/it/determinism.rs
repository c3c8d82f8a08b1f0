//! `phantom determinism`: a model with an unseeded random node is reported with that node first; a
//! deterministic model is reported as such over ten runs.

use crate::common::*;

#[test]
fn random_node_is_named_first() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("d.json");
    let (code, out, err) = phantom(&[
        "determinism",
        model("noisy.onnx").to_str().unwrap(),
        "--runs",
        "4",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("4 runs in one session: 3 value(s) vary; first: node #1 RandomNormal `noise`"),
        "{out}"
    );
    let r = read_json(&json);
    // ORT seeds an unseeded RandomNormal the same way in every new session, so only repeated runs in one
    // session vary; fresh sessions are listed when they vary too.
    for mode in ["fresh_sessions", "same_session"] {
        let list = r[mode].as_array().unwrap();
        if mode == "fresh_sessions" && list.is_empty() {
            continue;
        }
        assert_eq!(list[0]["node"], "noise", "{mode}: {list:?}");
        assert!(
            list.iter().all(|v| v["node"] != "scale"),
            "the deterministic Mul before it must not be listed"
        );
        assert!(
            list[0]["elements_differing"].as_u64().unwrap() > 32,
            "{}",
            list[0]
        );
    }
}

#[test]
fn deterministic_model_over_ten_runs() {
    ensure_runtime();
    let (code, out, err) = phantom(&[
        "determinism",
        model("convnet.onnx").to_str().unwrap(),
        "--runs",
        "10",
        "--ort-deterministic",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("onnxruntime, 10 fresh sessions: deterministic"),
        "{out}"
    );
    assert!(
        out.contains("onnxruntime, 10 runs in one session: deterministic"),
        "{out}"
    );
    assert!(
        out.contains("reference (tract f64), 2 runs: deterministic"),
        "{out}"
    );
    assert!(
        out.contains("0 → 0 varying value(s): nothing to fix"),
        "{out}"
    );
}
