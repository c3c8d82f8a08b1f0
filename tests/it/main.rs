//! Integration tests: one binary, real models through real runtimes.

mod common;
mod compare;
mod contrib;
mod determinism;
mod devices;
mod diff;
mod dump;
mod errors;
mod fuzz;
mod golden;
mod hostile;
mod hostile_models;
mod inputs;
mod multi;
mod oracle;
mod precision;
mod replay;
mod resolved;
mod samples;
mod scan;
mod schema;
mod snapshots;
mod targets;
mod verdicts;
mod wgpu;
mod wgpu_limits;
