//! Comparing one value of the target against the f64 reference: metrics, statistics, tolerances.

pub mod metrics;
pub mod tolerance;

pub use metrics::{compare, Metrics, Stats, Worst};
pub use tolerance::{Tolerance, ToleranceSpec};
