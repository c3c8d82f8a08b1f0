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
    #[error("{path}: {reason}")]
    Limit { path: PathBuf, reason: String },
    #[error("cannot write {path}: {reason}")]
    Write { path: PathBuf, reason: String },
    #[error("{stage} failed unexpectedly {at}: {reason}\n  hint: the model is probably invalid there (phantom's checks missed it); please report it with the model", at = panic_site(.node))]
    Panic {
        stage: String,
        /// The node being evaluated, when one had started.
        node: Option<String>,
        reason: String,
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
    Ort { reason: String },
    #[error("the wgpu target failed: {reason}")]
    Wgpu { reason: String },
    #[error("{0}")]
    Usage(String),
}

/// An error when `stage` is named in `PHANTOM_INJECT_FAILURE` (see `pipeline::degrade`: tests make optional
/// stages fail with it).
pub fn injected(stage: &str) -> Result<()> {
    let asked = std::env::var("PHANTOM_INJECT_FAILURE").unwrap_or_default();
    match asked.split(',').any(|s| s.trim() == stage) {
        true => Err(Error::Usage(format!(
            "{stage}: failure injected by PHANTOM_INJECT_FAILURE"
        ))),
        false => Ok(()),
    }
}

/// The error for a temporary file or directory that could not be made (`what`: what it was for).
pub fn temp_error(what: &str, e: std::io::Error) -> Error {
    Error::Write {
        path: std::env::temp_dir(),
        reason: format!(
            "cannot create a temporary file there for {what}: {e}\n  hint: set TMPDIR to a writable directory with room"
        ),
    }
}

/// Shorthand used throughout the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

thread_local! {
    /// The node an engine is evaluating on this thread, for [`guard`]'s message.
    static CURRENT_NODE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Records the node an engine starts evaluating (named in the error if it panics).
pub fn at_node(name: &str) {
    crate::watchdog::node(name);
    CURRENT_NODE.with(|c| {
        let mut c = c.borrow_mut();
        c.clear();
        c.push_str(name);
    });
}

fn panic_site(node: &Option<String>) -> String {
    match node {
        Some(n) => format!("at node `{n}`"),
        None => "before any node (while loading or typing the model)".into(),
    }
}

/// Runs `f`, turning a panic inside it (an engine meeting input it does not check) into [`Error::Panic`] naming
/// `stage` and the node being evaluated ("before any node" when none had started).
pub fn guard<T>(stage: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    crate::watchdog::engine(stage);
    at_node("");
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let node = Some(CURRENT_NODE.with(|c| c.borrow().clone())).filter(|n| !n.is_empty());
        let reason = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Err(Error::Panic {
            stage: stage.into(),
            node,
            reason,
        })
    })
}

/// Reads a whole file, naming the path on failure.
pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a regular file of at most `limit` bytes (`what` it is, for the message): special files such as
/// `/dev/zero`, FIFOs and files larger than the limit are refused before anything is allocated.
pub fn read_bounded(path: &std::path::Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let limit_error = |reason: String| Error::Limit {
        path: path.to_path_buf(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(limit_error(format!(
            "not a regular file; phantom reads a {what} only from a regular file"
        )));
    }
    if meta.len() > limit {
        return Err(limit_error(format!(
            "{} is larger than phantom reads for a {what} ({})",
            crate::units::fmt_size(meta.len() as usize),
            crate::units::fmt_size(limit as usize)
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)
        .map_err(io)?
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(limit_error(format!(
            "grew beyond {limit} bytes while being read"
        )));
    }
    Ok(bytes)
}
