//! Writing result directories atomically: fill a hidden sibling, then rename it into place, so a failed run never
//! leaves half a directory and an existing one is replaced only when asked.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Writes files into a directory being built, adding up their sizes.
pub struct DirWriter {
    root: PathBuf,
    pub bytes: u64,
}

impl DirWriter {
    /// Writes `rel` (a path inside the directory; parents are created).
    pub fn write(&mut self, rel: &str, bytes: &[u8]) -> Result<()> {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&p, bytes).map_err(|source| Error::Io {
            path: p.clone(),
            source,
        })?;
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
    std::fs::create_dir_all(&tmp).map_err(|source| Error::Io {
        path: tmp.clone(),
        source,
    })?;
    let mut w = DirWriter {
        root: tmp.clone(),
        bytes: 0,
    };
    if let Err(e) = fill(&mut w) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    std::fs::rename(&tmp, dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(w.bytes)
}

/// Parses `2GiB`, `512MiB`, `1.5G`, `800M`, `4096` (bytes).
pub fn parse_size(s: &str) -> Option<usize> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.trim().parse().ok()?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    (n > 0.0).then_some((n * mult) as usize)
}

/// `2.0 GiB`, `512 MiB`, `64 KiB`.
pub fn fmt_size(b: usize) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1 << 20) as f64 {
        format!("{:.0} MiB", b / (1 << 20) as f64)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    }
}
