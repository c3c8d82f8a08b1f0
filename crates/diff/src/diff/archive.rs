//! Where a dump lives: a directory, a single file, or a `.zip` / `.tar.gz` / `.tgz` archive. Archives are unpacked
//! into a temporary directory first, under limits on the entry count and the unpacked size (counted while writing,
//! so a header that lies about sizes changes nothing); entries whose path would leave the directory (zip-slip:
//! absolute paths, `..`) and links are refused. Tensors are then read from disk one pair at a time.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Limits on what an archive may unpack to.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_entries: usize,
    pub max_unpacked: u64,
    /// The largest unpacked/packed ratio of a zip entry above 1 MiB (tensor data compresses 1–3×; deflate's
    /// ceiling, ~1000×, is what bombs use).
    pub max_ratio: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: 100_000,
            max_unpacked: 16 << 30,
            max_ratio: 200,
        }
    }
}

/// A dump opened for reading: its files on disk, relative names, and the temporary directory that holds an
/// unpacked archive (removed when dropped).
pub struct Opened {
    pub root: PathBuf,
    pub files: Vec<(String, PathBuf)>,
    _tmp: Option<tempfile::TempDir>,
}

fn limit(path: &Path, reason: impl Into<String>) -> Error {
    Error::Limit {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Whether `path` names an archive of tensor files (not a single-file format that happens to be a zip).
pub fn is_archive(path: &Path) -> bool {
    let name = path.to_string_lossy().to_lowercase();
    name.ends_with(".zip")
        || name.ends_with(".tar.gz")
        || name.ends_with(".tgz")
        || name.ends_with(".tar")
}

/// Opens `path` (a directory, an archive or one file).
pub fn open(path: &Path, limits: Limits) -> Result<Opened> {
    let meta = std::fs::metadata(path).map_err(|e| io(path, e))?;
    if meta.is_dir() {
        return Ok(Opened {
            root: path.to_path_buf(),
            files: walk(path)?,
            _tmp: None,
        });
    }
    if !is_archive(path) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(Opened {
            root: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            files: vec![(name, path.to_path_buf())],
            _tmp: None,
        });
    }
    let tmp = tempfile::tempdir()
        .map_err(|e| crate::error::temp_error(&format!("unpacking {}", path.display()), e))?;
    let lower = path.to_string_lossy().to_lowercase();
    if lower.ends_with(".zip") {
        unzip(path, tmp.path(), limits)?;
    } else {
        untar(path, tmp.path(), limits, !lower.ends_with(".tar"))?;
    }
    Ok(Opened {
        root: tmp.path().to_path_buf(),
        files: walk(tmp.path())?,
        _tmp: Some(tmp),
    })
}

/// Every regular file under `dir`, by path relative to it with `/` separators, sorted.
fn walk(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| io(&d, e))? {
            let e = e.map_err(|e| io(&d, e))?;
            let p = e.path();
            let ft = e.file_type().map_err(|e| io(&p, e))?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let rel = p.strip_prefix(dir).unwrap_or(&p);
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>();
                out.push((rel.join("/"), p));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The path inside `dest` an entry named `name` unpacks to, or `None` when it would leave `dest`.
fn safe_join(dest: &Path, name: &Path) -> Option<PathBuf> {
    let mut out = dest.to_path_buf();
    for c in name.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (out != dest).then_some(out)
}

/// Copies entry `name` of `archive` into a new file at `to`, within what is left of the unpacked budget.
fn copy_limited(
    archive: &Path,
    name: &Path,
    r: &mut impl Read,
    to: &Path,
    left: &mut u64,
) -> Result<()> {
    let entry_err = |e: std::io::Error| limit(archive, format!("entry `{}`: {e}", name.display()));
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(entry_err)?;
    }
    let mut f = std::fs::File::create(to).map_err(entry_err)?;
    let n = std::io::copy(&mut r.take(*left + 1), &mut f).map_err(entry_err)?;
    if n > *left {
        return Err(limit(
            archive,
            "unpacks to more than the allowed size (a decompression bomb?): refused; raise --max-unpacked if it is genuine",
        ));
    }
    *left -= n;
    f.flush().map_err(entry_err)
}

fn unzip(path: &Path, dest: &Path, limits: Limits) -> Result<()> {
    let f = std::fs::File::open(path).map_err(|e| io(path, e))?;
    let mut z = zip::ZipArchive::new(f)
        .map_err(|e| limit(path, format!("not a readable zip archive: {e}")))?;
    if z.len() > limits.max_entries {
        return Err(limit(
            path,
            format!(
                "{} entries, more than the {} allowed",
                z.len(),
                limits.max_entries
            ),
        ));
    }
    let mut left = limits.max_unpacked;
    for i in 0..z.len() {
        let mut e = z
            .by_index(i)
            .map_err(|e| limit(path, format!("entry {i}: {e}")))?;
        let name = PathBuf::from(e.name());
        if e.is_symlink() {
            return Err(limit(
                path,
                format!("entry `{}` is a link: refused", name.display()),
            ));
        }
        let to = safe_join(dest, &name).ok_or_else(|| {
            limit(
                path,
                format!(
                    "entry `{}` would unpack outside the archive's directory (zip-slip): refused",
                    name.display()
                ),
            )
        })?;
        if e.is_dir() {
            std::fs::create_dir_all(&to).map_err(|e| io(&to, e))?;
            continue;
        }
        if e.size() > 1 << 20 && e.size() / e.compressed_size().max(1) > limits.max_ratio {
            return Err(limit(
                path,
                format!(
                    "entry `{}` unpacks {}× (a decompression bomb?): refused",
                    name.display(),
                    e.size() / e.compressed_size().max(1)
                ),
            ));
        }
        copy_limited(path, &name, &mut e, &to, &mut left)?;
    }
    Ok(())
}

fn untar(path: &Path, dest: &Path, limits: Limits, gz: bool) -> Result<()> {
    let f = std::fs::File::open(path).map_err(|e| io(path, e))?;
    let reader: Box<dyn Read> = if gz {
        Box::new(flate2::read::GzDecoder::new(f))
    } else {
        Box::new(f)
    };
    let mut t = tar::Archive::new(reader);
    let mut left = limits.max_unpacked;
    let bad = |e: std::io::Error| limit(path, format!("not a readable tar archive: {e}"));
    for (count, e) in t.entries().map_err(bad)?.enumerate() {
        let mut e = e.map_err(bad)?;
        if count >= limits.max_entries {
            return Err(limit(
                path,
                format!("more than the {} entries allowed", limits.max_entries),
            ));
        }
        let name = e.path().map_err(bad)?.into_owned();
        let kind = e.header().entry_type();
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            return Err(limit(
                path,
                format!(
                    "entry `{}` is not a regular file (a link?): refused",
                    name.display()
                ),
            ));
        }
        let to = safe_join(dest, &name).ok_or_else(|| {
            limit(
                path,
                format!(
                    "entry `{}` would unpack outside the archive's directory: refused",
                    name.display()
                ),
            )
        })?;
        copy_limited(path, &name, &mut e, &to, &mut left)?;
    }
    Ok(())
}
