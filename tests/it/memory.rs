//! Memory by default: a run over phantom's budget bounds itself, and the per-node runs go in groups that fit it.

use std::path::Path;

use crate::common::*;

/// `phantom onnx` on the demo CNN against a copy with `dwconv3` scaled by 1.01, with `env` set: the JSON report and
/// stdout (exit 1: the perturbation is found).
fn perturbed_run(dir: &Path, env: &[(&str, &str)]) -> (serde_json::Value, String) {
    perturbed_run_with(dir, env, &[])
}

/// [`perturbed_run`] with `extra` flags.
fn perturbed_run_with(
    dir: &Path,
    env: &[(&str, &str)],
    extra: &[&str],
) -> (serde_json::Value, String) {
    let (target, json) = (dir.join("p.onnx"), dir.join("r.json"));
    if !target.exists() {
        perturbed_copy(&model("convnet.onnx"), "dwconv3", 1.01, &target);
    }
    let m = model("convnet.onnx");
    let mut args = vec![
        "onnx",
        m.to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend(extra);
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
        auto_out.contains("bounded memory (256 KiB): values compared in"),
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
    // Attribution too: the expected-noise run's values waited on disk, and the reference's (held again: values
    // fail), so the culprits, their causes and every value's introduced error and expected noise are the whole run's.
    assert!(note.contains("the reference's where attribution"), "{note}");
    let bounded = auto["notes"].to_string();
    assert!(bounded.contains("waited on disk"), "{bounded}");
    // The noise run spilled its values (beside the reference: counted once it has ended, not before).
    let noise_size = bounded
        .split("expected-noise run's")
        .nth(1)
        .and_then(|t| t.split('(').nth(1))
        .and_then(|t| t.split(')').next())
        .unwrap_or_else(|| panic!("no size of the noise run's values: {bounded}"));
    assert!(!noise_size.starts_with("0 "), "{noise_size}: {bounded}");
    assert!(whole["verdict"]["culprits"]
        .as_array()
        .is_some_and(|c| !c.is_empty()));
    assert_same_attribution(&whole, &auto);
}

/// A run whose expected noise and attribution would exceed the budget, while its first pass without the noise
/// (`--expected-noise auto`) holds only the target's values, runs that pass whole: clean, it is never bounded; with
/// a failing value it compares again bounded, and the verdict, culprits and every value's figures are those of a
/// run bounded from the start (`--expected-noise always` never leaves the noise out).
#[test]
fn a_whole_first_pass_runs_again_bounded_when_a_value_fails() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let budget = [("PHANTOM_MEMORY_BUDGET", "1MiB")];
    let m = model("convnet.onnx");
    let (code, clean, err) = phantom_env(&["onnx", m.to_str().unwrap()], &budget);
    assert_eq!(code, 0, "{clean}{err}");
    assert!(!clean.contains("bounded memory"), "{clean}");
    assert!(clean.contains("expected noise: not run"), "{clean}");
    // Every node run alone reads every reference value, which the first pass then holds: bounded from the start.
    let all = ["onnx", m.to_str().unwrap(), "--attribute-all"];
    let (code, all, err) = phantom_env(&all, &budget);
    assert_eq!(code, 0, "{all}{err}");
    assert!(all.contains("bounded memory (1 MiB)"), "{all}");
    let (again, out) = perturbed_run(dir.path(), &budget);
    let always = ["--expected-noise", "always"];
    let (bounded, from_start) = perturbed_run_with(dir.path(), &budget, &always);
    assert!(
        out.contains("memory: the first pass held the target's values whole"),
        "{out}"
    );
    assert!(out.contains("bounded memory (1 MiB)"), "{out}");
    assert!(
        from_start.contains("memory: holding this run's values at once"),
        "{from_start}"
    );
    assert_eq!(again["verdict"], bounded["verdict"]);
    assert_same_attribution(&again, &bounded);
}

/// The reference values attribution reads are kept by the comparison from the first failing value on, and only the
/// earlier ones computed again, in a second reference run that stops after the last of them: whole or bounded, the
/// introduced errors, expected noise, culprits and causes are those of a second run computing every one of them.
#[test]
fn values_kept_from_the_first_failure_measure_what_a_second_run_does() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let note = |r: &serde_json::Value| -> String {
        let notes = r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str());
        notes
            .filter(|n| n.starts_with("attribution read"))
            .collect()
    };
    let off = [("PHANTOM_KEEP_FROM_DRIFT", "0")];
    for budget in [None, Some("256KiB")] {
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut env: Vec<(&str, &str)> = extra.to_vec();
            env.extend(budget.map(|b| ("PHANTOM_MEMORY_BUDGET", b)));
            perturbed_run(dir.path(), &env).0
        };
        let (kept, again) = (with(&[]), with(&off));
        let (k, a) = (note(&kept), note(&again));
        assert!(
            k.contains("kept by the comparison (from the first failing value on)"),
            "{k}"
        );
        assert!(k.contains("stopped after the last of them"), "{k}");
        assert!(
            !a.contains("kept by the comparison") && a.contains("second reference run"),
            "{a}"
        );
        // Fewer values computed again than read: the ones from `dwconv3` on were kept.
        let count = |n: &str, what: &str| -> usize {
            let head = n.split(what).next().unwrap_or_default();
            head.rsplit(' ').find_map(|w| w.parse().ok()).unwrap_or(0)
        };
        assert!(
            count(&k, " computed again") < count(&a, " reference values"),
            "{k} / {a}"
        );
        assert_same_attribution(&kept, &again);
    }
}

/// Every value's status, introduced error and expected noise, and the culprits with their causes, agree between
/// two reports of the same model (to the last digits ORT may round differently when it exposes other values).
fn assert_same_attribution(a: &serde_json::Value, b: &serde_json::Value) {
    let culprits = |r: &serde_json::Value| -> Vec<(String, String)> {
        r["verdict"]["culprits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["value"].to_string(), c["causes"][0]["kind"].to_string()))
            .collect()
    };
    assert_eq!(culprits(a), culprits(b));
    let close = |x: &serde_json::Value, y: &serde_json::Value, what: &str| {
        let (x, y) = (x.as_f64(), y.as_f64());
        assert_eq!(x.is_some(), y.is_some(), "{what}: {x:?} vs {y:?}");
        if let (Some(x), Some(y)) = (x, y) {
            assert!(
                (x - y).abs() <= 1e-3 * x.abs().max(y.abs()) + 1e-9,
                "{what}: {x} vs {y}"
            );
        }
    };
    let (na, nb) = (
        a["nodes"].as_array().unwrap(),
        b["nodes"].as_array().unwrap(),
    );
    assert_eq!(na.len(), nb.len());
    let mut introduced = 0;
    for (x, y) in na.iter().zip(nb) {
        let (vx, vy) = (&x["values"][0], &y["values"][0]);
        let name = x["name"].to_string();
        assert_eq!(vx["status"], vy["status"], "{name}");
        close(
            &vx["noise"]["max_abs"],
            &vy["noise"]["max_abs"],
            &format!("{name} noise"),
        );
        let (ix, iy) = (&vx["introduced"]["metrics"], &vy["introduced"]["metrics"]);
        close(
            &ix["max_abs"],
            &iy["max_abs"],
            &format!("{name} introduced"),
        );
        introduced += usize::from(!ix.is_null());
    }
    assert!(
        introduced > 5,
        "introduced error measured on {introduced} values"
    );
}

/// `phantom onnx MODEL --precision fp16` with `extra` arguments and `env` set, writing `tag`.json in `dir`: the exit
/// code and the JSON report.
fn fp16_run(
    dir: &Path,
    m: &Path,
    (extra, env): (&[&str], &[(&str, &str)]),
    tag: &str,
) -> (i32, serde_json::Value) {
    let json = dir.join(format!("{tag}.json"));
    let mut args = vec![
        "onnx",
        m.to_str().unwrap(),
        "--precision",
        "fp16",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = phantom_env(&args, env);
    assert!(code <= 1, "{out}{err}");
    (code, read_json(&json))
}

/// An fp16 run over the default budget: which values are precision-limited rests on the expected noise, which the
/// bounded run measures from the noise run spilled to disk, so every value's status is the whole run's.
#[test]
fn a_bounded_fp16_run_keeps_its_expected_noise() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model("encoder.onnx");
    // Every node alone, so that both runs measure every introduced error.
    let all = ["--attribute-all"];
    let (_, whole) = fp16_run(dir.path(), &m, (&all, &[]), "w");
    let budget = [("PHANTOM_MEMORY_BUDGET", "256KiB")];
    let (_, auto) = fp16_run(dir.path(), &m, (&all, &budget), "a");
    assert!(
        auto["notes"].to_string().contains("waited on disk"),
        "{}",
        auto["notes"]
    );
    assert_eq!(whole["verdict"]["status"], auto["verdict"]["status"]);
    assert_eq!(
        whole["verdict"]["failing_values"],
        auto["verdict"]["failing_values"]
    );
    let noisy = |r: &serde_json::Value| r.to_string().matches("\"noise\":{").count();
    assert!(
        noisy(&whole) > 5 && noisy(&whole) == noisy(&auto),
        "{} vs {}",
        noisy(&whole),
        noisy(&auto)
    );
    assert_same_attribution(&whole, &auto);
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

/// Chunks on ONNX Runtime run cuts of the model with every value exposed, not the whole model exposing the chunk
/// only: exposing fewer values would let ONNX Runtime fuse across the others and round differently. On this fp16
/// QuantizeLinear (one element sits at a rounding boundary) a run exposing only the chunk lost the one-level flip
/// the whole run finds; the cut keeps it.
#[test]
fn chunks_round_as_the_whole_run_does() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = root().join("tests/data/fp16/quant_saturation.onnx");
    // The reference keeps its own decisions, so the flip shows; adopted (the default), both runs adopt the same.
    let own = "--own-decisions";
    let (code, whole) = fp16_run(dir.path(), &m, (&[own], &[]), "w");
    let (chunked_code, chunked) =
        fp16_run(dir.path(), &m, (&[own, "--max-memory", "1KiB"], &[]), "c");
    assert_eq!((code, chunked_code), (1, 1));
    assert!(chunked["notes"]
        .to_string()
        .contains("bounded memory (1 KiB)"));
    for k in ["status", "failing_values", "first_divergence"] {
        assert_eq!(whole["verdict"][k], chunked["verdict"][k], "{k}");
    }
    assert_eq!(whole["verdict"]["failing_values"], 1);
    let (code, whole) = fp16_run(dir.path(), &m, (&[], &[]), "wa");
    let (chunked_code, chunked) = fp16_run(dir.path(), &m, (&["--max-memory", "1KiB"], &[]), "ca");
    assert_eq!((code, chunked_code), (0, 0));
    let adopted = |r: &serde_json::Value| r["nodes"][1]["values"][0]["adopted"].clone();
    assert_eq!(adopted(&whole), adopted(&chunked));
    assert!(adopted(&whole)["flips"].as_u64().unwrap() >= 1, "{whole}");
}

/// On wgpu a bounded run reruns the model per chunk (the shaders compute node by node) and reads its attribution
/// back from disk: in fp16 on lavapipe every value's status, error, expected noise and introduced error are the
/// whole run's, to the last bit.
#[test]
fn a_bounded_wgpu_run_is_the_whole_run() {
    if !crate::wgpu::have_adapter() {
        return;
    }
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model("convnet.onnx");
    // Every node alone, so that both runs measure every introduced error.
    let wgpu = ["--ep", "wgpu", "--attribute-all"];
    let (_, whole) = fp16_run(dir.path(), &m, (&wgpu, &[]), "w");
    let bounded = ["--ep", "wgpu", "--max-memory", "64KiB", "--attribute-all"];
    let (_, chunked) = fp16_run(dir.path(), &m, (&bounded, &[]), "c");
    assert!(chunked["notes"].to_string().contains("waited on disk"));
    let values = |r: &serde_json::Value| -> Vec<String> {
        value_reports(r)
            .map(|v| {
                let fields = [
                    &v["status"],
                    &v["metrics"]["max_abs"],
                    &v["noise"]["max_abs"],
                ];
                format!("{fields:?} {}", v["introduced"]["metrics"]["max_abs"])
            })
            .collect()
    };
    let (a, b) = (values(&whole), values(&chunked));
    assert!(
        a.iter().filter(|v| !v.ends_with("null")).count() > 5,
        "{a:?}"
    );
    assert_eq!(a, b);
}

/// A spill directory that cannot be written: a run over the default budget that fits half the machine is held whole
/// and says why; `--max-memory`, which needs the directory, stops with exit 2 naming PHANTOM_SPILL_DIR.
#[test]
fn an_unwritable_spill_directory_is_said_not_hidden() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no/such/dir");
    let spill = ("PHANTOM_SPILL_DIR", nowhere.to_str().unwrap());
    let (whole, _) = perturbed_run(dir.path(), &[]);
    let values = [("PHANTOM_VALUES_BUDGET", "256KiB"), spill];
    let (held, out) = perturbed_run(dir.path(), &values);
    assert_eq!(whole["verdict"], held["verdict"], "{out}");
    let notes = held["notes"].to_string();
    assert!(
        notes.contains("were held whole") && notes.contains("no/such/dir"),
        "{notes}"
    );
    let m = model("convnet.onnx");
    let args = ["onnx", m.to_str().unwrap(), "--max-memory", "64KiB"];
    let (code, out, err) = phantom_env(&args, &[spill]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("PHANTOM_SPILL_DIR"), "{err}");
}

/// A reference run whose sink sets its stop flag ends before its next node, successfully: the values after the one
/// that set it are neither computed nor handed over.
#[test]
fn a_reference_run_told_to_stop_ends_before_its_next_node() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let graph = phantom::model::load(&model("convnet.onnx")).unwrap();
    let inputs = phantom::model::inputs::prepare(&graph, &Default::default()).unwrap();
    let values = |stop_at: Option<&str>| -> Vec<String> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut runner = phantom::runner::reference::ReferenceRunner {
            stop: Some(stop.clone()),
            ..Default::default()
        };
        let mut seen = vec![];
        runner
            .run_streaming(&graph, &inputs, &mut |name, _| {
                seen.push(name.to_string());
                if Some(name) == stop_at {
                    stop.store(true, Ordering::Relaxed);
                }
            })
            .unwrap();
        seen
    };
    let all = values(None);
    let third = graph.nodes[2].outputs[0].clone();
    let first = values(Some(&third));
    let at = all.iter().position(|n| *n == third).unwrap();
    assert!(all.len() > at + 3, "{all:?}");
    assert_eq!(first, all[..=at], "the run went on past `{third}`");
}

/// A model whose weights alone exceed the memory budget in f64 is refused by every command that runs the reference
/// (exit 2, saying how to cut it), never killed by the kernel part way.
#[test]
fn weights_beyond_the_budget_are_refused_by_onnx_and_run() {
    ensure_runtime();
    let m = model("encoder.onnx");
    for cmd in ["onnx", "run"] {
        let (code, out, err) = phantom_env(
            &[cmd, m.to_str().unwrap()],
            &[("PHANTOM_MEMORY_BUDGET", "16KiB")],
        );
        assert_eq!(code, 2, "{cmd}: {out}{err}");
        assert!(err.contains("its weights take"), "{cmd}: {err}");
        assert!(err.contains("phantom plan"), "{cmd}: {err}");
    }
}
