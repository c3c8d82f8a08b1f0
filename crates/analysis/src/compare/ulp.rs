//! Distance in units in the last place between the target's value and the reference's rounded to the target's
//! element type: branch-free on bit patterns, as signs differ unpredictably near zero.

use crate::tensor::narrow;
use crate::tensor::DType;

/// Distance in representable floats between two bit patterns of a float type whose sign bit is `sign`
/// (−0 and +0 are one point); without branches, as signs differ unpredictably near zero.
#[inline(always)]
pub(super) fn ulps(a: u64, b: u64, sign: u64) -> u64 {
    let ordinal = |x: u64| {
        let m = (x & (sign - 1)) as i128;
        if x & sign != 0 {
            -m
        } else {
            m
        }
    };
    (ordinal(a) - ordinal(b)).unsigned_abs() as u64
}

/// [`ulps`] for float types of 32 bits or fewer, in 64-bit integers.
#[inline(always)]
pub(super) fn ulps_narrow(a: u64, b: u64, sign: u64) -> u64 {
    let ordinal = |x: u64| {
        let m = (x & (sign - 1)) as i64;
        if x & sign != 0 {
            -m
        } else {
            m
        }
    };
    (ordinal(a) - ordinal(b)).unsigned_abs()
}

/// ULP distance between the target value `t` and the reference `r` rounded to `dtype`.
#[inline(always)]
pub fn ulp_distance(dtype: DType, r: f64, t: f64) -> u64 {
    if !r.is_finite() || !t.is_finite() {
        return if r == t || (r.is_nan() && t.is_nan()) {
            0
        } else {
            u64::MAX
        };
    }
    match dtype {
        DType::F64 => ulps(r.to_bits(), t.to_bits(), 1 << 63),
        DType::F32 => ulps_narrow(
            (r as f32).to_bits() as u64,
            (t as f32).to_bits() as u64,
            1 << 31,
        ),
        DType::F16 => ulps_narrow(
            narrow::f16_of(r).to_bits() as u64,
            narrow::f16_of(t).to_bits() as u64,
            1 << 15,
        ),
        DType::Bf16 => ulps_narrow(
            narrow::bf16_of(r).to_bits() as u64,
            narrow::bf16_of(t).to_bits() as u64,
            1 << 15,
        ),
        _ => (r - t).abs().min(u64::MAX as f64) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulp_counts_adjacent_floats() {
        let a = 1.0f32;
        let b = f32::from_bits(a.to_bits() + 3);
        assert_eq!(ulp_distance(DType::F32, a as f64, b as f64), 3);
        assert_eq!(ulp_distance(DType::F32, -0.0, 0.0), 0);
        let tiny = f32::from_bits(1) as f64;
        assert_eq!(ulp_distance(DType::F32, -tiny, tiny), 2);
        assert_eq!(
            ulp_distance(DType::F64, -f64::MAX, f64::MAX),
            2 * f64::MAX.to_bits()
        );
    }
}
