//! Named tolerances: an element fails when |target − ref| > atol + rtol·max(|ref|, scale), where `scale` is the
//! RMS of the reference tensor. The scale floor matters for accumulations: a dot product whose terms are large but
//! cancel to near zero carries an absolute rounding error proportional to its terms, not to its result, so
//! judging such elements by their own tiny magnitude raises false alarms. Defaults depend on the target's element
//! type; integers and booleans must match exactly.

use serde::Serialize;

use crate::tensor::DType;

/// Absolute and relative tolerance for one value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
    /// A floor under the `scale`, for a value that only copies elements (Reshape, Concat, Slice...): the largest
    /// scale its sources were judged with, so moving an element never makes it fail ([`crate::compare::scales`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub floor: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Tolerance {
    /// Default for a value the target computed in `dtype`. Float defaults allow the rounding a correct
    /// implementation accumulates through deep graphs (a few hundred ulp of the type), so fp32 ORT against the
    /// f64 reference raises no false alarms on real models.
    pub fn default_for(dtype: DType) -> Tolerance {
        match dtype {
            DType::F64 => Tolerance {
                atol: 1e-9,
                rtol: 1e-9,
                floor: 0.0,
            },
            DType::F32 => Tolerance {
                atol: 1e-4,
                rtol: 1e-3,
                floor: 0.0,
            },
            DType::F16 => Tolerance {
                atol: 1e-2,
                rtol: 1e-2,
                floor: 0.0,
            },
            DType::Bf16 => Tolerance {
                atol: 5e-2,
                rtol: 5e-2,
                floor: 0.0,
            },
            _ => Tolerance {
                atol: 0.0,
                rtol: 0.0,
                floor: 0.0,
            },
        }
    }

    /// This tolerance for a tensor of RMS `scale` computed from operands of RMS at most `operands`: `atol` capped at
    /// `rtol × max(scale, operands)` (never below a millionth of `atol`), so an absolute tolerance cannot swallow a
    /// tensor much smaller than it (see [`crate::compare::scales`]).
    pub fn scaled(self, scale: f64, operands: f64) -> Tolerance {
        let cap = self.rtol * self.scale(scale).max(operands);
        Tolerance {
            atol: self.atol.min(cap.max(self.atol * 1e-6)),
            ..self
        }
    }

    /// This tolerance with `floor` under the scale (see [`Tolerance::floor`]).
    pub fn with_floor(self, floor: f64) -> Tolerance {
        Tolerance { floor, ..self }
    }

    /// The scale the test uses for a tensor of RMS `rms`: the larger of it and the floor.
    #[inline]
    pub fn scale(&self, rms: f64) -> f64 {
        rms.max(self.floor)
    }

    /// True when `t` is within tolerance of `r` for a tensor of RMS `scale` (NaN matches NaN, infinities match
    /// when equal).
    #[inline]
    pub fn accepts(&self, r: f64, t: f64, scale: f64) -> bool {
        if r.is_nan() || t.is_nan() {
            return r.is_nan() && t.is_nan();
        }
        if r.is_infinite() || t.is_infinite() {
            return r == t;
        }
        (t - r).abs() <= self.atol + self.rtol * r.abs().max(self.scale(scale))
    }
}

/// Tolerances resolved from the command line: explicit values override the per-dtype defaults.
#[derive(Clone, Copy, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ToleranceSpec {
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    /// The precision the target computes in when lower than the values' element type (a float16 model whose
    /// outputs are cast back to float32): float values get this type's default tolerance.
    pub computed_in: Option<DType>,
}

impl ToleranceSpec {
    /// Tolerance for a value of `dtype`; integer and boolean values always compare exactly.
    pub fn for_dtype(&self, dtype: DType) -> Tolerance {
        if !dtype.is_float() {
            return Tolerance::default_for(dtype);
        }
        let d = match self.computed_in {
            Some(low) if low.size() < dtype.size() => Tolerance::default_for(low),
            _ => Tolerance::default_for(dtype),
        };
        Tolerance {
            atol: self.atol.unwrap_or(d.atol),
            rtol: self.rtol.unwrap_or(d.rtol),
            floor: 0.0,
        }
    }
}
