//! Named tolerances: an element fails when |target − ref| > atol + rtol·max(|ref|, scale), where `scale` is the
//! RMS of the reference tensor. The scale floor matters for accumulations: a dot product whose terms are large but
//! cancel to near zero carries an absolute rounding error proportional to its terms, not to its result, so
//! judging such elements by their own tiny magnitude raises false alarms. Defaults depend on the target's element
//! type; integers and booleans must match exactly.

use serde::Serialize;

use super::scales::{judged_dtype, Scaling};
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

    /// One step of a narrow float format's grid (float8, float4): a value stored in it is correctly rounded when it
    /// is either grid value around the exact one, up to one step away. `None` for the integer formats, which compare
    /// exactly.
    pub fn on_grid(f: crate::tensor::formats::Format) -> Option<Tolerance> {
        let (rtol, atol) = f.grid_step()?;
        Some(Tolerance {
            atol,
            rtol,
            floor: 0.0,
        })
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

/// How one value is judged: the rule every comparison (against f64, between targets, between dumps) takes from
/// [`ToleranceSpec::resolve`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resolved {
    /// The precision the value is judged in (coarser than its own type when its operands were).
    pub judged: DType,
    /// The tolerance, with the floor of a value that only copies elements.
    pub tolerance: Tolerance,
    /// The operands' RMS that caps `atol` ([`Tolerance::scaled`]); `None` with an explicit `--atol`, which is
    /// taken as given, and for values that come without a graph (tensor dumps).
    pub operands: Option<f64>,
}

impl ToleranceSpec {
    /// The rule for a value of `dtype`, scaled as `scaling` says ([`crate::compare::scales`]); `None` for values
    /// that come without a graph (tensor dumps): judged in their own type, no operand scaling.
    pub fn resolve(&self, dtype: DType, scaling: Option<Scaling>) -> Resolved {
        let Some(s) = scaling else {
            return Resolved {
                judged: dtype,
                tolerance: self.for_dtype(dtype),
                operands: None,
            };
        };
        if let (Some(grid), true) = (s.grid.and_then(Tolerance::on_grid), self.is_default()) {
            return Resolved {
                judged: dtype,
                tolerance: grid.with_floor(s.floor),
                operands: None,
            };
        }
        let judged = judged_dtype(dtype, s.source);
        Resolved {
            judged,
            tolerance: self.for_dtype(judged).with_floor(s.floor),
            operands: self.atol.is_none().then_some(s.operands),
        }
    }

    /// True when neither tolerance was given: only then may the expected noise excuse a failure.
    pub fn is_default(&self) -> bool {
        self.atol.is_none() && self.rtol.is_none()
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_float8_value_may_sit_one_step_of_its_grid_away_and_no_more() {
        use crate::tensor::formats::Format;
        let t = Tolerance::on_grid(Format::F8E4M3FN).unwrap();
        assert!(t.accepts(1.125, 1.0, 0.0), "one step (1/8 in [1, 2))");
        assert!(!t.accepts(1.25, 1.0, 0.0), "two steps");
        assert!(
            t.accepts(2f64.powi(-9), 0.0, 0.0),
            "the smallest subnormal step"
        );
        assert!(
            Tolerance::on_grid(Format::I4).is_none(),
            "integers compare exactly"
        );
        let spec = ToleranceSpec::default();
        let grid = Scaling {
            grid: Some(Format::F8E5M2),
            ..Default::default()
        };
        assert_eq!(spec.resolve(DType::F32, Some(grid)).tolerance.rtol, 0.25);
        let given = ToleranceSpec {
            rtol: Some(1e-3),
            ..Default::default()
        };
        assert_eq!(
            given.resolve(DType::F32, Some(grid)).tolerance.rtol,
            1e-3,
            "given, taken as given"
        );
    }

    #[test]
    fn one_rule_resolves_every_comparison() {
        let scaling = Scaling {
            operands: 3.0,
            floor: 2.0,
            source: Some(DType::F16),
            grid: None,
            rms: None,
        };
        let defaults = ToleranceSpec::default();
        let r = defaults.resolve(DType::F32, Some(scaling));
        assert_eq!(
            r.judged,
            DType::F16,
            "judged in the precision it comes from"
        );
        assert_eq!(
            r.tolerance,
            Tolerance::default_for(DType::F16).with_floor(2.0)
        );
        assert_eq!(r.operands, Some(3.0), "defaults are capped by the operands");
        let explicit = ToleranceSpec {
            atol: Some(0.5),
            ..Default::default()
        };
        let r = explicit.resolve(DType::F32, Some(scaling));
        assert_eq!(
            (r.tolerance.atol, r.operands),
            (0.5, None),
            "--atol is taken as given"
        );
        let dumps = defaults.resolve(DType::F32, None);
        assert_eq!(
            (dumps.judged, dumps.tolerance, dumps.operands),
            (DType::F32, Tolerance::default_for(DType::F32), None)
        );
        assert!(defaults.is_default() && !explicit.is_default());
    }
}
