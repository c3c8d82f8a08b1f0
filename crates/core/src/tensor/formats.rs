//! ONNX's narrow number formats — float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0), float4 E2M1, int4/uint4 and
//! int2/uint2 — decoded exactly and rounded to, in f64.
//!
//! phantom holds a value of such a format in a wider *carrier* that represents every value of the format exactly:
//! float32 for the float formats, int8/uint8 for the integer ones. The format itself is remembered where it matters
//! (graph inputs, `Cast` targets, quantized types), so values are rounded onto its grid as the spec says:
//! [`Format::cast`] follows `Cast` (its saturation tables, `round_mode` for E8M0; to the integer formats, where the
//! spec leaves values out of range undefined, as ONNX Runtime's CPU kernel does: rounded half away from zero, then
//! wrapped), [`Format::quantize`] follows `QuantizeLinear` (round half to even, saturating).

use serde::{Deserialize, Serialize};

use super::DType;

/// A narrow ONNX element type phantom carries in a wider one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Format {
    #[serde(rename = "float8e4m3fn")]
    F8E4M3FN,
    #[serde(rename = "float8e4m3fnuz")]
    F8E4M3FNUZ,
    #[serde(rename = "float8e5m2")]
    F8E5M2,
    #[serde(rename = "float8e5m2fnuz")]
    F8E5M2FNUZ,
    #[serde(rename = "float8e8m0")]
    F8E8M0,
    #[serde(rename = "float4e2m1")]
    F4E2M1,
    #[serde(rename = "uint4")]
    U4,
    #[serde(rename = "int4")]
    I4,
    #[serde(rename = "uint2")]
    U2,
    #[serde(rename = "int2")]
    I2,
}

/// How `Cast` rounds onto float8 E8M0 (`round_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum E8m0Round {
    Up,
    Down,
    Nearest,
}

impl E8m0Round {
    pub fn parse(s: &str) -> Option<E8m0Round> {
        Some(match s {
            "up" => E8m0Round::Up,
            "down" => E8m0Round::Down,
            "nearest" => E8m0Round::Nearest,
            _ => return None,
        })
    }
}

/// A minifloat's layout: exponent and mantissa bits, exponent bias, and how it spells NaN and infinity.
struct Minifloat {
    ebits: u32,
    mbits: u32,
    bias: i32,
    /// Infinities and NaNs as IEEE spells them (E5M2).
    ieee: bool,
    /// NaN is 0x80 and there is no −0 (the FNUZ variants).
    fnuz: bool,
    /// NaN is every bit of exponent and mantissa set (E4M3FN).
    fn_nan: bool,
}

impl Format {
    /// The format of an ONNX `TensorProto.DataType` code, if it is one of these.
    pub fn from_onnx(code: i32) -> Option<Format> {
        Some(match code {
            17 => Format::F8E4M3FN,
            18 => Format::F8E4M3FNUZ,
            19 => Format::F8E5M2,
            20 => Format::F8E5M2FNUZ,
            21 => Format::U4,
            22 => Format::I4,
            23 => Format::F4E2M1,
            24 => Format::F8E8M0,
            25 => Format::U2,
            26 => Format::I2,
            _ => return None,
        })
    }

    pub fn onnx_code(self) -> i32 {
        match self {
            Format::F8E4M3FN => 17,
            Format::F8E4M3FNUZ => 18,
            Format::F8E5M2 => 19,
            Format::F8E5M2FNUZ => 20,
            Format::U4 => 21,
            Format::I4 => 22,
            Format::F4E2M1 => 23,
            Format::F8E8M0 => 24,
            Format::U2 => 25,
            Format::I2 => 26,
        }
    }

    /// The ONNX name (`float8e4m3fn`, `int4`...).
    pub fn name(self) -> &'static str {
        match self {
            Format::F8E4M3FN => "float8e4m3fn",
            Format::F8E4M3FNUZ => "float8e4m3fnuz",
            Format::F8E5M2 => "float8e5m2",
            Format::F8E5M2FNUZ => "float8e5m2fnuz",
            Format::F8E8M0 => "float8e8m0",
            Format::F4E2M1 => "float4e2m1",
            Format::U4 => "uint4",
            Format::I4 => "int4",
            Format::U2 => "uint2",
            Format::I2 => "int2",
        }
    }

    /// Bits per element as stored (sub-byte formats are packed, lowest bits first).
    pub fn bits(self) -> usize {
        match self {
            Format::F4E2M1 | Format::U4 | Format::I4 => 4,
            Format::U2 | Format::I2 => 2,
            _ => 8,
        }
    }

    pub fn is_float(self) -> bool {
        !matches!(self, Format::U4 | Format::I4 | Format::U2 | Format::I2)
    }

    /// The type that holds every value of the format exactly.
    pub fn carrier(self) -> DType {
        match self {
            Format::I4 | Format::I2 => DType::I8,
            Format::U4 | Format::U2 => DType::U8,
            _ => DType::F32,
        }
    }

    /// Bytes that `n` packed elements take.
    pub fn packed_bytes(self, n: usize) -> usize {
        (n * self.bits()).div_ceil(8)
    }

    /// The `n` codes packed in `bytes` (lowest bits first), or `None` when `bytes` is not their packed size.
    pub fn unpack(self, bytes: &[u8], n: usize) -> Option<Vec<u8>> {
        if bytes.len() != self.packed_bytes(n) {
            return None;
        }
        let bits = self.bits();
        let per = 8 / bits;
        let mask = ((1u16 << bits) - 1) as u8;
        Some(
            (0..n)
                .map(|i| (bytes[i / per] >> ((i % per) * bits)) & mask)
                .collect(),
        )
    }

    /// The lowest and highest value of an integer format.
    pub fn int_range(self) -> Option<(f64, f64)> {
        Some(match self {
            Format::U4 => (0.0, 15.0),
            Format::I4 => (-8.0, 7.0),
            Format::U2 => (0.0, 3.0),
            Format::I2 => (-2.0, 1.0),
            _ => return None,
        })
    }

    fn minifloat(self) -> Option<Minifloat> {
        let m = |ebits, mbits, bias, ieee, fnuz, fn_nan| Minifloat {
            ebits,
            mbits,
            bias,
            ieee,
            fnuz,
            fn_nan,
        };
        Some(match self {
            Format::F8E4M3FN => m(4, 3, 7, false, false, true),
            Format::F8E4M3FNUZ => m(4, 3, 8, false, true, false),
            Format::F8E5M2 => m(5, 2, 15, true, false, false),
            Format::F8E5M2FNUZ => m(5, 2, 16, false, true, false),
            Format::F4E2M1 => m(2, 1, 1, false, false, false),
            _ => return None,
        })
    }

    /// The value a stored code means.
    pub fn decode(self, code: u8) -> f64 {
        if let Some((lo, _)) = self.int_range() {
            let span = 1i16 << self.bits();
            let v = code as i16;
            return match lo < 0.0 && v >= span / 2 {
                true => (v - span) as f64,
                false => v as f64,
            };
        }
        if self == Format::F8E8M0 {
            return match code {
                0xFF => f64::NAN,
                e => 2f64.powi(e as i32 - 127),
            };
        }
        let f = self.minifloat().expect("a float format");
        let (emax, mmax) = ((1u8 << f.ebits) - 1, (1u8 << f.mbits) - 1);
        let sign_bit = 1u8 << (f.ebits + f.mbits);
        let (e, m) = ((code >> f.mbits) & emax, code & mmax);
        let nan = (f.fnuz && code == 0x80)
            || (f.ieee && e == emax && m != 0)
            || (f.fn_nan && e == emax && m == mmax);
        if nan {
            return f64::NAN;
        }
        let mag = match (f.ieee && e == emax, e) {
            (true, _) => f64::INFINITY,
            (false, 0) => m as f64 * 2f64.powi(1 - f.bias - f.mbits as i32),
            (false, e) => {
                (1.0 + m as f64 / (1u32 << f.mbits) as f64) * 2f64.powi(e as i32 - f.bias)
            }
        };
        match code & sign_bit != 0 {
            true => -mag,
            false => mag,
        }
    }

    /// One step of the grid of a float format: relative to a value's magnitude (2^−mantissa bits), and at the bottom
    /// the smallest subnormal step; `None` for the integer formats.
    pub fn grid_step(self) -> Option<(f64, f64)> {
        if self == Format::F8E8M0 {
            return Some((1.0, 2f64.powi(-127)));
        }
        let f = self.minifloat()?;
        Some((
            2f64.powi(-(f.mbits as i32)),
            2f64.powi(1 - f.bias - f.mbits as i32),
        ))
    }

    /// The largest finite value (the test below checks each against the codes' decoding).
    pub fn max(self) -> f64 {
        match self {
            Format::F8E4M3FN => 448.0,
            Format::F8E4M3FNUZ => 240.0,
            Format::F8E5M2 | Format::F8E5M2FNUZ => 57344.0,
            Format::F8E8M0 => 2f64.powi(127),
            Format::F4E2M1 => 6.0,
            Format::U4 => 15.0,
            Format::I4 => 7.0,
            Format::U2 => 3.0,
            Format::I2 => 1.0,
        }
    }

    /// Whether `x` is a value of the format (NaN and infinities count where the format has them): casting it
    /// without saturation leaves it as it is.
    pub fn holds(self, x: f64) -> bool {
        let y = self.cast(x, false, E8m0Round::Nearest);
        y == x || (y.is_nan() && x.is_nan())
    }

    /// `x` rounded to the nearest value of the minifloat's grid, ties to even, with no upper exponent limit.
    fn nearest(f: &Minifloat, x: f64) -> f64 {
        let ax = x.abs();
        if ax == 0.0 {
            return x;
        }
        let emin = 1 - f.bias;
        let field = ((ax.to_bits() >> 52) & 0x7ff) as i32;
        let e = (field - 1023).max(emin);
        let quantum = 2f64.powi(e - f.mbits as i32);
        ((ax / quantum).round_ties_even() * quantum).copysign(x)
    }

    /// `Cast` of `x` to this format (its value, held in f64): float8 by the spec's saturation tables, float4
    /// saturating (NaN has no float4 code: the suite writes −0), E8M0 by `round`. To int4/uint4/int2/uint2 the
    /// spec's `Cast` leaves a value out of range undefined and its int4 note rounds to nearest; phantom does what
    /// ONNX Runtime's CPU kernel does (measured on 1.31.1): round half away from zero, then keep the low bits (two's
    /// complement wrap); NaN and infinities give 0.
    pub fn cast(self, x: f64, saturate: bool, round: E8m0Round) -> f64 {
        if let Some((lo, _)) = self.int_range() {
            if !x.is_finite() {
                return 0.0;
            }
            let span = 1i64 << self.bits();
            let w = (x.round() as i64).rem_euclid(span);
            return match lo < 0.0 && w >= span / 2 {
                true => (w - span) as f64,
                false => w as f64,
            };
        }
        if self == Format::F8E8M0 {
            return self.decode(e8m0_code(x as f32, saturate, round));
        }
        let f = self.minifloat().expect("a float format");
        if x.is_nan() {
            return match self {
                Format::F4E2M1 => -0.0,
                _ => f64::NAN,
            };
        }
        let saturate = saturate || self == Format::F4E2M1;
        let max = self.max();
        let r = Self::nearest(&f, x);
        let r = match (r.abs() > max, saturate, f.ieee) {
            (false, _, _) => r,
            (true, true, _) => max.copysign(x),
            (true, false, true) => f64::INFINITY.copysign(x),
            (true, false, false) => f64::NAN,
        };
        match f.fnuz && r == 0.0 {
            true => 0.0,
            false => r,
        }
    }

    /// Whether `a` and `b`, values of this format, are equal or neighbours on its grid (no value of the format lies
    /// strictly between them): a rounding whose input moved within its noise can land on either. Any value strictly
    /// between them is nearer their midpoint than they are, so the midpoint rounds onto one of them exactly when
    /// they are neighbours.
    pub fn adjacent(self, a: f64, b: f64) -> bool {
        if a == b {
            return true;
        }
        if !self.is_float() {
            return (a - b).abs() <= 1.0;
        }
        let m = self.cast((a + b) / 2.0, true, E8m0Round::Nearest);
        m == a || m == b
    }

    /// `QuantizeLinear`'s rounding of `x` (already divided by the scale and shifted by the zero point) onto this
    /// format: integers round half to even and saturate; float formats round to nearest even, saturating unless
    /// `saturate` is false.
    pub fn quantize(self, x: f64, saturate: bool) -> f64 {
        match self.int_range() {
            Some((lo, hi)) => x.round_ties_even().clamp(lo, hi),
            None => self.cast(x, saturate, E8m0Round::Nearest),
        }
    }
}

/// The E8M0 code of `x` as ONNX's `to_float8e8m0` computes it: float32's exponent, rounded by `round`.
fn e8m0_code(x: f32, saturate: bool, round: E8m0Round) -> u8 {
    let bits = x.to_bits();
    let exponent = (bits >> 23) & 0xFF;
    if exponent == 0xFF {
        // NaN stays NaN; an infinity saturates to the largest value, as the spec's table says.
        let inf = bits & 0x7F_FFFF == 0;
        return if inf && saturate { 0xFE } else { 0xFF };
    }
    let up = match round {
        E8m0Round::Down => false,
        E8m0Round::Up => bits & 0x7F_FFFF != 0,
        E8m0Round::Nearest => {
            let (g, r, s) = (bits & 0x40_0000, bits & 0x20_0000, bits & 0x1F_FFFF);
            g != 0 && (r != 0 || s != 0 || exponent > 0)
        }
    };
    let up = up && !(saturate && exponent == 0xFE);
    (exponent + up as u32).min(0xFF) as u8
}

#[cfg(test)]
mod tests {

    #[test]
    fn neighbours_on_a_grid_have_nothing_between_them() {
        let f = Format::F8E4M3FN;
        // e4m3: steps of 1/8 from 1 to 2, of 1/16 below 1.
        assert!(f.adjacent(1.0, 1.125) && f.adjacent(1.125, 1.0));
        assert!(!f.adjacent(1.0, 1.25));
        assert!(f.adjacent(0.9375, 1.0) && !f.adjacent(0.875, 1.0));
        assert!(f.adjacent(256.0, 288.0) && !f.adjacent(256.0, 320.0));
        assert!(f.adjacent(-0.001953125, 0.0));
        assert!(Format::I4.adjacent(3.0, 4.0) && !Format::I4.adjacent(3.0, 5.0));
    }

    use super::*;

    #[test]
    fn largest_values_are_the_largest_finite_codes() {
        for f in [
            Format::F8E4M3FN,
            Format::F8E4M3FNUZ,
            Format::F8E5M2,
            Format::F8E5M2FNUZ,
            Format::F8E8M0,
            Format::F4E2M1,
            Format::U4,
            Format::I4,
            Format::U2,
            Format::I2,
        ] {
            let decoded = (0..=u8::MAX >> (8 - f.bits()))
                .map(|c| f.decode(c))
                .filter(|v| v.is_finite())
                .fold(f64::MIN, f64::max);
            assert_eq!(f.max(), decoded, "{f:?}");
        }
        assert!(Format::F8E4M3FN.holds(0.46875) && !Format::F8E4M3FN.holds(0.3));
        assert!(Format::F8E5M2.holds(f64::INFINITY) && !Format::F8E4M3FN.holds(f64::INFINITY));
        assert!(Format::I4.holds(-8.0) && !Format::I4.holds(8.0) && !Format::I4.holds(2.5));
        assert!(!Format::F4E2M1.holds(f64::NAN) && Format::F8E8M0.holds(0.125));
    }

    #[test]
    fn largest_values_are_the_spec_s() {
        assert_eq!(Format::F8E4M3FN.max(), 448.0);
        assert_eq!(Format::F8E4M3FNUZ.max(), 240.0);
        assert_eq!(Format::F8E5M2.max(), 57344.0);
        assert_eq!(Format::F8E5M2FNUZ.max(), 57344.0);
        assert_eq!(Format::F4E2M1.max(), 6.0);
    }

    #[test]
    fn nan_and_infinity_codes() {
        assert!(Format::F8E4M3FN.decode(0x7F).is_nan());
        assert_eq!(Format::F8E4M3FN.decode(0x7E), 448.0);
        assert!(Format::F8E4M3FNUZ.decode(0x80).is_nan());
        assert_eq!(Format::F8E5M2.decode(0x7C), f64::INFINITY);
        assert!(Format::F8E5M2.decode(0x7D).is_nan());
        assert_eq!(Format::F8E8M0.decode(127), 1.0);
        assert_eq!(Format::I4.decode(0xF), -1.0);
        assert_eq!(Format::I2.decode(0b10), -2.0);
    }

    #[test]
    fn casts_saturate_or_overflow_as_the_tables_say() {
        let c = |f: Format, x: f64, s: bool| f.cast(x, s, E8m0Round::Up);
        assert_eq!(c(Format::F8E4M3FN, 463.0, false), 448.0);
        // The spec rounds first: 464 ties to 448's even mantissa (as ONNX Runtime does; ml_dtypes says NaN).
        assert_eq!(c(Format::F8E4M3FN, 464.0, false), 448.0);
        assert!(c(Format::F8E4M3FN, 465.0, false).is_nan());
        assert_eq!(c(Format::F8E4M3FN, 1e6, true), 448.0);
        assert_eq!(c(Format::F8E5M2, 61440.0, false), f64::INFINITY);
        assert_eq!(c(Format::F8E5M2, f64::NEG_INFINITY, true), -57344.0);
        assert_eq!(c(Format::F8E4M3FNUZ, 0.47892547, true), 0.46875);
        assert!(c(Format::F8E4M3FNUZ, -1e-7, true).is_sign_positive());
        assert!(c(Format::F8E4M3FN, -1e-7, true).is_sign_negative());
        assert_eq!(c(Format::F4E2M1, -3.5, true), -4.0);
        assert_eq!(c(Format::F4E2M1, 0.25, true), 0.0);
    }

    #[test]
    fn integer_casts_round_and_wrap_as_onnx_runtime_and_quantization_saturates() {
        // ONNX Runtime 1.31.1's CPU Cast to int4 of these inputs: -4 7 7 -4 -3 -1 1 3 4 -7 4 0.
        let x = [
            -20.0,
            -9.0,
            -8.5,
            -3.7,
            -2.5,
            -0.5,
            0.5,
            2.5,
            3.7,
            9.0,
            20.0,
            f64::NAN,
        ];
        let ort = [
            -4.0, 7.0, 7.0, -4.0, -3.0, -1.0, 1.0, 3.0, 4.0, -7.0, 4.0, 0.0,
        ];
        for (x, want) in x.iter().zip(ort) {
            assert_eq!(Format::I4.cast(*x, true, E8m0Round::Up), want, "{x}");
        }
        // uint4 and uint2 (ONNX Runtime: 12 13 15 and 0 1 3).
        assert_eq!(Format::U4.cast(-3.7, true, E8m0Round::Up), 12.0);
        assert_eq!(Format::U4.cast(-0.5, true, E8m0Round::Up), 15.0);
        assert_eq!(Format::U2.cast(-2.5, true, E8m0Round::Up), 1.0);
        assert_eq!(Format::I4.cast(-9.0, true, E8m0Round::Up), 7.0);
        assert_eq!(Format::I4.cast(8.0, true, E8m0Round::Up), -8.0);
        assert_eq!(Format::U2.cast(-3.0, true, E8m0Round::Up), 1.0);
        assert_eq!(Format::I4.quantize(9.5, true), 7.0);
        assert_eq!(Format::U4.quantize(2.5, true), 2.0);
    }

    #[test]
    fn e8m0_rounds_up_by_default_and_holds_zero_as_its_least_value() {
        let c = |x: f64| Format::F8E8M0.cast(x, true, E8m0Round::Up);
        assert_eq!(c(1.1), 2.0);
        assert_eq!(c(0.124), 0.125);
        assert_eq!(c(0.0), 2f64.powi(-127));
    }

    #[test]
    fn packed_codes_are_read_lowest_bits_first() {
        assert_eq!(Format::I4.unpack(&[0x21, 0x03], 3), Some(vec![1, 2, 3]));
        assert_eq!(Format::U2.unpack(&[0b1110_0100], 4), Some(vec![0, 1, 2, 3]));
        assert_eq!(Format::I4.unpack(&[0x21], 3), None);
    }
}
