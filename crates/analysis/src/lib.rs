//! From two runs to an explained verdict: [`compare`] measures each value against the reference within its
//! tolerance, [`analysis`] finds where drift begins, which node introduced it and why, and [`report::model`] is the
//! report they fill (the schema every renderer reads). The modules keep the paths the rest of phantom uses
//! (`phantom::compare`, `phantom::analysis`, `phantom::report::model`).

// The layers below, under the names the code uses.
pub(crate) use phantom_core::{dispatch_tensor, widened};
pub(crate) use phantom_core::{simd, spill, tensor, units};
pub(crate) use phantom_engine::{facts, spec};
pub(crate) use phantom_model as model;
pub(crate) use phantom_precision as precision;

pub mod analysis;
pub mod compare;
pub mod pairing;

/// The report's schema; its renderers live in `phantom-report`.
pub mod report {
    pub mod model;
}
