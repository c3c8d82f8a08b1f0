//! Memory by default: a run over phantom's budget bounds itself, and the per-node runs go in groups that fit it.

use std::path::Path;

use crate::common::*;

/// `phantom onnx` on the demo CNN against a copy with `dwconv3` scaled by 1.01, with `env` set: the JSON report and
/// stdout (exit 1: the perturbation is found).
fn perturbed_run(dir: &Path, env: &[(&str, &str)]) -> (serde_json::Value, String) {
    let (target, json) = (dir.join("p.onnx"), dir.join("r.json"));
    if !target.exists() {
        perturbed_copy(&model("convnet.onnx"), "dwconv3", 1.01, &target);
    }
    let m = model("convnet.onnx");
    let args = [
        "onnx",
        m.to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, out, err) = phantom_env(&args, env);
    assert_eq!(code, 1, "{out}{err}");
    (read_json(&json), out)
}

/// Memory by default: a run whose values would exceed phantom's budget (here forced down to 256 KiB) is exposed chunk
/// by chunk without being asked, says so with the estimate and the budget, and finds the same first divergence and
/// failing values as the whole run under the machine's default budget (which holds everything at once).
#[test]
fn a_run_over_the_default_memory_budget_is_bounded_by_itself() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (whole, whole_out) = perturbed_run(dir.path(), &[]);
    let (auto, auto_out) = perturbed_run(dir.path(), &[("PHANTOM_MEMORY_BUDGET", "256KiB")]);
    assert!(!whole_out.contains("memory: holding"), "{whole_out}");
    let note = auto["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .find(|n| n.starts_with("memory: holding"))
        .unwrap_or_else(|| panic!("no memory note: {auto_out}"));
    assert!(
        note.contains("budget of 256 KiB (PHANTOM_MEMORY_BUDGET)"),
        "{note}"
    );
    assert!(
        auto_out.contains("bounded memory (256 KiB): the target ran"),
        "{auto_out}"
    );
    assert_eq!(whole["verdict"]["status"], auto["verdict"]["status"]);
    assert_eq!(
        whole["verdict"]["first_divergence"],
        auto["verdict"]["first_divergence"]
    );
    assert_eq!(
        whole["verdict"]["failing_values"],
        auto["verdict"]["failing_values"]
    );
    // The whole run attributed the error; the bounded one could not, and says so on every value.
    assert!(whole["verdict"]["culprits"]
        .as_array()
        .is_some_and(|c| !c.is_empty()));
    let introduced = |r: &serde_json::Value| {
        r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| !n["values"][0]["introduced"].is_null())
            .count()
    };
    assert!(introduced(&whole) > 0);
    assert_eq!(introduced(&auto), 0);
}

/// The nodes run alone for the introduced error in groups that fit a share of the memory budget: under a 4 MiB budget
/// (the run stays whole) the demo CNN's nodes run in several groups and every value's introduced error is the one
/// measured with all nodes in one run.
#[test]
fn nodes_run_alone_in_groups_measure_the_same_introduced_error() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (one, _) = perturbed_run(dir.path(), &[]);
    let (grouped, _) = perturbed_run(dir.path(), &[("PHANTOM_MEMORY_BUDGET", "4MiB")]);
    let notes = |r: &serde_json::Value| r["notes"].to_string();
    assert!(!notes(&one).contains("ran alone in"), "{}", notes(&one));
    assert!(
        notes(&grouped).contains("the nodes ran alone in"),
        "{}",
        notes(&grouped)
    );
    assert!(
        !notes(&grouped).contains("memory: holding"),
        "the run stays whole: {}",
        notes(&grouped)
    );
    let introduced = |r: &serde_json::Value| -> Vec<(String, f64)> {
        r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| {
                let i = &n["values"][0]["introduced"];
                (!i.is_null()).then(|| {
                    (
                        n["name"].to_string(),
                        i["metrics"]["max_abs"].as_f64().unwrap(),
                    )
                })
            })
            .collect()
    };
    let (a, b) = (introduced(&one), introduced(&grouped));
    assert!(a.len() > 5, "{a:?}");
    assert_eq!(a, b);
    assert_eq!(one["verdict"]["culprits"], grouped["verdict"]["culprits"]);
}
