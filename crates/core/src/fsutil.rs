//! Writing result directories atomically: fill a hidden sibling, then rename it into place, so a failed run never
//! leaves half a directory and an existing one is replaced only when asked.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Writes files into a directory being built, adding up their sizes.
pub struct DirWriter {
    root: PathBuf,
    /// The directory the user named, which errors name (not the hidden one being filled).
    shown: PathBuf,
    pub bytes: u64,
}

impl DirWriter {
    /// Writes `rel` (a path inside the directory; parents are created).
    pub fn write(&mut self, rel: &str, bytes: &[u8]) -> Result<()> {
        let p = self.root.join(rel);
        let shown = self.shown.join(rel);
        if let Some(parent) = p.parent() {
            let shown_parent = shown.parent().unwrap_or(&self.shown);
            std::fs::create_dir_all(parent).map_err(|e| write_error(shown_parent, e))?;
        }
        std::fs::write(&p, bytes).map_err(|e| write_error(&shown, e))?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }
}

/// Builds `dir` with `fill` and renames it into place; refuses an existing `dir` unless `force`, saying `what`
/// it is. Returns the bytes written.
pub fn write_dir_atomically(
    dir: &Path,
    force: bool,
    what: &str,
    fill: impl FnOnce(&mut DirWriter) -> Result<()>,
) -> Result<u64> {
    if dir.exists() && !force {
        return Err(Error::Usage(format!(
            "{} already exists and phantom never overwrites {what}: pass --force to replace it",
            dir.display()
        )));
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = parent.join(format!(".{name}.tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| write_error(dir, e))?;
    let mut w = DirWriter {
        root: tmp.clone(),
        shown: dir.to_path_buf(),
        bytes: 0,
    };
    let placed = fill(&mut w).and_then(|_| replace_dir(&tmp, dir));
    if placed.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    placed.map(|_| w.bytes)
}

/// Moves the finished `tmp` directory to `dir`, removing an existing `dir` first.
pub fn replace_dir(tmp: &Path, dir: &Path) -> Result<()> {
    if dir.is_dir() {
        std::fs::remove_dir_all(dir).map_err(|e| write_error(dir, e))?;
    } else if dir.exists() {
        std::fs::remove_file(dir).map_err(|e| write_error(dir, e))?;
    }
    std::fs::rename(tmp, dir).map_err(|e| write_error(dir, e))
}

/// A failed write, naming the path the user gave.
pub fn write_error(path: &Path, e: std::io::Error) -> Error {
    Error::Write {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// The memory phantom plans with: `PHANTOM_MEMORY_BUDGET` (a size such as `4GiB`) when set, else half of the
/// machine's physical memory (Linux `/proc/meminfo`, else 8 GiB) or half of the process's own limit where one is
/// lower ([`process_limit`]).
pub fn memory_budget() -> usize {
    if let Some(b) = budget_override() {
        return b;
    }
    let machine = machine_memory() / 2;
    process_limit().map_or(machine, |l| machine.min(l / 2))
}

/// Share of the machine's memory a run's values may take before `phantom onnx` exposes them chunk by chunk.
pub const VALUES_SHARE: usize = 32;

/// The memory a run's values may take before `phantom onnx` exposes them chunk by chunk on ONNX Runtime:
/// `PHANTOM_VALUES_BUDGET`, else `PHANTOM_MEMORY_BUDGET`, when set; else 1/[`VALUES_SHARE`] of the machine's
/// memory, at least 256 MiB, within [`memory_budget`]. Chunks there run each node once and keep values on disk (on
/// the benchmark's models 30–65% more time than a whole run, 31–78% less memory).
pub fn values_budget() -> usize {
    let own = std::env::var("PHANTOM_VALUES_BUDGET")
        .ok()
        .and_then(|v| crate::units::parse_size(&v));
    if let Some(b) = own.or_else(budget_override) {
        return b;
    }
    (machine_memory() / VALUES_SHARE)
        .max(256 << 20)
        .min(memory_budget())
}

fn budget_override() -> Option<usize> {
    std::env::var("PHANTOM_MEMORY_BUDGET")
        .ok()
        .and_then(|v| crate::units::parse_size(&v))
}

/// The machine's physical memory (Linux `/proc/meminfo`, else 16 GiB).
pub fn machine_memory() -> usize {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<usize>().ok())
    });
    total_kib.map_or(16 << 30, |k| k.saturating_mul(1024))
}

/// The memory this process may take, where a limit is set: the address-space limit (`ulimit -v`) or the cgroup's
/// `memory.max` (containers, Slurm, Kubernetes), whichever is lower.
pub fn process_limit() -> Option<usize> {
    let address_space = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max address space"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|v| v.parse::<usize>().ok())
        });
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok());
    match (address_space, cgroup) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// The most bytes the model's inputs may take together, held as f64 while they are made: a quarter of
/// [`memory_budget`] (the reference, the target and the comparison need the rest).
pub fn input_budget() -> usize {
    memory_budget() / 4
}

/// Writes a requested output: `-` is standard output, any other path is written as [`write_atomic`] writes it.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<()> {
    if path.as_os_str() != "-" {
        return write_atomic(path, bytes);
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .map_err(|e| Error::Write {
            path: path.to_path_buf(),
            reason: format!("standard output: {e}"),
        })
}

/// Writes `bytes` to `path` through a temporary sibling and a rename; on any failure the temporary file is
/// removed and the error names `path` (never the temporary).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let fail = |reason: String| Error::Write {
        path: path.to_path_buf(),
        reason,
    };
    if path.is_dir() {
        return Err(fail("it is a directory; give a file name".into()));
    }
    if path.symlink_metadata().is_ok() && !path.exists() {
        return Err(fail(
            "it is a symbolic link to nothing; remove it or give another name".into(),
        ));
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("out"),
        std::process::id()
    ));
    let written = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e.to_string())
    })
}
