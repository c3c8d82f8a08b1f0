//! What the analyses find on a node: culprits, anomalies, and causes with the numbers behind them.

use serde::Serialize;

use std::collections::BTreeMap;

/// A node whose own error is far beyond what correct rounding explains, hidden under the tolerance (or under a drift
/// it inherits).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Anomaly {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
    /// Largest |t − r| the node makes on its own (fed with the reference's inputs).
    pub max_abs: f64,
    /// That error over the error of correctly rounding its f64 output to the type the target stores it in.
    pub rounding_ratio: f64,
    /// That error over the scale of the value and its operands (max of their RMS).
    pub relative: f64,
    /// For a value stored in fp16 or bf16: its node's RMS error alone over the RMS error of the correctly rounded
    /// run at that value, where that ratio is what makes it anomalous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_ratio: Option<f64>,
    /// One sentence with the numbers.
    pub summary: String,
    /// With `--target-model`: what differs between the two models at this node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
}

/// A node that makes drift on its own.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Culprit {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
    /// How the blame was established.
    pub basis: Basis,
    /// Largest |t − r| the node makes on its own (or cumulatively, for the `cumulative` basis).
    pub max_abs: f64,
    /// That error over the error of correct rounding to the target type ("k× above expected noise").
    pub noise_ratio: Option<f64>,
    /// Likely causes, most confident first.
    pub causes: Vec<Cause>,
    /// Graph outputs out of tolerance that this node reaches.
    pub spoils: Vec<String>,
    /// Node names from the culprit to the first spoiled output.
    pub path: Vec<String>,
}

/// A likely cause of a node's error, with the numbers behind it (from the f64 reference values).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Cause {
    pub kind: CauseKind,
    /// One sentence with the numbers.
    pub summary: String,
    /// The numbers, by name.
    pub evidence: BTreeMap<String, f64>,
    pub confidence: Confidence,
    /// What to try.
    pub fix: String,
    /// Other nodes the cause involves (the `Add` holding a too-small epsilon, the `Sub` that cancels).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// How a culprit's blame was established.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The node alone, fed with reference inputs, is out of tolerance.
    Introduced,
    /// Even computed exactly with every value stored in the target's precision (the ideal run) it fails.
    Ideal,
    /// No isolated run: its output fails while its inputs pass.
    Cumulative,
    /// Within tolerance itself, its own error is where the error a culprit downstream amplifies starts, beyond
    /// rounding, while the ideal run keeps that culprit within tolerance (see `analysis/origin.rs`).
    Origin,
}

/// The kind of a likely cause.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    /// Values beyond the target type's range become ±inf.
    Overflow,
    /// An intermediate inside the node (a sum of squares, a dot product) overflows.
    OverflowInside,
    /// An initializer the target type cannot hold.
    InitializerRange,
    /// NaN or ±inf where f64 has finite values.
    NanInf,
    /// Values below the type's smallest subnormal flush to zero.
    Underflow,
    /// An epsilon (LayerNorm, division guard) below the type's resolution at that magnitude.
    Epsilon,
    /// A long reduction accumulating rounding error.
    LongReduction,
    /// Softmax logits whose range the type cannot resolve.
    SoftmaxRange,
    /// Subtraction of close values losing the significant digits.
    Cancellation,
    /// An ArgMax/TopK/comparison whose choice flips on near-ties.
    IndexFlip,
    /// Quantized values outside [qmin, qmax] saturate.
    QuantizationSaturation,
    /// A value on a rounding boundary lands in the neighbouring quantization step.
    QuantizationFlip,
    /// The quantization scale does not cover the values' range.
    QuantizationRange,
    /// An integer accumulator overflows.
    AccumulatorOverflow,
    /// ONNX Runtime fused the node with its neighbours (settled by a rerun with optimizations off).
    Fusion,
    /// Not fusion: the node amplifies errors its inputs carry within tolerance.
    Amplification,
    /// The error the node amplifies starts upstream, at the node the cause names.
    Inherited,
    /// TF32 tensor cores (10-bit mantissa operands) on a float32 MatMul/Gemm/Conv (settled by a rerun with
    /// `use_tf32=0`).
    Tf32,
    /// ONNX Runtime's `MatMulNBits` with `accuracy_level = 4` quantizes its activations to int8 per block inside
    /// the kernel (named from the attribute, with the error that quantization alone makes).
    AccuracyLevel,
    /// The provider holds the node's weights in a narrower type (fp16, bf16): the weights rounded so explain the
    /// node's error.
    WeightsNarrowed,
    /// The target precision itself: nothing more specific explains the error.
    Precision,
    /// The node's own error is far beyond what rounding in its type explains: the kernel or the data differ.
    BeyondRounding,
    /// The target's model holds different weights (initializers) for this node (`--target-model`).
    WeightsDiffer,
    /// The target's model gives this node different attributes (`--target-model`).
    AttributeDiffers,
    /// The target's model computes this value with a different op or inputs (`--target-model`).
    NodeDiffers,
}

impl CauseKind {
    /// The name used in reports (as in the JSON).
    pub fn name(self) -> &'static str {
        use CauseKind::*;
        match self {
            Overflow => "overflow",
            OverflowInside => "overflow_inside",
            InitializerRange => "initializer_range",
            NanInf => "nan_inf",
            Underflow => "underflow",
            Epsilon => "epsilon",
            LongReduction => "long_reduction",
            SoftmaxRange => "softmax_range",
            Cancellation => "cancellation",
            IndexFlip => "index_flip",
            QuantizationSaturation => "quantization_saturation",
            QuantizationFlip => "quantization_flip",
            QuantizationRange => "quantization_range",
            AccumulatorOverflow => "accumulator_overflow",
            Fusion => "fusion",
            Amplification => "amplification",
            Inherited => "inherited",
            Tf32 => "tf32",
            AccuracyLevel => "accuracy_level",
            WeightsNarrowed => "weights_narrowed",
            Precision => "precision",
            BeyondRounding => "beyond_rounding",
            WeightsDiffer => "weights_differ",
            AttributeDiffers => "attribute_differs",
            NodeDiffers => "node_differs",
        }
    }
}

/// How sure a cause is; ordered most confident first.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    High,
    Medium,
    Low,
}

impl Confidence {
    pub fn name(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        }
    }
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Basis::Introduced => "introduced",
            Basis::Ideal => "ideal",
            Basis::Cumulative => "cumulative",
            Basis::Origin => "origin",
        }
    }
}

/// The u8×s8 pairs beyond int16 in the products ONNX Runtime fused (on an x86 CPU without VNNI), counted on the
/// reference's levels, for an output its fused run moved beyond the variation of faithful integer kernels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct FusedSaturation {
    /// Convolutions and matrix products checked, and those with a pair beyond int16.
    pub products: usize,
    pub saturating: usize,
    pub pairs_over: usize,
    pub pairs_checked: usize,
    /// The largest |pair sum|.
    pub worst_pair: f64,
    /// The product with the most pairs beyond int16, and how many.
    pub most: String,
    pub most_pairs: usize,
}
