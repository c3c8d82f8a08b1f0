//! The surgery property test (issue 32): on models with the traits real-world graphs have (`tests/data/traits/`,
//! one per trait, made by `make_traits.py`), and on every `.onnx` in `PHANTOM_SURGERY_MODELS` when it is set (the
//! fetch script's folder: the full set), every model phantom derives gives what the whole run gives:
//! - the whole comparison runs with every value compared (values ONNX leaves undefined excepted, said why) and
//!   every node's introduced error measured from its run alone (the isolated model), control flow excepted;
//! - chunk cuts (`--max-memory 1KiB`: one cut per few values; `PHANTOM_SURGERY_BUDGET` for the full set) give the
//!   whole run's target values;
//! - segments (`plan`, the boundary pass, each index, `merge`, with `--target-model`) give the whole run's verdict,
//!   and every value it compared with the same status (they may also compare a value no output depends on, which
//!   the whole run prunes and a segment exposes for a later one).
//!
//! A model that fails is a failing test, never a skip. `PHANTOM_BIN` runs another build of phantom (a release one).

use std::path::{Path, PathBuf};

use crate::common::{ensure_runtime, read_json, root, value_reports};

/// Runs phantom: the binary `PHANTOM_BIN` names (a release build for the full set), else this build's.
fn phantom(args: &[&str]) -> (i32, String, String) {
    let bin =
        std::env::var_os("PHANTOM_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_phantom").into());
    let out = std::process::Command::new(bin)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run phantom");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn trait_models() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("tests/data/traits"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    assert!(
        v.len() >= 7,
        "the trait models are in the repository: {v:?}"
    );
    v
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The whole comparison's JSON report (a verdict: exit 0 or 1).
fn whole(m: &Path, dir: &Path) -> serde_json::Value {
    let json = dir.join("whole.json");
    let (code, out, err) = phantom(&["onnx", s(m), "--json", s(&json)]);
    assert!(code == 0 || code == 1, "{}: {out}{err}", m.display());
    read_json(&json)
}

/// Every value compared, bar those that hide nothing (no output depends on them, ONNX leaves them undefined, an
/// exact stand-in is read); no node's run alone refused (its derived model is the surgery under test; a node whose
/// input tract folded away is said, not refused).
fn everything_compared(m: &Path, r: &serde_json::Value) {
    for n in r["nodes"].as_array().unwrap() {
        for v in n["values"].as_array().unwrap() {
            let reason = v["reason"].as_str().unwrap_or("");
            assert!(
                v["status"] != "unchecked" || !phantom::analysis::hides(reason),
                "{}: value {} unchecked: {reason}",
                m.display(),
                v["name"]
            );
        }
    }
    let failed = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .find(|n| n.contains("run alone failed") || n.contains("introduced error not measured:"));
    assert!(failed.is_none(), "{}: {failed:?}", m.display());
}

/// The chunked run's target values against the whole run's, value by value, through their distance from the
/// reference: the same status, and the same error to within a factor of two or a hundredth of the tolerance (a cut
/// fixes the shapes its inputs have, and ONNX Runtime may pick other kernels for them: seen on ResNet-50, 1.07e-3
/// whole, 1.18e-3 chunked; on PicoDet 1.3e-6 whole, 4.3e-6 chunked, both far inside the tolerance).
fn chunks_agree(m: &Path, dir: &Path, r: &serde_json::Value) {
    let json = dir.join("chunked.json");
    // 1 KiB cuts a trait model every few values; the full set takes PHANTOM_SURGERY_BUDGET (8MiB in the README).
    let budget = std::env::var("PHANTOM_SURGERY_BUDGET").unwrap_or_else(|_| "1KiB".into());
    let (code, out, err) = phantom(&["onnx", s(m), "--max-memory", &budget, "--json", s(&json)]);
    assert!(
        code == 0 || code == 1,
        "{} chunked: {out}{err}",
        m.display()
    );
    let c = read_json(&json);
    let note = c["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .find(|n| n.starts_with("bounded memory"));
    assert!(
        note.is_some_and(|n| n.contains("chunk")),
        "{}: not chunked: {note:?}",
        m.display()
    );
    let values = |r: &serde_json::Value| -> Vec<serde_json::Value> {
        r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|n| n["values"].as_array().unwrap().clone())
            .collect()
    };
    assert_eq!(
        c["verdict"]["status"],
        r["verdict"]["status"],
        "{}",
        m.display()
    );
    let (a, b) = (values(r), values(&c));
    assert_eq!(a.len(), b.len(), "{}", m.display());
    for (va, vb) in a.iter().zip(&b) {
        assert_eq!(
            (&va["name"], &va["status"]),
            (&vb["name"], &vb["status"]),
            "{}",
            m.display()
        );
        let d = |v: &serde_json::Value| v["metrics"]["max_abs"].as_f64();
        let used = |v: &serde_json::Value| v["metrics"]["tolerance_used"].as_f64().unwrap_or(0.0);
        if let (Some(x), Some(y)) = (d(va), d(vb)) {
            // Errors a hundredth of the tolerance apart are the same error: a wrong cut misses by far more.
            let same_at_tolerance = (used(va) - used(vb)).abs() <= 0.01;
            assert!(
                (x - y).abs() <= 0.5 * x.max(y) + 1e-12 || same_at_tolerance,
                "{} {}: whole {x} ({} of tolerance), chunked {y} ({})",
                m.display(),
                va["name"],
                used(va),
                used(vb)
            );
        }
    }
}

/// Plan, boundary pass, every index and merge, with the model itself as `--target-model`: the merged verdict is
/// the whole run's, on as many values.
fn segments_agree(m: &Path, dir: &Path, r: &serde_json::Value) {
    let plan = dir.join("plan");
    let json = dir.join("merged.json");
    let run = |args: &[&str]| {
        let (code, out, err) = phantom(args);
        assert!(
            code == 0 || code == 1,
            "{} {args:?}: {out}{err}",
            m.display()
        );
    };
    run(&[
        "plan",
        s(m),
        "-o",
        s(&plan),
        "--segments",
        "3",
        "--target-model",
        s(m),
    ]);
    run(&["segment", s(&plan), "--boundary"]);
    for i in ["0", "1", "2"] {
        run(&["segment", s(&plan), "--index", i]);
    }
    run(&["merge", s(&plan), "--json", s(&json)]);
    let merged = read_json(&json);
    assert_eq!(
        merged["verdict"]["status"],
        r["verdict"]["status"],
        "{}",
        m.display()
    );
    // Every value the whole run compared, the segments compared with the same status. A segment may compare more:
    // a value no graph output depends on, which the whole run prunes, is a segment's output when a later segment
    // reads it.
    let statuses = |r: &serde_json::Value| -> std::collections::HashMap<String, String> {
        value_reports(r)
            .filter(|v| v["status"] != "unchecked")
            .map(|v| {
                (
                    v["name"].as_str().unwrap().into(),
                    v["status"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let (whole, segmented) = (statuses(r), statuses(&merged));
    for (name, status) in &whole {
        assert_eq!(
            segmented.get(name),
            Some(status),
            "{}: value `{name}` in the merged segments",
            m.display()
        );
    }
    for name in segmented.keys().filter(|n| !whole.contains_key(*n)) {
        let why = value_reports(r)
            .find(|v| v["name"] == name.as_str())
            .and_then(|v| v["reason"].as_str())
            .unwrap_or("");
        assert!(
            why.contains("no graph output depends on it"),
            "{}: `{name}` compared in segments only, unchecked whole because: {why}",
            m.display()
        );
    }
}

fn check(m: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let r = whole(m, dir.path());
    everything_compared(m, &r);
    chunks_agree(m, dir.path(), &r);
    // A segment is cut between top-level nodes: a model of fewer than three has nothing to segment.
    if r["nodes"].as_array().unwrap().len() >= 3 {
        segments_agree(m, dir.path(), &r);
    }
}

#[test]
fn every_surgery_kind_on_every_trait_model() {
    ensure_runtime();
    let mut models = trait_models();
    if let Some(d) = std::env::var_os("PHANTOM_SURGERY_MODELS") {
        let mut more: Vec<PathBuf> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
            .collect();
        more.sort();
        models.extend(more);
    }
    let failures: Vec<String> = models
        .iter()
        .filter_map(|m| {
            std::panic::catch_unwind(|| check(m))
                .err()
                .map(|e| match e.downcast_ref::<String>() {
                    Some(s) => s.clone(),
                    None => format!("{}: failed", m.display()),
                })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} models failed:\n{}",
        failures.len(),
        models.len(),
        failures.join("\n---\n")
    );
}

/// ONNX Runtime reads row-major buffers: a tensor with other strides (a transposed view, as host-op results on
/// wgpu can be) is fed in its logical order, not refused (issue 32: a Llama's ScatterND on wgpu).
#[test]
fn a_transposed_tensor_is_fed_in_logical_order() {
    use phantom::model::inputs::Inputs;
    use phantom::runner::ort::{run_session, OrtRunner};
    use phantom::tensor::Tensor;
    ensure_runtime();
    let m = root().join("tests/data/traits/names_and_stale_value_info.onnx");
    let graph = phantom::model::load(&m).unwrap();
    let lib = phantom::runner::ort_lib::locate(None, false).unwrap();
    let ort = OrtRunner::cpu(&lib).unwrap();
    let logical = ndarray::Array2::from_shape_fn((2, 5), |(i, j)| (i * 5 + j) as f32 * 0.1 - 0.4);
    let strided = logical
        .t()
        .as_standard_layout()
        .to_owned()
        .reversed_axes()
        .into_dyn();
    assert!(!strided.is_standard_layout() && strided == logical.clone().into_dyn());
    let run = |t: Tensor| {
        let mut inputs = Inputs::default();
        inputs.tensors.push(("x".into(), t));
        let mut session = ort.session_for(&graph).unwrap();
        let out = run_session(&mut session, &inputs, &graph).unwrap();
        out.into_iter().next().unwrap().1.unwrap().to_f64_array()
    };
    let a = run(Tensor::F32(logical.into_dyn()));
    let b = run(Tensor::F32(strided));
    assert_eq!(a, b);
}

/// A Gemm of constants (as a segment's cut embeds an LSTM cell's first step) is folded in f64: tract's own fold
/// takes float32 alpha/beta that an f64 `C` refuses, which sent the whole model to the float32 fallback.
#[test]
fn a_gemm_of_constants_is_folded_in_f64() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let m = root().join("tests/data/traits/constant_gemm.onnx");
    let (code, out, err) = phantom(&["onnx", s(&m), "--json", s(&json)]);
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    let notes = r["notes"].to_string();
    assert!(!notes.contains("rewritten as float64"), "{notes}");
    let gemm = value_reports(&r).find(|v| v["name"] == "g").unwrap();
    assert_eq!(gemm["status"], "pass", "{gemm}");
}

/// A `Sigmoid` of constants (Swin-V2's continuous position bias: a table through an MLP, then `16·sigmoid`, added
/// to the attention logits). tract evaluates it while typing the model and has no f64 kernel for it, so the float64
/// model did not load: every constant tract folds fell back to float32, and on Swin-V2's dynamo export 638 of 898
/// values went unchecked. Now the float64 model loads, the Sigmoid is computed in f64, and every value is compared.
#[test]
fn a_sigmoid_of_constants_is_folded_in_f64() {
    use crate::common::{f32_tensor, node, value, write_model};
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let ramp = |n: usize, k: f32| (0..n).map(|i| (i as f32 * k).sin()).collect::<Vec<f32>>();
    let g = tract_onnx::pb::GraphProto {
        name: "bias_mlp".into(),
        node: vec![
            node("MatMul", &["table", "w1"], "h"),
            node("Relu", &["h"], "hr"),
            node("MatMul", &["hr", "w2"], "logit"),
            node("Sigmoid", &["logit"], "gate"),
            node("Mul", &["gate", "sixteen"], "bias"),
            node("Add", &["x", "bias"], "y"),
        ],
        initializer: vec![
            f32_tensor("table", vec![4, 3], ramp(12, 0.7)),
            f32_tensor("w1", vec![3, 8], ramp(24, 1.3)),
            f32_tensor("w2", vec![8, 2], ramp(16, 0.9)),
            f32_tensor("sixteen", vec![], vec![16.0]),
        ],
        input: vec![value("x", &[4, 2])],
        output: vec![value("y", &[4, 2])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("sigmoid_of_constants.onnx"), g, 17);
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&["onnx", s(&m), "--json", s(&json)]);
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    let notes = r["notes"].to_string();
    assert!(!notes.contains("rewritten as float64"), "{notes}");
    for n in r["nodes"].as_array().unwrap() {
        assert!(
            n["reference"]["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("f64")),
            "{n}"
        );
    }
    let y = value_reports(&r).find(|v| v["name"] == "y").unwrap();
    assert_eq!(y["status"], "pass", "{y}");
}

/// RoBERTa's position ids as torch's dynamo exporter writes them: the mask of non-padding ids, cast to int64,
/// summed with `CumSum`, then gathered from a position table. tract's CumSum failed on the int64 it holds as a
/// symbolic dim ("TDim is not a number") and every value after it went unchecked on every RoBERTa-family export;
/// phantom computes CumSum itself.
#[test]
fn roberta_position_ids_are_computed_by_phantom_s_cumsum() {
    use crate::common::{attr_int, f32_tensor, i64_tensor, node, value, write_model};
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut cast = node("Cast", &["ne"], "m64");
    cast.attribute = vec![attr_int("to", 7)];
    let mut ids = value("ids", &[1, 8]);
    if let Some(tract_onnx::pb::type_proto::Value::TensorType(t)) =
        ids.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 7;
    }
    let g = tract_onnx::pb::GraphProto {
        name: "position_ids".into(),
        node: vec![
            node("Equal", &["ids", "one"], "eq"),
            node("Not", &["eq"], "ne"),
            cast,
            node("CumSum", &["m64", "one"], "cs"),
            node("Mul", &["cs", "m64"], "pos0"),
            node("Add", &["pos0", "one"], "pos"),
            node("Gather", &["table", "pos"], "emb"),
        ],
        initializer: vec![
            i64_tensor("one", vec![], vec![1]),
            f32_tensor(
                "table",
                vec![20, 2],
                (0..40).map(|i| i as f32 * 0.25).collect(),
            ),
        ],
        input: vec![ids],
        output: vec![value("emb", &[1, 8, 2])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("position_ids.onnx"), g, 17);
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&["onnx", s(&m), "--json", s(&json)]);
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    let cumsum = (r["nodes"].as_array().unwrap().iter())
        .find(|n| n["op_type"] == "CumSum")
        .unwrap();
    assert_eq!(cumsum["reference"]["kind"], "f64_phantom", "{cumsum}");
    let emb = value_reports(&r).find(|v| v["name"] == "emb").unwrap();
    assert_eq!(
        (&emb["status"], &emb["metrics"]["max_abs"]),
        (&"pass".into(), &0.0.into()),
        "{emb}"
    );
}
