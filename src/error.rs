//! The library's one error type. Every variant names the file, node or runtime involved and, where there is
//! one, the next step to take; `cli` adds context with `anyhow` and maps any error to exit code 2.

use std::path::PathBuf;

/// Errors phantom's library reports. Display text is meant for the person at the terminal.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid ONNX model: {reason}\n  hint: check that the file is complete (not truncated or a Git LFS pointer) and was saved with onnx.save")]
    MalformedModel { path: PathBuf, reason: String },
    #[error("invalid input {name}: {reason}")]
    Input { name: String, reason: String },
    #[error("the f64 reference (tract) cannot run this model: {reason}")]
    Reference { reason: String },
    #[error("ONNX Runtime not available: {reason}")]
    RuntimeMissing { reason: String },
    #[error("ONNX Runtime failed: {reason}")]
    Target { reason: String },
    #[error("the wgpu target failed: {reason}")]
    Wgpu { reason: String },
    #[error("{0}")]
    Usage(String),
}

/// Shorthand used throughout the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reads a whole file, naming the path on failure.
pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}
