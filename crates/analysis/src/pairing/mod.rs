//! Two graphs of one model, paired by what they compute rather than by their names: both run in f64, each value
//! is [`sketch`]ed, each target value is [`pair`]ed with the reference value it equals, and the [`fate`] of every
//! reference value says where the target holds it (paired, a copy, inside a fused node) and where the two graphs
//! stop computing the same function.

pub mod fate;
pub mod pair;
pub mod sketch;

pub use fate::{divergence, fates, Divergence, Fate};
pub use pair::{copies, pair, Pairing, Values};
pub use sketch::Sketch;

use crate::tensor::DType;

/// The tolerance two f64 runs pair within, as a fraction of a value's scale, for a target model whose narrowest
/// float weights are `narrowest`: constant folding in that type (a BatchNormalization folded into its Conv in
/// float32) moves values by a few of its units in the last place, compounded through the graph; a changed weight
/// or a wrong axis moves them by far more.
///
/// Also the closeness that counts as evidence the function is unchanged up to a value, where the outputs differ:
/// a hundredth of the tolerance where rounding is far below it (f32, f64), the tolerance where it is not.
pub fn tolerance(narrowest: Option<DType>) -> (f64, f64) {
    match narrowest {
        Some(DType::F16) => (3e-2, 3e-2),
        Some(DType::Bf16) => (2e-1, 2e-1),
        Some(DType::F64) => (1e-9, 1e-11),
        _ => (1e-4, 1e-6),
    }
}
