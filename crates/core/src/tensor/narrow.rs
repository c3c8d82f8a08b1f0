//! f64 values rounded to a narrower float type (float16, bfloat16, float32) and back, as a target storing them in
//! that type would: one rounding to nearest, ties to even, straight from the f64 value. `half`'s conversions go
//! through float32 first where the CPU has F16C (two roundings: an f64 just off a float16 tie lands on the tie, then
//! goes to even, the wrong way about once in 2^13 elements), and one element at a time; these are exact and run
//! over whole values in vector instructions ([`crate::simd`]).
//!
//! A value in the format's normal range keeps its top `MANTISSA` + 1 bits: scaled by a power of two (exact) so its
//! last kept bit is the units digit, rounded to an integer by adding and subtracting 1.5·2^52, and scaled back.
//! Below the smallest normal the spacing stays that of the subnormals; beyond the largest finite value (after
//! rounding) it is infinite. NaN stays NaN, and every sign, zeros' included, is kept.

use crate::tensor::DType;

/// A float format narrower than f64.
pub trait Format {
    /// Stored mantissa bits (float16 10, bfloat16 7).
    const MANTISSA: i64;
    /// The exponent of its smallest normal number.
    const MIN_EXP: i64;
    /// Its largest finite value.
    const MAX: f64;
}

/// IEEE binary16.
pub struct F16;
impl Format for F16 {
    const MANTISSA: i64 = 10;
    const MIN_EXP: i64 = -14;
    const MAX: f64 = 65504.0;
}

/// bfloat16 (float32's exponent, 8 significant bits).
pub struct Bf16;
impl Format for Bf16 {
    const MANTISSA: i64 = 7;
    const MIN_EXP: i64 = -126;
    const MAX: f64 = 3.389_531_389_251_535_5e38;
}

/// `x` rounded to format `F` and back (the rounding described above).
#[inline(always)]
pub fn round<F: Format>(x: f64) -> f64 {
    const HALF_WAY: f64 = 6_755_399_441_055_744.0; // 1.5 · 2^52: adding it leaves no fraction bits.
    let e = ((x.to_bits() >> 52) & 0x7ff) as i64 - 1023;
    // The exponent of the format's spacing at x (x's own binade, the subnormals' below the normal range).
    let ulp = e.max(F::MIN_EXP) - F::MANTISSA;
    let scale = f64::from_bits(((ulp + 1023) as u64) << 52);
    let inv = f64::from_bits(((1023 - ulp) as u64) << 52);
    let r = ((x * inv + HALF_WAY) - HALF_WAY) * scale;
    let r = r.copysign(x);
    if r.abs() > F::MAX {
        f64::INFINITY.copysign(x)
    } else {
        r
    }
}

#[inline(always)]
fn round_all_body<F: Format>(x: &mut [f64], _format: F) {
    x.iter_mut().for_each(|v| *v = round::<F>(*v));
}

crate::widened! {
    /// Every element of `x` rounded to format `F` and back, in the widest vector instructions this CPU has.
    fn round_all<F: Format>(x: &mut [f64], format: F) -> () = round_all_body
}

/// Every element of `x` rounded to `d` (float16, bfloat16 or float32) and back; other types leave it as it is.
pub fn round_slice(x: &mut [f64], d: DType) {
    match d {
        DType::F16 => round_all(x, F16),
        DType::Bf16 => round_all(x, Bf16),
        DType::F32 => x.iter_mut().for_each(|v| *v = *v as f32 as f64),
        _ => {}
    }
}

/// `x` as a float16, rounded once (`half::f16::from_f64` rounds twice where the CPU has F16C; from a value already
/// representable it is exact).
#[inline]
pub fn f16_of(x: f64) -> half::f16 {
    half::f16::from_f64(round::<F16>(x))
}

/// `x` as a bfloat16, rounded once.
#[inline]
pub fn bf16_of(x: f64) -> half::bf16 {
    half::bf16::from_f64(round::<Bf16>(x))
}

/// One value rounded to `d` and back ([`round_slice`] for one element).
#[inline]
pub fn round_one(x: f64, d: DType) -> f64 {
    match d {
        DType::F16 => round::<F16>(x),
        DType::Bf16 => round::<Bf16>(x),
        DType::F32 => x as f32 as f64,
        _ => x,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nearest of a format's finite values (every bit pattern decoded by `half`), ties to the even pattern;
    /// infinite from the tie above the largest one on (where the next binade's first value would be).
    fn nearest(x: f64, finite: &[(f64, u16)], max: f64, top_ulp: f64) -> f64 {
        if x.is_nan() {
            return f64::NAN;
        }
        if x.abs() >= max + top_ulp / 2.0 {
            return f64::INFINITY.copysign(x);
        }
        let i = finite.partition_point(|(v, _)| *v < x);
        let below = finite[i.saturating_sub(1)];
        let above = finite[i.min(finite.len() - 1)];
        let pick = match (x - below.0).abs().partial_cmp(&(above.0 - x).abs()) {
            Some(std::cmp::Ordering::Less) => below,
            Some(std::cmp::Ordering::Greater) => above,
            _ if below.1.is_multiple_of(2) => below,
            _ => above,
        };
        // A zero keeps x's sign.
        pick.0.copysign(x)
    }

    fn table(decode: impl Fn(u16) -> f64) -> Vec<(f64, u16)> {
        let mut t: Vec<(f64, u16)> = (0..=u16::MAX)
            .map(|b| (decode(b), b))
            .filter(|(v, _)| v.is_finite() && !(*v == 0.0 && v.is_sign_negative()))
            .collect();
        t.sort_by(|a, b| a.0.total_cmp(&b.0));
        t
    }

    /// Random f64 across every binade the formats reach, with ties, near-ties and the edges planted.
    fn samples(finite: &[(f64, u16)]) -> Vec<f64> {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut out = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            1e-320,
        ];
        for _ in 0..200_000 {
            let a = finite[(next() as usize) % (finite.len() - 1)].0;
            let i = finite.partition_point(|(v, _)| *v <= a);
            let up = finite.get(i).map_or(a * 2.0, |n| n.0);
            let mid = (a + up) / 2.0;
            let sliver = (up - a) * 2f64.powi(-30 - (next() % 20) as i32);
            let x = match next() % 5 {
                0 => mid,
                1 => mid + sliver,
                2 => mid - sliver,
                3 => a + (up - a) * ((next() >> 11) as f64 / (1u64 << 53) as f64),
                _ => f64::from_bits(next()),
            };
            out.push(x);
        }
        out
    }

    /// `round` against the nearest of the format's values (`decode` of every pattern; `top` its spacing at the
    /// largest finite value, `max`) on the samples.
    fn rounds_to_nearest(round: fn(f64) -> f64, decode: impl Fn(u16) -> f64, max: f64, top: f64) {
        let finite = table(decode);
        for x in samples(&finite) {
            let (got, want) = (round(x), nearest(x, &finite, max, top));
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{x:e}: {got:e} against {want:e}"
            );
        }
    }

    #[test]
    fn float16_rounding_is_the_nearest_value_ties_to_even() {
        let decode = |b| half::f16::from_bits(b).to_f64();
        rounds_to_nearest(round::<F16>, decode, F16::MAX, 32.0);
    }

    #[test]
    fn bfloat16_rounding_is_the_nearest_value_ties_to_even() {
        let top = Bf16::MAX - half::bf16::from_bits(0x7f7e).to_f64();
        let decode = |b| half::bf16::from_bits(b).to_f64();
        rounds_to_nearest(round::<Bf16>, decode, Bf16::MAX, top);
    }

    #[test]
    fn the_vector_pass_is_the_scalar_rounding() {
        let finite = table(|b| half::f16::from_bits(b).to_f64());
        let xs = samples(&finite);
        for d in [DType::F16, DType::Bf16, DType::F32] {
            let mut v = xs.clone();
            round_slice(&mut v, d);
            for (x, r) in xs.iter().zip(&v) {
                let want = round_one(*x, d);
                assert!(r.to_bits() == want.to_bits() || (r.is_nan() && want.is_nan()));
            }
        }
    }
}
