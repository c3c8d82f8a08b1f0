//! phantom tells where and why an ONNX model's numbers diverge between runtimes.
//!
//! ```text
//! cli ──► settings (CompareSettings, TargetSpec: serde, checked before any work)
//!  │
//!  ▼
//! pipeline: prepare ─► capture ─► expected noise ─► stream-compare ─► attribute ─► explain ─► assemble
//!  │          │          │                             │                 │            │          │
//!  │          │          └── target::Target ◄──────────┼─────────────────┘            │          ▼
//!  │          │              (ort: providers table,    │ (bounded: chunks)            │       report::Report
//!  │          │               wgpu: shaders)           │                              │       ─► terminal, JSON,
//!  │          ▼                                        ▼                              ▼          HTML, JUnit, MD, DOT
//!  │        model::load, inputs               runner::reference (tract f64)   analysis (culprits, causes)
//!  │                                           compare (metrics, tolerance)
//!  └─► bisect, golden (record/check), replay, determinism: the same targets
//!      scan: the reference alone (fragile nodes before any conversion)
//!      reduce: a culprit cut out with its boundary values, as a bundle for upstream
//!      profile: ONNX Runtime's profiler read per node (time, FLOPs, bytes, memory)
//! ```
//!
//! Every model passes `model::validate` on import; engines run behind `error::guard` (a panic becomes an error
//! naming the node) and `watchdog` (`--timeout`).
//!
//! Each target asked for (`--ep cpu --ep wgpu`) is a `pipeline::Lane` through the stages: the reference runs once,
//! each lane gets its own `Report`, and `analysis::agreement` compares the lanes with each other into
//! `report::multi::MultiReport` (with its own renderers).
//!
//! Dependencies point down: `cli` → `pipeline` → `target` / `analysis` / `compare` → `runner` → `model`,
//! `precision`, `tensor`. Runners never import `cli` or `report`; `report` re-exports the runner facts it shows.

pub mod analysis;
pub mod bisect;
pub mod bounded;
pub mod cli;
pub mod compare;
pub mod diff;
pub mod error;
pub mod fsutil;
pub mod golden;
pub mod model;
pub mod pipeline;
pub mod precision;
pub mod profile;
pub mod reduce;
pub mod replay;
pub mod report;
pub mod runner;
pub mod scan;
pub mod segment;
pub mod spill;
pub mod target;
pub mod tensor;
pub mod watchdog;

pub use error::{Error, Result};
