//! Pinned Python packages phantom installs for itself when none is found (ONNX Runtime, onnxruntime-extensions):
//! once, with `python3 -m pip install --no-deps --target`, into a directory of phantom's cache named after the
//! package and its version. The install fills a staging directory first and renames it into place, so two phantom
//! processes installing at once leave one whole copy. `--no-install` or `PHANTOM_NO_INSTALL=1` turns it off.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `--no-install`: nothing is installed in this process.
static FORBIDDEN: AtomicBool = AtomicBool::new(false);

/// Forbids every install in this process (`--no-install`).
pub fn forbid() {
    FORBIDDEN.store(true, Ordering::Relaxed);
}

/// True when the user opted out of installs: `--no-install` (`flag`, or [`forbid`] earlier) or
/// `PHANTOM_NO_INSTALL`.
pub fn disabled(flag: bool) -> bool {
    flag || FORBIDDEN.load(Ordering::Relaxed)
        || std::env::var("PHANTOM_NO_INSTALL").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The directory where phantom keeps what it installs: `PHANTOM_CACHE_DIR`, else `$XDG_CACHE_HOME/phantom`, else
/// `~/.cache/phantom`.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("PHANTOM_CACHE_DIR") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("phantom")
}

/// The cache directory of `package` at `version`.
pub fn dir(package: &str, version: &str) -> PathBuf {
    cache_dir().join(format!("{package}-{version}"))
}

/// `package==version` installed into [`dir`] unless `found` already finds what is needed there; returns what
/// `found` finds after the install. `Err` says why, in words a hint can follow.
pub fn install(
    package: &str,
    version: &str,
    found: impl Fn(&Path) -> Option<PathBuf>,
) -> std::result::Result<PathBuf, String> {
    let dir = dir(package, version);
    if let Some(p) = found(&dir) {
        return Ok(p);
    }
    let staging = cache_dir().join(format!(".staging-{package}-{}", std::process::id()));
    eprintln!(
        "phantom: installing {package}=={version} with pip into {} (once; --no-install or PHANTOM_NO_INSTALL=1 \
         turns this off)",
        dir.display()
    );
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "--target",
        ])
        .arg(&staging)
        .arg(format!("{package}=={version}"))
        .status()
        .map_err(|e| format!("could not run python3 -m pip ({e})"))?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(format!(
            "pip install {package}=={version} failed ({status})"
        ));
    }
    if found(&dir).is_some() {
        // Another phantom process finished the same install first.
        let _ = std::fs::remove_dir_all(&staging);
    } else {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&staging, &dir).map_err(|e| {
            format!(
                "cannot move what pip installed to {}: {e} (set PHANTOM_CACHE_DIR to a writable directory)",
                dir.display()
            )
        })?;
    }
    found(&dir).ok_or_else(|| {
        format!(
            "pip installed {package} into {} but what phantom needs is not there",
            dir.display()
        )
    })
}
