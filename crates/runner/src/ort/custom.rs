//! The custom-op libraries ([`crate::model::custom_ops`]) registered with a session being built: a library that is
//! a Python extension module gets Python's runtime library loaded first, with its symbols global, as the Python
//! process that usually loads it would have them.

use ort::session::builder::SessionBuilder;

use crate::error::{Error, Result};
use crate::model::custom_ops;

/// `b` with every custom-op library registered; the error names the library and what to do.
pub(super) fn register(mut b: SessionBuilder) -> Result<SessionBuilder> {
    for lib in custom_ops::libraries() {
        let fail = |why: String| Error::Ort {
            reason: format!(
                "the custom-op library {} ({}) could not be registered: {why}",
                lib.path.display(),
                lib.source
            ),
        };
        if let Some(py) = &lib.python {
            crate::cuda_libs::load_global(py)
                .map_err(|e| fail(format!("Python's library {}: {e}", py.display())))?;
        }
        b = b
            .with_operator_library(&lib.path)
            .map_err(|e| fail(e.to_string()))?;
    }
    Ok(b)
}
