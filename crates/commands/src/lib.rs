//! The commands built on the pipeline, each a module: [`golden`] records and checks golden outputs, [`scan`] reads
//! the reference alone for fragile nodes, [`profile`] reads ONNX Runtime's profiler per node, [`reduce`] cuts a
//! culprit out as a repro bundle, [`bisect`] finds the first node that drifts by cutting, [`replay`] reruns a saved
//! run, [`segment`] splits a model too big for one machine into segments a scheduler runs, and [`advisor`] keeps the
//! nodes an fp16/bf16 conversion cannot hold in fp32 (`phantom precision`). The command line above parses their options; the modules keep the paths the rest of phantom
//! uses (`phantom::golden`, `phantom::segment`...).

// The layers below, under the names the code uses.
pub(crate) use phantom_analysis::{analysis, compare};
pub(crate) use phantom_core::{error, fsutil, spill, tensor, units};
pub(crate) use phantom_model as model;
pub(crate) use phantom_pipeline::pipeline;
pub(crate) use phantom_precision as precision;
pub(crate) use phantom_report::report;
pub(crate) use phantom_runner as runner;
pub(crate) use phantom_runner::targets;

pub mod advisor;
pub mod bisect;
pub mod golden;
pub mod profile;
pub mod reduce;
pub mod replay;
pub mod scan;
pub mod segment;
