//! The ONNX conformance suite: every node case the pinned `onnx` package generates, run through phantom. A case
//! ONNX Runtime CPU runs must give a clean `phantom onnx` verdict with every node in f64 and the reference's
//! outputs equal to the suite's; any other case must give the suite's outputs with the reference alone
//! (`phantom run --runner reference`). `tests/conformance/expectations.tsv` lists what does not pass yet, with
//! the reason phantom gave: the test fails on a failure it does not list, and on a listed case that passes (the
//! list only shrinks). The judging is `scripts/conformance/run.py`; the cases are generated once into
//! `target/conformance/` by `scripts/conformance/cases.py`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{ensure_runtime, file_lock, root};

fn run(c: &mut Command) -> String {
    let out = c.output().expect("start the command");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{c:?} failed:\n{text}");
    text
}

/// The suite's virtual environment and its cases, made once under `work`.
pub fn cases(work: &Path) -> (PathBuf, PathBuf) {
    let (venv, cases) = (work.join("venv"), work.join("cases"));
    // The `onnx` package whose generators define the suite, and the ONNX Runtime phantom pins, as locked.
    let python = crate::locks::venv(&venv, "conformance").join("python");
    let stamp = cases.join("lock.used");
    let lock = std::fs::read(crate::locks::lock("conformance")).unwrap();
    if std::fs::read(&stamp).ok().as_ref() != Some(&lock) {
        let _ = std::fs::remove_dir_all(&cases);
    }
    // The cases are rewritten whenever the script that writes them changes.
    let script = root().join("scripts/conformance/cases.py");
    let used = cases.join("cases.py.used");
    let current = std::fs::read(&script).unwrap();
    if !cases.join("cases.json").exists() || std::fs::read(&used).ok() != Some(current.clone()) {
        let _ = std::fs::remove_dir_all(&cases);
        run(Command::new(&python).arg(&script).arg(&cases));
        std::fs::write(&used, current).unwrap();
        std::fs::write(&stamp, lock).unwrap();
    }
    (python, cases)
}

#[test]
fn the_onnx_conformance_suite_passes_but_for_its_listed_cases() {
    ensure_runtime();
    let work = root().join("target/conformance");
    let _lock = file_lock(&work.with_extension("lock"));
    let (python, cases) = cases(&work);
    let out = run(Command::new(python)
        .arg(root().join("scripts/conformance/run.py"))
        .arg(&cases)
        .arg(env!("CARGO_BIN_EXE_phantom"))
        .arg("--expectations")
        .arg(root().join("tests/conformance/expectations.tsv"))
        .arg("--results")
        .arg(work.join("results.json"))
        .arg("--table")
        .arg(work.join("table.md")));
    println!("{out}");
    assert!(
        out.contains(" 0 where the reference disagrees with the suite"),
        "{out}"
    );
}

/// The suite on the wgpu target (lavapipe where there is no GPU): every case ONNX Runtime runs with a float input
/// must compute its float nodes on the device with a right verdict, in fp32 (clean) and fp16 (a precision
/// verdict, never drift), unless `tests/conformance/wgpu-expectations.tsv` lists it with the reason.
#[test]
fn the_conformance_suite_runs_on_the_gpu_but_for_its_listed_cases() {
    if !crate::wgpu::have_adapter() {
        return;
    }
    ensure_runtime();
    let work = root().join("target/conformance");
    let _lock = file_lock(&work.with_extension("lock"));
    let (python, cases) = cases(&work);
    let out = run(Command::new(python)
        .arg(root().join("scripts/conformance/wgpu.py"))
        .arg(&cases)
        .arg(env!("CARGO_BIN_EXE_phantom"))
        .args(["--precision", "both"])
        .arg("--expectations")
        .arg(root().join("tests/conformance/wgpu-expectations.tsv"))
        .arg("--results")
        .arg(work.join("wgpu-results.json"))
        .arg("--table")
        .arg(work.join("wgpu-table.md")));
    println!("{out}");
    assert!(out.contains("--precision fp16"), "{out}");
}
