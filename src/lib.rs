//! phantom tells where and why an ONNX model's numbers diverge between runtimes.
//!
//! ```text
//! cli ──► settings (CompareSettings, TargetSpec: serde, checked before any work)
//!  │
//!  ▼
//! pipeline: prepare ─► capture ─► expected noise ─► stream-compare ─► attribute ─► explain ─► assemble
//!  │          │          │                             │                 │            │          │
//!  │          │          └── targets::Target ◄─────────┼─────────────────┘            │          ▼
//!  │          │              (ort: providers, chunks,  │ (bounded: chunks)            │       report::model::Report
//!  │          │               fp16/bf16 model;         │                              │       ─► terminal, JSON,
//!  │          │               wgpu: shaders)           │                              │          HTML, JUnit, MD, DOT
//!  │          ▼                                        ▼                              ▼
//!  │        model (load, inputs, surgery, cuts)  runner::reference (tract f64)   analysis (culprits, causes)
//!  │                                             compare (metrics, tolerance)
//!  └─► bisect, golden (record/check), replay, determinism: the same targets
//!      scan: the reference alone (fragile nodes before any conversion)
//!      reduce: a culprit cut out with its boundary values, as a bundle for upstream
//!      profile: ONNX Runtime's profiler read per node (time, FLOPs, bytes, memory)
//! ```
//!
//! Every model passes `model::validate` on import; every model phantom derives from it (cuts, nodes run alone,
//! segments, inlined branches, conversions) is finished by `model::surgery`. Engines run behind `error::guard` (a
//! panic becomes an error naming the node) and `watchdog` (`--timeout`).
//!
//! Each target asked for (`--ep cpu --ep wgpu`) is a `pipeline::Lane` through the stages: the reference runs once,
//! each lane gets its own `Report`, and `analysis::agreement` compares the lanes with each other into
//! `report::model::multi::MultiReport` (with its own renderers in `report::multi`).
//!
//! Dependencies point down, crate by crate: an import that runs up from one crate to another does not compile, and
//! inside the crates of several modules `tests/it/layering.rs` holds the order and fails on an import that runs up
//! or a circle between modules:
//!
//! ```text
//! phantom           (this crate: the command line, one file per command, and the binary)
//! phantom-commands  (crates/commands: golden, scan, profile, reduce, bisect, replay, segment, advisor)
//! phantom-pipeline  (crates/pipeline: pipeline; below it targets, bounded, equiv)
//! phantom-diff      (crates/diff: tensor dumps paired and compared; runs no model)
//! phantom-report    (crates/report: the renderers and the emitter)
//! phantom-analysis  (crates/analysis: analysis; below it compare and report::model, the report's schema)
//! phantom-runner    (crates/runner: ONNX Runtime and wgpu runners, nodes run alone, target specs)
//! phantom-reference (crates/reference: the tract f64 reference and its kernels, the runner interface)
//! phantom-engine    (crates/engine: target specs and the facts of what ran, no runtime)
//! phantom-precision (crates/precision: fp16/bf16 conversion)
//! phantom-model     (crates/model: ONNX import, validation, surgery, cuts, types, tract conversions)
//! phantom-core      (crates/core: error, fsutil, heap, pip, tensor, spill, units, watchdog, simd)
//! ```
//!
//! This crate re-exports the crates below under the module names the code uses (`phantom::model`,
//! `phantom::runner`, `phantom::analysis`, `phantom::report`...).

pub mod cli;

// The crates below, under the module names the code (and the tests) use.
pub use phantom_analysis::{analysis, compare, pairing};
pub use phantom_commands::{advisor, bisect, golden, profile, reduce, replay, scan, segment};
pub use phantom_core::{dispatch_tensor, widened};
pub use phantom_core::{error, fsutil, heap, pip, simd, spill, tensor, units, watchdog, work};
pub use phantom_core::{Error, Result};
pub use phantom_diff::diff;
pub use phantom_model as model;
pub use phantom_pipeline::{bounded, equiv, pipeline};
pub use phantom_precision as precision;
pub use phantom_report::report;
pub use phantom_runner as runner;
pub use phantom_runner::targets;
