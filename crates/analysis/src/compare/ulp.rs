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

/// Elements per group of interleaved maxima in the block functions (independent chains the compiler vectorizes).
const LANES: usize = 4;

/// Over a block finite on both sides, for a float32 target: the largest ULP distance between `t` and `r` rounded to
/// float32, and the largest error of that rounding (one that overflows is skipped), branch-free over [`LANES`]
/// interleaved maxima.
#[inline(always)]
pub(super) fn block_f32(r: &[f64], t: &[f64]) -> (u64, f64) {
    // Signed-magnitude bits to a line on which neighbouring floats are one apart (−0 and +0 both at 0).
    #[inline(always)]
    fn ordinal(x: f32) -> i64 {
        let b = x.to_bits() as i32;
        let sign = b >> 31;
        (((b & i32::MAX) ^ sign) - sign) as i64
    }
    #[inline(always)]
    fn one(a: f64, b: f64, (u, off): (&mut u64, &mut f64)) {
        let rounded = a as f32;
        let d = (rounded as f64 - a).abs();
        *off = if d > *off && d < f64::INFINITY {
            d
        } else {
            *off
        };
        *u = (*u).max((ordinal(rounded) - ordinal(b as f32)).unsigned_abs());
    }
    let (mut u, mut off) = ([0u64; LANES], [0.0f64; LANES]);
    let mut groups = r.chunks_exact(LANES).zip(t.chunks_exact(LANES));
    for (rg, tg) in &mut groups {
        for k in 0..LANES {
            one(rg[k], tg[k], (&mut u[k], &mut off[k]));
        }
    }
    let done = r.len() - r.len() % LANES;
    for (&a, &b) in r[done..].iter().zip(&t[done..]) {
        one(a, b, (&mut u[0], &mut off[0]));
    }
    (
        u.into_iter().max().unwrap_or(0),
        off.into_iter().fold(0.0, f64::max),
    )
}

/// The largest error of rounding each element of `r` with `round` (one that overflows is skipped), over [`LANES`]
/// interleaved maxima.
#[inline(always)]
pub(super) fn rounding(r: &[f64], round: impl Fn(f64) -> f64) -> f64 {
    let mut m = [0.0f64; LANES];
    let mut groups = r.chunks_exact(LANES);
    for g in &mut groups {
        for k in 0..LANES {
            let d = (round(g[k]) - g[k]).abs();
            m[k] = if d > m[k] && d < f64::INFINITY {
                d
            } else {
                m[k]
            };
        }
    }
    for &a in groups.remainder() {
        let d = (round(a) - a).abs();
        m[0] = if d > m[0] && d < f64::INFINITY {
            d
        } else {
            m[0]
        };
    }
    m.into_iter().fold(0.0, f64::max)
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

    /// The block path for float32 gives what the per-element distance gives, across signs, zeros and subnormals.
    #[test]
    fn float32_blocks_match_the_per_element_distance() {
        let tiny = f32::from_bits(1) as f64;
        let r = [1.0, -1.0, 0.0, -0.0, tiny, -tiny, 3.3e38, 0.1, -2.5e-3];
        let t = [
            1.0000001, -0.9999999, -0.0, tiny, -tiny, 0.0, 3.4e38, -0.1, -2.5e-3,
        ];
        let t: Vec<f64> = t.iter().map(|&x: &f64| x as f32 as f64).collect();
        for n in 1..=r.len() {
            let (r, t) = (&r[..n], &t[..n]);
            let ulps = (r.iter().zip(t)).map(|(&a, &b)| ulp_distance(DType::F32, a, b));
            let off = (r.iter()).map(|&a| (a as f32 as f64 - a).abs());
            let want = (ulps.max().unwrap(), off.fold(0.0, f64::max));
            assert_eq!(block_f32(r, t), want, "{n}");
            assert_eq!(rounding(r, |a| a as f32 as f64), want.1, "{n}");
        }
    }
}
