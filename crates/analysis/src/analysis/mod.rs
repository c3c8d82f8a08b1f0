//! From two runs to per-node verdicts: which values pass, fail or stay unchecked, where drift begins.

pub mod agreement;
pub mod anomaly;
pub mod attribution;
pub mod causes;
pub mod culprit;
pub mod determinism;
pub mod divergence;
pub mod fusion;
pub mod index_flip;
pub mod origin;
pub mod placed;
pub mod tf32;

pub use divergence::{assemble, compare_pair, coverage, hides, incomplete, verdict};
