//! Finding the ONNX Runtime shared library: `--ort-lib`, `ORT_DYLIB_PATH`, the Python `onnxruntime*`
//! packages, `node_modules/onnxruntime-node`, the system loader, and finally a one-time
//! `pip install --target <cache>` of a pinned version (opt out with `--no-install` or `PHANTOM_NO_INSTALL=1`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use phantom_core::pip;

/// The ONNX Runtime version phantom installs when none is found.
pub const PINNED_ORT: &str = "1.31.1";

/// How the library was found, for the report and `phantom runtimes`.
#[derive(Clone, Debug)]
pub struct Located {
    pub path: PathBuf,
    /// `--ort-lib`, `ORT_DYLIB_PATH`, `python onnxruntime-gpu`, `cache (pip)`...
    pub source: String,
}

fn lib_in(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            (n.starts_with("libonnxruntime.so")
                || n == "libonnxruntime.dylib"
                || n == "onnxruntime.dll")
                && !n.contains("providers")
        })
        .collect();
    // Prefer the fully versioned file name (the real file, not a link).
    found.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    found.into_iter().next()
}

/// The directory where phantom keeps its own ONNX Runtime.
pub fn cache_dir() -> PathBuf {
    pip::cache_dir()
}

fn pinned_dir() -> PathBuf {
    pip::dir("onnxruntime", PINNED_ORT)
}

const PY_PROBE: &str = "import importlib.util,os\nfor m in ('onnxruntime',):\n s=importlib.util.find_spec(m)\n if s and s.origin: print(os.path.dirname(s.origin))";

/// The Python probe started ahead by [`probe_ahead`], waiting to be joined.
static AHEAD: std::sync::Mutex<Option<std::thread::JoinHandle<Option<PathBuf>>>> =
    std::sync::Mutex::new(None);

/// Starts asking Python where its `onnxruntime` package is, on a thread of its own, so that the answer (about
/// 0.1 s: Python starts, often behind a version manager's shim) is ready by the time the library is looked for;
/// the search order does not change. Nothing starts when `--ort-lib` or `ORT_DYLIB_PATH` decides before Python.
pub fn probe_ahead(explicit: Option<&Path>) {
    let decided =
        explicit.is_some() || std::env::var_os("ORT_DYLIB_PATH").is_some_and(|p| !p.is_empty());
    if decided {
        return;
    }
    if let Ok(mut ahead) = AHEAD.lock() {
        if ahead.is_none() {
            *ahead = std::thread::Builder::new()
                .name("ort-probe".into())
                .spawn(probe_python)
                .ok();
        }
    }
}

/// The Python package's library: the answer of the probe started ahead when there is one, else asked now.
fn python_probe() -> Option<PathBuf> {
    let ahead = AHEAD.lock().ok().and_then(|mut a| a.take());
    match ahead {
        Some(h) => h.join().ok().flatten(),
        None => probe_python(),
    }
}

fn probe_python() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", PY_PROBE])
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if dir.is_empty() {
        return None;
    }
    lib_in(&Path::new(&dir).join("capi"))
}

fn node_probe() -> Option<PathBuf> {
    let mut dir = std::env::current_dir().ok()?;
    loop {
        let cand = dir.join("node_modules/onnxruntime-node/bin/napi-v6/linux/x64");
        if let Some(p) = lib_in(&cand) {
            return Some(p);
        }
        if !dir.pop() {
            return None;
        }
    }
}

fn system_probe() -> Option<PathBuf> {
    [
        "/usr/local/lib",
        "/usr/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/opt/onnxruntime/lib",
    ]
    .iter()
    .find_map(|d| lib_in(Path::new(d)))
}

/// Finds the library without installing anything.
pub fn find(explicit: Option<&Path>) -> Option<Located> {
    if let Some(p) = explicit {
        return Some(Located {
            path: p.to_path_buf(),
            source: "--ort-lib".into(),
        });
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return Some(Located {
            path: PathBuf::from(p),
            source: "ORT_DYLIB_PATH".into(),
        });
    }
    if let Some(p) = python_probe() {
        return Some(Located {
            path: p,
            source: "python package onnxruntime".into(),
        });
    }
    if let Some(p) = node_probe() {
        return Some(Located {
            path: p,
            source: "node_modules/onnxruntime-node".into(),
        });
    }
    if let Some(p) = lib_in(&pinned_dir().join("onnxruntime/capi")) {
        return Some(Located {
            path: p,
            source: format!("phantom cache ({})", pinned_dir().display()),
        });
    }
    system_probe().map(|p| Located {
        path: p,
        source: "system library".into(),
    })
}

/// Finds the library, installing the pinned version with pip into the cache when allowed.
pub fn locate(explicit: Option<&Path>, no_install: bool) -> Result<Located> {
    if let Some(found) = find(explicit) {
        if !found.path.exists() {
            return Err(Error::RuntimeMissing {
                reason: format!(
                    "{} points to {}, which does not exist",
                    found.source,
                    found.path.display()
                ),
            });
        }
        return Ok(found);
    }
    if pip::disabled(no_install) {
        return Err(Error::RuntimeMissing {
            reason: "no libonnxruntime found (searched --ort-lib, ORT_DYLIB_PATH, python onnxruntime packages, \
                     node_modules/onnxruntime-node, the phantom cache, system library dirs) and automatic install is \
                     off.\n  hint: `pip install onnxruntime`, or set ORT_DYLIB_PATH=/path/to/libonnxruntime.so, or \
                     drop --no-install / PHANTOM_NO_INSTALL"
                .into(),
        });
    }
    install()
}

/// `python3 -m pip install --no-deps --target <cache> onnxruntime==PINNED`.
pub fn install() -> Result<Located> {
    eprintln!("phantom: no ONNX Runtime found");
    let path = pip::install("onnxruntime", PINNED_ORT, |d| lib_in(&d.join("onnxruntime/capi")))
        .map_err(|why| Error::RuntimeMissing {
            reason: format!("{why}.\n  hint: install python3 and pip, or set ORT_DYLIB_PATH to an existing libonnxruntime"),
        })?;
    Ok(Located {
        path,
        source: format!("phantom cache ({}, installed now)", pinned_dir().display()),
    })
}
