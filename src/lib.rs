//! phantom tells where and why an ONNX model's numbers diverge between runtimes.
//!
//! ```text
//! model::load ──► Graph (nodes in topological order, values by ONNX name)
//!     │            model::inputs::prepare ──► Inputs (seeded, or .npy/.npz/test_data_set)
//!     ├──► runner::reference (tract, typed, f32→f64, own f64 kernels) ──► RunOutput
//!     ├──► runner::ort (ONNX Runtime, every value exposed, plain run too) ──► RunOutput
//!     ▼
//! analysis::compare_runs (compare::metrics per value) ──► NodeReport[] ──► verdict, coverage
//!     ▼
//! report::Report ──► terminal / JSON
//! ```

pub mod analysis;
pub mod bisect;
pub mod bounded;
pub mod cli;
pub mod compare;
pub mod error;
pub mod fsutil;
pub mod golden;
pub mod model;
pub mod pipeline;
pub mod precision;
pub mod replay;
pub mod report;
pub mod runner;
pub mod target;
pub mod tensor;

pub use error::{Error, Result};
