//! `phantom record` / `phantom check`: golden runs, drift budgets, regressions named at the right node.

use crate::common::*;

/// `phantom check MODEL --golden DIR` with `extra` arguments.
fn check(m: &std::path::Path, golden: &std::path::Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "check",
        m.to_str().unwrap(),
        "--golden",
        golden.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    phantom(&args)
}

#[test]
fn same_configuration_checks_clean_and_a_perturbed_node_is_named() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("golden");
    let m = model("convnet.onnx");
    let (code, out, err) = phantom(&[
        "record",
        m.to_str().unwrap(),
        "-o",
        golden.to_str().unwrap(),
        "--full-outputs",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("recorded 13 values"), "{out}");
    let size: u64 = walk(&golden);
    assert!(size < 64 * 1024, "golden records stay small: {size} bytes");

    let (code, out, err) = check(&m, &golden, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("0 regressed, 0 missing") && out.contains("environment: unchanged"),
        "{out}"
    );

    let target = dir.path().join("perturbed.onnx");
    perturbed_copy(&m, "conv2", 1.001, &target);
    let json = dir.path().join("c.json");
    let junit = dir.path().join("c.xml");
    let (code, out, err) = phantom(&[
        "check",
        m.to_str().unwrap(),
        "--golden",
        golden.to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("tests=\"13\"") && xml.contains("name=\"#4 Conv conv2 → c2\">"),
        "{xml}"
    );
    assert!(
        out.contains("first regressed: node #4 Conv `conv2`"),
        "{out}"
    );
    assert!(
        out.contains("changed since the record: model_sha256"),
        "{out}"
    );
    let r = read_json(&json);
    assert_eq!(r["first_regressed"]["node"], "conv2");
    // Everything before conv2 is bit-identical.
    for v in r["values"].as_array().unwrap().iter().take(4) {
        assert_eq!(v["status"], "identical", "{v}");
    }
    // A generous budget for that node alone lets the check pass the node but not its consumers.
    let (code, out, _) = check(
        &m,
        &golden,
        &[
            "--target-model",
            target.to_str().unwrap(),
            "--budget-node",
            "conv2=0.01",
        ],
    );
    assert_eq!(code, 1);
    assert!(
        !out.contains("`conv2` →") && out.contains("first regressed: node #5"),
        "{out}"
    );
}

fn walk(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(&e.path())
            } else {
                e.metadata().unwrap().len()
            }
        })
        .sum()
}

#[test]
fn existing_golden_is_not_overwritten_and_bad_records_are_errors() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("g");
    let m = model("encoder.onnx");
    assert_eq!(
        phantom(&[
            "record",
            m.to_str().unwrap(),
            "-o",
            golden.to_str().unwrap()
        ])
        .0,
        0
    );
    let before = std::fs::read(golden.join("golden.json")).unwrap();
    let (code, _, err) = phantom(&[
        "record",
        m.to_str().unwrap(),
        "-o",
        golden.to_str().unwrap(),
        "--seed",
        "7",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--force"), "{err}");
    assert_eq!(
        std::fs::read(golden.join("golden.json")).unwrap(),
        before,
        "not overwritten"
    );
    let (code, _, _) = phantom(&[
        "record",
        m.to_str().unwrap(),
        "-o",
        golden.to_str().unwrap(),
        "--seed",
        "7",
        "--force",
    ]);
    assert_eq!(code, 0);
    assert_ne!(
        std::fs::read(golden.join("golden.json")).unwrap(),
        before,
        "--force replaces it"
    );

    let json = golden.join("golden.json");
    let full = std::fs::read(&json).unwrap();
    std::fs::write(&json, &full[..full.len() / 2]).unwrap();
    let (code, _, err) = check(&m, &golden, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("corrupt or truncated"), "{err}");
    std::fs::write(&json, br#"{"schema": "someone-else/3"}"#).unwrap();
    let (code, _, err) = check(&m, &golden, &[]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = check(&m, &dir.path().join("nope"), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no golden.json"), "{err}");
}

#[test]
fn another_opt_level_is_within_budget_and_budget_zero_names_the_first_changed_node() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("g");
    let real = root().join("tests/data/real/ppocr_cls_v2.onnx");
    let m = real.to_str().unwrap();
    let shape = ["--shape", "x=1x3x48x192"];
    let (code, _, err) = phantom(&[
        "record",
        m,
        "-o",
        golden.to_str().unwrap(),
        "--ort-opt-level",
        "disable",
        shape[0],
        shape[1],
    ]);
    assert_eq!(code, 0, "{err}");
    let g = golden.to_str().unwrap();
    let (code, out, _) = phantom(&["check", m, "--golden", g, "--ort-opt-level", "all"]);
    assert_eq!(
        code, 0,
        "fusion-level differences stay within the default budget\n{out}"
    );
    assert!(
        out.contains("changed since the record: opt_level: disable → all"),
        "{out}"
    );
    let json = dir.path().join("c.json");
    let (code, out, _) = phantom(&[
        "check",
        m,
        "--golden",
        g,
        "--ort-opt-level",
        "all",
        "--budget",
        "0",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    let r = read_json(&json);
    let values = r["values"].as_array().unwrap();
    let first_changed = values
        .iter()
        .position(|v| v["status"] != "identical")
        .unwrap();
    assert_eq!(
        r["first_regressed"]["value"],
        values[first_changed]["value"]
    );
    assert!(values[..first_changed]
        .iter()
        .all(|v| v["status"] == "identical"));
}

#[test]
fn github_actions_annotations() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("perturbed.onnx");
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &target);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_phantom"))
        .args([
            "onnx",
            model("convnet.onnx").to_str().unwrap(),
            "--target-model",
            target.to_str().unwrap(),
            "--quiet",
        ])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("::error title=phantom drift::first divergence at node #4 Conv `conv2`"),
        "{text}"
    );
}

#[test]
fn random_ops_draw_the_same_numbers_when_checked_again() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("golden");
    let m =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/contrib/random_ops.onnx");
    let record = |seed: &str, out: &std::path::Path| {
        let args = [
            "record",
            m.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--dim",
            "n=8",
            "--seed",
            seed,
        ];
        let (code, out, err) = phantom(&args);
        assert_eq!(code, 0, "{out}{err}");
    };
    record("3", &golden);
    // ORT's own RandomNormalLike draws anew each run; phantom's hash noise does not.
    let (code, out, err) = check(&m, &golden, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 regressed, 0 missing"), "{out}");
}
