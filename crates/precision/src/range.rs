//! Values a reduced precision cannot hold: counted per tensor (overflow to ±inf, non-zero values flushed to 0) and
//! reported, never clamped.

use half::{bf16, f16};
use serde::Serialize;

use super::LowPrecision;

/// How a value escapes the target type's range.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RangeKind {
    /// |x| beyond the type's max, stored as ±inf.
    Overflow,
    /// Non-zero, below half the smallest subnormal, stored as 0.
    Flush,
}

/// An initializer or constant with values the target type cannot hold.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RangeIssue {
    pub tensor: String,
    pub kind: RangeKind,
    pub count: u64,
    pub elements: u64,
    /// Largest |x| for overflow, smallest non-zero |x| for flush.
    pub extreme: f64,
}

/// Values of tensor `name` that `to` cannot hold: beyond its max (overflow to infinity) or below half its smallest
/// subnormal (flush to zero).
pub fn range_issues(
    name: &str,
    values: impl Iterator<Item = f64>,
    to: LowPrecision,
) -> Vec<RangeIssue> {
    let (max, min_normal_sub) = match to {
        LowPrecision::F16 => (f16::MAX.to_f64(), f16::from_bits(1).to_f64() / 2.0),
        LowPrecision::Bf16 => (bf16::MAX.to_f64(), bf16::from_bits(1).to_f64() / 2.0),
    };
    let (mut over, mut big, mut flush, mut small) = (0u64, 0f64, 0u64, f64::INFINITY);
    let mut elements = 0u64;
    for v in values {
        elements += 1;
        let x = v.abs();
        if x.is_finite() && x > max {
            over += 1;
            big = big.max(x);
        } else if x > 0.0 && x < min_normal_sub {
            flush += 1;
            small = small.min(x);
        }
    }
    let mut out = vec![];
    if over > 0 {
        out.push(RangeIssue {
            tensor: name.to_string(),
            kind: RangeKind::Overflow,
            count: over,
            elements,
            extreme: big,
        });
    }
    if flush > 0 {
        out.push(RangeIssue {
            tensor: name.to_string(),
            kind: RangeKind::Flush,
            count: flush,
            elements,
            extreme: small,
        });
    }
    out
}
