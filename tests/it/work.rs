//! The work a run repeats (issue 80 item 5): model decodes, tract parses and typings, ONNX Runtime sessions, counted
//! by the binary (`PHANTOM_WORK_LOG`). The counts are ceilings that only come down: a change that decodes the model
//! once more, or builds another session, fails here.

use crate::common::{ensure_runtime, phantom_env, root};

/// The counts of one `phantom onnx` on the demo convnet: `decodes=N parses=N typings=N sessions=N`.
fn counts(model: &str) -> Vec<(String, usize)> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("work.log");
    let m = root().join(model);
    let env = [("PHANTOM_WORK_LOG", log.to_str().unwrap())];
    let (code, stdout, stderr) = phantom_env(&["onnx", m.to_str().unwrap(), "--seed", "3"], &env);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text.lines().next().unwrap();
    assert!(line.starts_with("onnx "), "{line}");
    line.split(' ')
        .skip(1)
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn a_comparison_decodes_parses_and_builds_sessions_no_more_than_it_did() {
    ensure_runtime();
    let got = counts("models/convnet.onnx");
    // The model is decoded once, at import: the reference takes that decoding, and what else reads the model reads
    // it without its weights. The reference's parse and typing are kept from sizing to the run. One plain and one
    // instrumented ONNX Runtime session.
    let ceilings = [
        ("decodes", 1),
        ("parses", 1),
        ("typings", 1),
        ("sessions", 2),
    ];
    for (name, most) in ceilings {
        let n = got.iter().find(|(k, _)| k == name).unwrap().1;
        assert!(n >= 1, "{name}: none counted ({got:?})");
        assert!(n <= most, "{name}: {n} per run, more than {most} ({got:?})");
    }
}
