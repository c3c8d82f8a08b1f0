//! One preparation (issue 32 item 4): the same model and flags give the same prepared graph and inputs in every
//! command. Each command logs its preparation to `PHANTOM_PREPARED_LOG` (command, graph sha256, inputs hash); the
//! model's `If` reads `Shape(input)`, so a command that did not inline the taken branch, or made other inputs,
//! logs another hash.

use std::collections::BTreeMap;

use crate::common::{ensure_runtime, phantom_env, root};

#[test]
fn every_command_prepares_the_same_graph_and_inputs() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("prepared.log");
    let model = root().join("tests/data/traits/shape_of_input.onnx");
    let m = model.to_str().unwrap();
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let env = [("PHANTOM_PREPARED_LOG", log.to_str().unwrap())];
    let (golden, plan) = (out("golden"), out("plan"));
    let runs: Vec<Vec<&str>> = vec![
        vec!["onnx", m, "--seed", "7"],
        vec!["run", m, "--seed", "7"],
        vec!["record", m, "--seed", "7", "-o", &golden],
        vec!["check", m, "--golden", &golden],
        vec!["scan", m, "--seed", "7"],
        vec!["profile", m, "--seed", "7", "--runs", "1"],
        vec!["plan", m, "--seed", "7", "--segments", "2", "--out", &plan],
        vec!["determinism", m, "--seed", "7", "--runs", "2"],
    ];
    for args in &runs {
        let (code, stdout, stderr) = phantom_env(args, &env);
        assert!(code == 0, "{args:?} exited {code}: {stdout}\n{stderr}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let mut seen: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        seen.insert(f[0], (f[1], f[2]));
    }
    for c in [
        "compare",
        "run",
        "record",
        "check",
        "scan",
        "plan",
        "determinism",
    ] {
        assert!(
            seen.contains_key(c),
            "{c} did not log its preparation:\n{text}"
        );
    }
    let first = seen["compare"];
    for (c, h) in &seen {
        assert_eq!(
            *h, first,
            "{c} prepared another graph or inputs than onnx:\n{text}"
        );
    }
    let raw = phantom_model_sha(&model);
    assert_ne!(
        first.0, raw,
        "the taken branch was inlined, so the graph is not the file"
    );
}

fn phantom_model_sha(p: &std::path::Path) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(std::fs::read(p).unwrap()))
}
