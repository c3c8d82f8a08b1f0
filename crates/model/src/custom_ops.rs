//! Custom-op libraries: shared libraries that register ops of their own domains with ONNX Runtime
//! (`--custom-op-library PATH`, ONNX Runtime's `register_custom_ops_library`). Every ONNX Runtime session phantom
//! makes registers them. A model whose nodes use a domain outside ONNX's and ONNX Runtime's is read only when such
//! a library may provide it: one given on the command line (ONNX Runtime then checks that it does), or, for
//! onnxruntime-extensions' domains (`ai.onnx.contrib`, `com.microsoft.extensions`: pre/post-processing and
//! tokenizers), the library of the `onnxruntime_extensions` Python package python3 imports, or else the pinned
//! version phantom installs into its cache with pip, as it does ONNX Runtime (off with `--no-install`). The
//! reference has kernels for few such ops (`BertTokenizer`): the others' values are taken from the target's run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use crate::error::{Error, Result};
use phantom_core::pip;

/// Domains onnxruntime-extensions registers.
pub const EXTENSIONS_DOMAINS: [&str; 2] = ["ai.onnx.contrib", "com.microsoft.extensions"];

/// A custom-op library and where it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Library {
    pub path: PathBuf,
    /// `--custom-op-library`, or `python package onnxruntime_extensions`.
    pub source: String,
    /// The Python runtime library the custom-op library needs loaded first (a Python extension module leaves
    /// Python's symbols to the process that loads it), when it is one.
    pub python: Option<PathBuf>,
}

static REQUESTED: Mutex<Vec<Library>> = Mutex::new(Vec::new());
/// onnxruntime-extensions' library, or why there is none.
static EXTENSIONS: OnceLock<std::result::Result<Library, String>> = OnceLock::new();

/// The onnxruntime-extensions phantom installs when python3 imports none (the version the tests' lock pairs with
/// the ONNX Runtime phantom installs).
pub const PINNED_EXTENSIONS: &str = "0.15.2";

/// Takes the `--custom-op-library` paths (each must be a file).
pub fn request(paths: &[PathBuf]) -> Result<()> {
    let mut libs = vec![];
    for p in paths {
        if !p.is_file() {
            return Err(Error::Usage(format!(
                "--custom-op-library {}: no such file (the shared library that registers the custom ops, e.g. \
                 `python -c \"import onnxruntime_extensions as e; print(e.get_library_path())\"`)",
                p.display()
            )));
        }
        libs.push(Library {
            path: p.clone(),
            source: "--custom-op-library".into(),
            python: python_module(p).then(libpython).flatten(),
        });
    }
    *REQUESTED.lock().unwrap_or_else(|e| e.into_inner()) = libs;
    Ok(())
}

/// The paths given with `--custom-op-library`, made absolute: what a plan records for its segment jobs.
pub fn requested() -> Vec<PathBuf> {
    let given = REQUESTED.lock().unwrap_or_else(|e| e.into_inner());
    (given.iter())
        .map(|l| std::fs::canonicalize(&l.path).unwrap_or_else(|_| l.path.clone()))
        .collect()
}

/// Registers the libraries `recorder` (a plan) recorded, unless this process was given its own with
/// `--custom-op-library` (a job on a machine that keeps them elsewhere). Each must be at its recorded path.
pub fn request_recorded(paths: &[PathBuf], recorder: &str) -> Result<()> {
    let mut given = REQUESTED.lock().unwrap_or_else(|e| e.into_inner());
    if !given.is_empty() {
        return Ok(());
    }
    for p in paths {
        if !p.is_file() {
            return Err(Error::Usage(format!(
                "{recorder} registers the custom-op library {}, which is not on this machine: install it at that \
                 path, or give its path here with --custom-op-library PATH",
                p.display()
            )));
        }
        given.push(Library {
            path: p.clone(),
            source: recorder.to_string(),
            python: python_module(p).then(libpython).flatten(),
        });
    }
    Ok(())
}

/// The libraries every ONNX Runtime session registers: those given, then onnxruntime-extensions' where a model
/// read in this process uses its domains.
pub fn libraries() -> Vec<Library> {
    let mut out = REQUESTED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(Ok(ext)) = EXTENSIONS.get() {
        if !out.iter().any(|l| l.path == ext.path) {
            out.push(ext.clone());
        }
    }
    out
}

/// Whether nodes of `domain` (not one of ONNX's or ONNX Runtime's) may run: `Err` says what to do when not.
pub fn covers(domain: &str) -> std::result::Result<(), String> {
    if EXTENSIONS_DOMAINS.contains(&domain) {
        return match extensions() {
            Ok(_) => Ok(()),
            Err(why) => Err(format!(
                "domain `{domain}` is onnxruntime-extensions' (pre/post-processing, tokenizers), which python3 \
                 cannot import and phantom did not install ({why}): `pip install onnxruntime-extensions`, or give \
                 its library with --custom-op-library PATH"
            )),
        };
    }
    match REQUESTED.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
        false => Ok(()),
        true => Err(format!(
            "domain `{domain}` is not one phantom or ONNX Runtime has kernels for: give the library that \
             registers its ops with --custom-op-library PATH"
        )),
    }
}

/// onnxruntime-extensions' library (asked of python3 once per process, else installed into phantom's cache); a
/// library given on the command line stands for it.
fn extensions() -> std::result::Result<Library, String> {
    let given = REQUESTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .first()
        .cloned();
    if let Some(given) = given {
        return Ok(given);
    }
    EXTENSIONS
        .get_or_init(|| probe_extensions().map_or_else(install_extensions, Ok))
        .clone()
}

const PY_EXTENSIONS: &str = "import onnxruntime_extensions as e, os, sysconfig
lib = os.path.join(sysconfig.get_config_var('LIBDIR') or '', sysconfig.get_config_var('LDLIBRARY') or '')
print(e.get_library_path()); print(lib if lib.endswith(('.so', '.dylib')) or '.so.' in lib else '')";

fn probe_extensions() -> Option<Library> {
    let out = Command::new("python3")
        .args(["-c", PY_EXTENSIONS])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().map(str::trim);
    let path = PathBuf::from(lines.next().filter(|l| !l.is_empty())?);
    let python = lines.next().filter(|l| !l.is_empty()).map(PathBuf::from);
    path.is_file().then(|| Library {
        python: python.filter(|p| p.is_file() && python_module(&path)),
        path,
        source: "python package onnxruntime_extensions".into(),
    })
}

/// onnxruntime-extensions from phantom's cache, installed there with pip (once) unless installs are off.
fn install_extensions() -> std::result::Result<Library, String> {
    let package = "onnxruntime-extensions";
    let path = match extensions_module(&pip::dir(package, PINNED_EXTENSIONS)) {
        Some(p) => p,
        None if pip::disabled(false) => return Err("automatic install is off".into()),
        None => pip::install(package, PINNED_EXTENSIONS, extensions_module)?,
    };
    let python = libpython().ok_or_else(|| {
        format!(
            "{} needs Python's shared runtime library, which python3 does not have",
            path.display()
        )
    })?;
    Ok(Library {
        path,
        source: format!(
            "phantom cache ({})",
            pip::dir(package, PINNED_EXTENSIONS).display()
        ),
        python: Some(python),
    })
}

/// The package's custom-op library in the install directory `dir`.
fn extensions_module(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir.join("onnxruntime_extensions")).ok()?;
    (entries.filter_map(|e| e.ok().map(|e| e.path()))).find(|p| {
        (p.file_name().and_then(|n| n.to_str()))
            .is_some_and(|n| n.starts_with("_extensions_pydll.") && !n.ends_with(".pyi"))
    })
}

/// A CPython extension module (`name.cpython-311-x86_64-linux-gnu.so`): it needs Python's runtime library loaded.
fn python_module(p: &Path) -> bool {
    (p.file_name().and_then(|n| n.to_str())).is_some_and(|n| n.contains(".cpython-"))
}

/// The shared runtime library of the python3 on the path.
fn libpython() -> Option<PathBuf> {
    let code = "import os, sysconfig
print(os.path.join(sysconfig.get_config_var('LIBDIR') or '', sysconfig.get_config_var('LDLIBRARY') or ''))";
    let out = Command::new("python3").args(["-c", code]).output().ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.is_file().then_some(p)
}
