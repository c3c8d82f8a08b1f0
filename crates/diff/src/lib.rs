//! `phantom diff`: tensor dumps from any framework (NumPy, PyTorch, safetensors, archives, phantom's own runs) paired
//! by name and compared, with its reports and the inspector it serves. It reads the comparison and the report
//! writers below it and no engine: a diff runs no model. The module keeps the path the rest of phantom uses
//! (`phantom::diff`).

// The layers below, under the names the code uses.
pub(crate) use phantom_analysis::compare;
pub(crate) use phantom_core::{error, tensor, units};
pub(crate) use phantom_model as model;
pub(crate) use phantom_report::report;

pub mod diff;
