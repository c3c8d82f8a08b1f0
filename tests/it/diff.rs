//! `phantom diff` on dumps built by tests/data/diff/make_dumps.py: a TP=2 run against a TP=1 run with one layer
//! off, a transposed tensor, a fused residual, bf16 tensors, archives, and hostile inputs.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::phantom;

fn data(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/diff")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Runs `phantom diff` with a JSON report; returns (exit code, terminal output, report).
fn diff(args: &[&str]) -> (i32, String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("d.json");
    let mut all = vec!["diff"];
    all.extend_from_slice(args);
    all.extend(["--json", json.to_str().unwrap()]);
    let (code, out, err) = phantom(&all);
    let report = std::fs::read_to_string(&json)
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(Value::Null);
    (code, format!("{out}{err}"), report)
}

fn pair<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no pair {name}: {r}"))
}

#[test]
fn tensor_parallel_shards_are_joined_and_the_divergent_layer_named() {
    for a in ["tp1", "tp1.zip", "tp1.tar.gz"] {
        let (code, out, r) = diff(&[
            &data(a),
            &data("tp2"),
            "--order",
            "layer{layer}_{stage}",
            "--stages",
            "attn,mlp",
        ]);
        assert_eq!(code, 1, "{out}");
        assert_eq!(r["verdict"]["first_divergent"], "layer2_mlp", "{out}");
        assert_eq!(r["verdict"]["failed"], 1, "{out}");
        let names: Vec<&str> = r["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names[..3],
            ["layer0_attn", "layer0_mlp", "layer1_attn"],
            "report order"
        );
        let bad = pair(&r, "layer2_mlp");
        assert!(
            (bad["metrics"]["max_abs"].as_f64().unwrap() - 1e-2).abs() < 1e-6,
            "{bad}"
        );
        assert_eq!(
            bad["transforms"][0],
            "B: 2 shards joined along axis 2 → [2, 3, 8]"
        );
        // B wrote layer1_attn sequence-first: joined, then A's leading axes permuted to B's layout.
        let t = pair(&r, "layer1_attn");
        assert_eq!(t["status"], "pass", "{t}");
        assert!(
            t["transforms"][1]
                .as_str()
                .unwrap()
                .contains("axes permuted [1, 0, 2]"),
            "{t}"
        );
        assert!(out.contains("first divergent: `layer2_mlp`"), "{out}");
    }
}

#[test]
fn renames_and_unmatched_names_are_reported() {
    let (code, out, r) = diff(&[&data("tp1"), &data("tp2"), "--rename-b", "^layer3_=L3_"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        r["only_a"],
        serde_json::json!(["layer3_attn", "layer3_mlp"])
    );
    assert_eq!(r["only_b"], serde_json::json!(["L3_attn", "L3_mlp"]));
    assert!(
        out.contains("only in A (2): layer3_attn, layer3_mlp"),
        "{out}"
    );
}

#[test]
fn a_fused_residual_and_bf16_tensors_compare() {
    let (code, out, r) = diff(&[
        &data("unfused.npz"),
        &data("fused_bf16.safetensors"),
        "--sum",
        "attn+residual=hidden",
    ]);
    assert_eq!(code, 0, "{out}");
    let h = pair(&r, "hidden");
    assert_eq!(h["metrics"]["max_abs"], 0.0, "{h}");
    assert!(
        h["transforms"][0]
            .as_str()
            .unwrap()
            .contains("attn + residual"),
        "{h}"
    );
    // bf16 on B: within bf16's tolerance, but not equal.
    let l = pair(&r, "logits");
    assert_eq!(l["b_dtype"], "bf16");
    let max = l["metrics"]["max_abs"].as_f64().unwrap();
    assert!(max > 0.0 && max < 0.05, "{l}");
    // Without the sum rule, `hidden` has no partner and the parts are listed.
    let (_, _, r) = diff(&[&data("unfused.npz"), &data("fused_bf16.safetensors")]);
    assert_eq!(r["only_a"], serde_json::json!(["attn", "residual"]));
    assert_eq!(r["only_b"], serde_json::json!(["hidden"]));
}

#[test]
fn tolerances_decide_the_verdict() {
    let (code, out, _) = diff(&[&data("tp1"), &data("tp2"), "--atol", "0.02", "--rtol", "0"]);
    assert_eq!(code, 0, "a 1e-2 difference within atol 2e-2\n{out}");
}

#[test]
fn hostile_dumps_are_refused_with_the_file_named() {
    let ok = data("truncated_ok");
    for (file, says) in [
        ("evil.pt", "asks Python to call posix.system"),
        ("slip.zip", "zip-slip"),
        ("bomb.zip", "decompression bomb"),
        ("truncated", "x.npy"),
        ("notazip.zip", "not a readable zip archive"),
    ] {
        let (code, out, r) = diff(&[&data(file), &ok]);
        assert_eq!(code, 2, "{file}: {out}");
        assert!(out.contains(says), "{file}: {out}");
        assert!(
            out.contains(file.trim_end_matches('/')),
            "{file} named: {out}"
        );
        assert_eq!(r, Value::Null, "no report for {file}");
    }
    assert!(!PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/escaped.npy")
        .exists());
}
