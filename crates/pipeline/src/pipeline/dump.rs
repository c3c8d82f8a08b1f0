//! `--dump DIR`: every compared value of both sides as `.npy`, so a run can be diffed by other tools (or by a
//! later `phantom diff`). The reference's values are written in f64 under `reference/`, each target's in the element
//! type it produced under a directory named by its label (`ort-cpu/`, `wgpu/`); names are made file-safe (anything
//! but letters, digits, `.`, `-` and `_` becomes `_`, with a numeric suffix on collisions), and `index.json` maps
//! every ONNX value name to its files, shape and element types. The directory is built beside its final place and
//! renamed into it at the end, so a failed run leaves nothing; an existing directory is replaced only with
//! `--force`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fsutil::{replace_dir, write_error};
use crate::tensor::Tensor;

/// One value's files.
#[derive(Serialize)]
struct Entry {
    name: String,
    shape: Vec<usize>,
    /// `reference/<file>.npy` (f64), or null when the reference has no value (`reason` says why).
    reference: Option<String>,
    /// `(target label, file or null)` per target.
    targets: Vec<(String, Option<String>)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// The dump being written.
pub struct Dump {
    dir: PathBuf,
    tmp: PathBuf,
    entries: Vec<Entry>,
    used: HashSet<String>,
    error: Option<Error>,
    done: bool,
}

impl Dump {
    /// Starts a dump into `dir` (refused when it exists, unless `force`).
    pub fn create(dir: &Path, force: bool) -> Result<Dump> {
        if dir.exists() && !force {
            return Err(Error::Usage(format!(
                "--dump {}: already exists and phantom never overwrites it: pass --force to replace it",
                dir.display()
            )));
        }
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("dump");
        let tmp = parent.join(format!(".{name}.tmp{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join("reference")).map_err(|e| write_error(dir, e))?;
        Ok(Dump {
            dir: dir.to_path_buf(),
            tmp,
            entries: vec![],
            used: HashSet::new(),
            error: None,
            done: false,
        })
    }

    /// Writes one value: the reference's (or why it has none) and each target's (`None` where it has none).
    pub fn value(
        &mut self,
        name: &str,
        reference: &std::result::Result<Tensor, String>,
        targets: &[(String, Option<&Tensor>)],
    ) {
        if self.error.is_some() {
            return;
        }
        let file = self.file_name(name);
        let mut entry = Entry {
            name: name.to_string(),
            shape: vec![],
            reference: None,
            targets: vec![],
            reason: None,
        };
        match reference {
            Ok(t) => {
                entry.shape = t.shape().to_vec();
                entry.reference = self.write("reference", &file, t);
            }
            Err(why) => entry.reason = Some(why.clone()),
        }
        for (label, t) in targets {
            let written = t.and_then(|t| self.write(&safe(label), &file, t));
            entry.targets.push((label.clone(), written));
        }
        self.entries.push(entry);
    }

    /// Writes `index.json` and puts the directory in place.
    pub fn finish(mut self) -> Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let index = serde_json::json!({ "schema": "phantom-dump/1", "values": self.entries });
        let bytes = serde_json::to_vec_pretty(&index).expect("the index serializes");
        std::fs::write(self.tmp.join("index.json"), bytes)
            .map_err(|e| write_error(&self.dir, e))?;
        replace_dir(&self.tmp, &self.dir)?;
        self.done = true;
        Ok(())
    }

    /// `sub/<file>.npy`, relative to the dump, or `None` after recording the first write error.
    fn write(&mut self, sub: &str, file: &str, t: &Tensor) -> Option<String> {
        let rel = format!("{sub}/{file}.npy");
        let path = self.tmp.join(&rel);
        let written = std::fs::create_dir_all(self.tmp.join(sub))
            .map_err(|e| write_error(&self.dir, e))
            .and_then(|_| {
                // Named in the dump the user asked for, not the hidden directory being filled.
                crate::model::npy::write_npy(&path, t).map_err(|e| match e {
                    crate::error::Error::Write { reason, .. } => crate::error::Error::Write {
                        path: self.dir.join(&rel),
                        reason,
                    },
                    e => e,
                })
            });
        match written {
            Ok(()) => Some(rel),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    /// A file-safe, unique name for value `name`.
    fn file_name(&mut self, name: &str) -> String {
        let base = match safe(name) {
            s if s.is_empty() => "value".to_string(),
            s => s,
        };
        let mut candidate = base.clone();
        let mut k = 1;
        while !self.used.insert(candidate.to_ascii_lowercase()) {
            candidate = format!("{base}_{k}");
            k += 1;
        }
        candidate
    }
}

impl Drop for Dump {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Letters, digits, `.`, `-`, `_` kept, anything else `_` (no leading dot).
fn safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.trim_start_matches('.').chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_safe_and_unique() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = Dump::create(&dir.path().join("d"), false).unwrap();
        assert_eq!(
            d.file_name("/encoder/layer.0/MatMul_output_0"),
            "_encoder_layer.0_MatMul_output_0"
        );
        assert_eq!(d.file_name("a:b"), "a_b");
        assert_eq!(d.file_name("a/b"), "a_b_1");
        assert_eq!(d.file_name("..hidden"), "hidden");
        assert_eq!(d.file_name("///"), "___");
        assert_eq!(d.file_name(""), "value");
    }
}
