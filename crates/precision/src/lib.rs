//! Reduced-precision targets: phantom's float32 → float16/bfloat16 converter ([`convert`]) and the element types
//! it needs ([`types`]).

// The layers below, under the names the code uses.
pub(crate) use phantom_core::{error, tensor};
pub(crate) use phantom_model as model;

mod casts;
pub mod conversion;
pub mod convert;
mod integers;
pub mod nbits;
mod range;

use serde::Serialize;

/// A reduced floating-point precision for the target.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LowPrecision {
    #[default]
    F16,
    Bf16,
}

impl LowPrecision {
    /// The element type values are stored in.
    pub fn dtype(self) -> crate::tensor::DType {
        match self {
            LowPrecision::F16 => crate::tensor::DType::F16,
            LowPrecision::Bf16 => crate::tensor::DType::Bf16,
        }
    }
}
