//! JSON rendering of the report, and the JSON Schema generated from the report types.

use std::path::Path;

use super::Report;
use crate::error::Result;

/// The report as pretty JSON. Non-finite floats (never expected) would become `null`.
pub fn to_string(report: &Report) -> String {
    serde_json::to_string_pretty(report).expect("the report serializes")
}

/// Writes the report atomically (temp file + rename), so a failed run never leaves half a file.
pub fn write(report: &Report, path: &Path) -> Result<()> {
    write_atomic(path, to_string(report).as_bytes())
}

pub use crate::fsutil::write_atomic;

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
