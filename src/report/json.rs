//! JSON rendering of the report, and the JSON Schema generated from the report types.

use std::path::Path;

use super::Report;
use crate::error::{Error, Result};

/// The report as pretty JSON. Non-finite floats (never expected) would become `null`.
pub fn to_string(report: &Report) -> String {
    serde_json::to_string_pretty(report).expect("the report serializes")
}

/// Writes the report atomically (temp file + rename), so a failed run never leaves half a file.
pub fn write(report: &Report, path: &Path) -> Result<()> {
    write_atomic(path, to_string(report).as_bytes())
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

/// JSON Schema of [`Report`] (checked in as `schema/report.schema.json`).
pub fn schema() -> String {
    let s = schemars::schema_for!(Report);
    serde_json::to_string_pretty(&s).expect("schema serializes") + "\n"
}

/// JSON Schema of the several-targets report (checked in as `schema/multi-report.schema.json`).
pub fn multi_schema() -> String {
    let s = schemars::schema_for!(super::multi::MultiReport);
    serde_json::to_string_pretty(&s).expect("schema serializes") + "\n"
}
