//! The comparison pipeline every command runs, on the targets of `phantom-runner`. [`bounded`] runs a target chunk
//! by chunk; [`equiv`] pairs the values of two models by what they hold. [`pipeline`] is the `phantom onnx`
//! comparison as stages:
//!
//! ```text
//! prepare ─► capture ─► expected noise ─► stream-compare ─► attribute ─► explain ─► assemble
//! ```
//!
//! The modules keep the paths the rest of phantom uses (`phantom::pipeline`, `phantom::equiv`...).

// The layers below, under the names the code uses.
pub(crate) use phantom_analysis::{analysis, compare, pairing, report};
pub(crate) use phantom_core::{error, fsutil, spill, tensor, units, watchdog};
pub(crate) use phantom_model as model;
pub(crate) use phantom_runner as runner;
pub(crate) use phantom_runner::targets;

pub mod bounded;
pub mod equiv;
pub mod pipeline;
