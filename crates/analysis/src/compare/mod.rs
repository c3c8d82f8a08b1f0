//! Comparing one value of the target against the f64 reference: metrics, statistics, tolerances.

pub mod detail;
mod lanes;
pub mod metrics;
mod pass;
pub mod scales;
mod side;
pub mod slice;
pub mod strings;
pub mod tolerance;
mod ulp;

pub use detail::{detail, Detail};
pub use metrics::{compare, compare_at, Compared, Metrics, Stats, Worst};
pub use scales::{Scales, Scaling};
pub use tolerance::{Tolerance, ToleranceSpec};
