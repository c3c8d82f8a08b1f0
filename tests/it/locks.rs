//! The Python environments the tests build, each from its lock (`tests/locks/NAME.txt`, made from `NAME.in` by
//! `scripts/lock.sh`): every package, transitive ones included, pinned to one version with its files' sha256, and
//! installed with `pip install --require-hashes`, so pip refuses a package the lock does not name. The lock decides
//! what a fresh machine installs, not the index on the day.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{pip_install, python_venv, root};

/// `tests/locks/NAME.txt`.
pub fn lock(name: &str) -> PathBuf {
    root().join("tests/locks").join(format!("{name}.txt"))
}

fn run(c: &mut Command) {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `dir` was made from the lock as it is now (its stamp holds the lock's text).
fn current(dir: &Path, name: &str) -> bool {
    let want = std::fs::read_to_string(lock(name)).expect("read the lock");
    std::fs::read_to_string(dir.join(".phantom-lock")).ok() == Some(want)
}

fn stamp(dir: &Path, name: &str) {
    std::fs::copy(lock(name), dir.join(".phantom-lock")).unwrap();
}

/// A virtual environment at `dir` holding exactly the lock `name` (made again when the lock changed; `pip check`
/// passes); returns its `bin/`.
pub fn venv(dir: &Path, name: &str) -> PathBuf {
    let bin = dir.join("bin");
    if current(dir, name) {
        return bin;
    }
    let _ = std::fs::remove_dir_all(dir);
    python_venv(dir);
    let python = bin.join("python");
    run(pip_install(&python)
        .arg("--require-hashes")
        .arg("-r")
        .arg(lock(name)));
    run(Command::new(&python).args(["-m", "pip", "check"]));
    stamp(dir, name);
    bin
}

/// The lock `name` installed with `pip install --target dir` by `python` (for a library loaded from a folder, or
/// added to `PYTHONPATH`; a `NAME-nodeps` lock with `--no-deps`); made again when the lock changed.
pub fn target(python: &str, dir: &Path, name: &str) {
    if current(dir, name) {
        return;
    }
    let _ = std::fs::remove_dir_all(dir);
    // A `-nodeps` lock names packages whose declared dependencies are not what the tests use.
    let no_deps = name.ends_with("-nodeps").then_some("--no-deps");
    run(pip_install(python)
        .arg("--require-hashes")
        .args(no_deps)
        .arg("--target")
        .arg(dir)
        .arg("-r")
        .arg(lock(name)));
    stamp(dir, name);
}

/// The wheel `whl` built here installed into the environment whose `bin/` is `bin`, without its dependencies: they
/// are the lock's, and `pip check` says whether they satisfy it.
pub fn wheel_alone(bin: &Path, whl: &Path) {
    let python = bin.join("python");
    run(pip_install(&python)
        .args(["--force-reinstall", "--no-deps"])
        .arg(whl));
    run(Command::new(&python).args(["-m", "pip", "check"]));
}

/// The requirement lines of a lock: `name==version` for each package.
fn pins(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with([' ', '#']) && !l.trim().is_empty())
        .map(|l| l.trim_end_matches(['\\', ' ']))
        .collect()
}

/// Every lock has its `.in`, pins every package to one version and gives each at least one hash; every `.in` has its
/// lock.
#[test]
fn every_lock_pins_every_package_with_hashes() {
    let dir = root().join("tests/locks");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    let ins: Vec<_> = names.iter().filter_map(|n| n.strip_suffix(".in")).collect();
    let txts: Vec<_> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".txt"))
        .collect();
    assert_eq!(
        ins, txts,
        "each tests/locks/NAME.in has its NAME.txt (scripts/lock.sh)"
    );
    assert!(ins.len() >= 4, "{ins:?}");
    for n in txts {
        let text = std::fs::read_to_string(lock(n)).unwrap();
        let pins = pins(&text);
        assert!(!pins.is_empty(), "{n}.txt pins nothing");
        for p in &pins {
            let (pkg, version) = p
                .split_once("==")
                .unwrap_or_else(|| panic!("{n}.txt: `{p}` is not name==version"));
            assert!(
                !pkg.is_empty() && !version.contains(['<', '>', '*', ',']),
                "{n}.txt: `{p}`"
            );
        }
        let lines: Vec<_> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if !l.starts_with([' ', '#']) && !l.trim().is_empty() {
                let hashed = lines
                    .get(i + 1)
                    .is_some_and(|h| h.trim_start().starts_with("--hash=sha256:"));
                assert!(hashed, "{n}.txt: `{l}` has no hash");
            }
        }
    }
}

/// Nothing in the tests installs from the index but through a lock: `pip install` appears only here and in the
/// shared command builder.
#[test]
fn the_tests_install_only_through_their_locks() {
    for e in std::fs::read_dir(root().join("tests/it")).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".rs") || name == "locks.rs" || name == "common.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("pip_install(") && !text.contains("\"install\""),
            "tests/it/{name} installs Python packages outside tests/it/locks.rs"
        );
    }
}

/// pip refuses a lock that leaves out a dependency: pytest alone, without the packages it needs, is not installed.
#[test]
fn pip_refuses_a_package_the_lock_does_not_name() {
    let text = std::fs::read_to_string(lock("python-api")).unwrap();
    let start = text.find("\npytest==").expect("python-api pins pytest") + 1;
    let block: String = text[start..]
        .lines()
        .take_while(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let work = root().join("target/locks-test");
    std::fs::create_dir_all(&work).unwrap();
    let partial = work.join("pytest-alone.txt");
    std::fs::write(&partial, block + "\n").unwrap();
    let out = pip_install("python3")
        .args(["--dry-run", "--require-hashes", "--target"])
        .arg(work.join("site"))
        .arg("-r")
        .arg(&partial)
        .output()
        .expect("start python3 -m pip");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "pip installed pytest without its dependencies"
    );
    assert!(
        err.contains("--require-hashes") && err.contains("iniconfig"),
        "{err}"
    );
}
