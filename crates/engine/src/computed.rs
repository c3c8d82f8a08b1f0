//! How the reference computed what it computed, as the analyses and reports read it: each node's precision
//! ([`RefPrecision`]), the target's discrete decisions it adopted ([`Adopted`]), and the element types an emulated
//! low-precision run rounds values to ([`Rounding`]). Plain data, so that the analyses build on no f64 kernel.

use std::collections::HashMap;

/// How the reference computed a node.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RefPrecision {
    /// tract's own kernel, in f64.
    F64,
    /// phantom's own f64 implementation (tract has no f64 kernel for this op).
    F64Phantom,
    /// Computed at lower precision: comparisons on this node are only as good as the reason says.
    Reduced { reason: String },
    /// Not computed: its values are the target's, handed on so that what follows is computed in f64 (a custom op,
    /// an op whose output lengths only the data decides). Never compared.
    Seeded { reason: String },
    /// The reference could not compute it at all.
    Unavailable { reason: String },
}

/// What the reference adopted on one value.
#[derive(
    Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Adopted {
    /// Elements where the reference took the target's decision: its input lay within its noise of the
    /// boundary the two decisions sit on either side of.
    pub flips: u64,
    /// Elements whose conversion ONNX leaves undefined (NaN, ±inf or out of the integer type's range): the
    /// target's value was taken and is not compared as a number.
    pub undefined: u64,
    /// Elements whose decisions differ beyond the input's noise: kept, and compared as they are.
    pub beyond: u64,
    /// The largest fraction of its input's noise a flip needed to reach the target's decision (1/1024, 1/32
    /// or 1): how close to the boundary the flipped inputs lay.
    pub within: f64,
    /// Elements of an integer quantization (a QDQ pair) where the target's level is the other neighbour of the
    /// exact value, less than one quantum from it: a faithful rounding, as integer kernels that requantize in their
    /// own arithmetic give (ONNX Runtime's fused `QLinearSoftmax` multiplies by ⌊1/scale⌋). Taken and counted; a
    /// level a quantum or more from the exact value stays in `beyond`.
    #[serde(default)]
    pub faithful: u64,
}

/// Element type to round each named value to after it is computed (the emulated low-precision run).
pub type Rounding = HashMap<String, phantom_core::tensor::DType>;
