//! What phantom's float32 → float16/bfloat16 conversion did, as every report shows it.

/// What phantom's float32 → float16/bfloat16 conversion did.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ConversionReport {
    pub precision: super::LowPrecision,
    /// Nodes left in float32, and why.
    pub kept_fp32: Vec<super::convert::KeptNode>,
    /// Op types kept in float32 because ONNX Runtime has no kernel for them at this precision.
    pub kept_for_ort: Vec<String>,
    /// Initializers and constants with values the target type cannot hold (stored as ±inf or 0, not clamped).
    pub range_issues: Vec<super::convert::RangeIssue>,
    pub converted_tensors: usize,
    pub inserted_casts: usize,
    /// sha256 of the converted model.
    pub sha256: String,
}
