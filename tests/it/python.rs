//! The Python package: the wheel built with maturin in the dev profile (it reuses this test build), installed into
//! a fresh virtual environment with the ONNX Runtime it pins; the demo run through the installed `phantom` and
//! `python -m phantom`, then the Python API's tests (`python/tests`) with pytest.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{file_lock, root};

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The locked environment `python-api` (maturin, pytest, and the wheel's own dependencies) at `dir`.
fn venv(dir: &Path) -> PathBuf {
    crate::locks::venv(dir, "python-api")
}

/// Builds the wheel into `out` and returns its path. maturin runs cargo in the dev profile on a hard-linked copy
/// of this build's `debug/` folder: the dependencies are fresh (at most the binary is linked again), and that
/// linking, and cargo's copying of the binary into place, happen in the copy, not under the tests running
/// `target/debug/phantom` beside this one.
fn wheel(bin: &Path, work: &Path, out: &Path) -> PathBuf {
    let built = Path::new(env!("CARGO_BIN_EXE_phantom")).parent().unwrap();
    let copy = work.join("target");
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).unwrap();
    run(Command::new("cp")
        .arg("-al")
        .arg(built)
        .arg(copy.join("debug")));
    let _ = std::fs::remove_dir_all(out);
    run(Command::new(bin.join("maturin"))
        .args(["build", "--profile", "dev", "--quiet", "--target-dir"])
        .arg(&copy)
        .arg("--out")
        .arg(out)
        .current_dir(root()));
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("maturin wrote a wheel")
}

#[test]
fn the_wheel_installs_phantom_and_its_python_tests_pass() {
    let work = root().join("target/python-test");
    let _lock = file_lock(&work.with_extension("lock"));
    let bin = venv(&work.join("venv"));
    let whl = wheel(&bin, &work, &work.join("wheels"));
    crate::locks::wheel_alone(&bin, &whl);
    // The venv first on PATH, as an activated environment: its python3 holds the pinned onnxruntime.
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let phantom = bin.join("phantom");
    assert!(
        phantom.is_file(),
        "the wheel puts phantom in the environment's bin/"
    );
    let demo = run(Command::new(&phantom)
        .args(["onnx", "models/convnet.onnx"])
        .current_dir(root())
        .env("PATH", &path)
        .env("NO_COLOR", "1")
        .env("PHANTOM_NO_INSTALL", "1"));
    let text = String::from_utf8_lossy(&demo.stdout);
    assert!(text.contains("✓ CLEAN"), "{text}");
    let rt = run(Command::new(&phantom)
        .arg("runtimes")
        .env("PATH", &path)
        .env("PHANTOM_NO_INSTALL", "1"));
    let rt = String::from_utf8_lossy(&rt.stdout);
    assert!(
        rt.contains("onnxruntime 1.31.1") && rt.contains("python package onnxruntime"),
        "{rt}"
    );
    let m = run(Command::new(bin.join("python")).args(["-m", "phantom", "--version"]));
    assert!(String::from_utf8_lossy(&m.stdout).starts_with("phantom "));
    let tests = run(Command::new(bin.join("python"))
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .current_dir(root())
        .env("PATH", &path)
        .env("PHANTOM_NO_INSTALL", "1")
        .env_remove("PHANTOM_BIN"));
    let report = String::from_utf8_lossy(&tests.stdout);
    assert!(
        report.contains(" passed") && !report.contains("failed"),
        "{report}"
    );
}
