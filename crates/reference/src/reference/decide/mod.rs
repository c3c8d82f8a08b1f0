//! Discrete decisions the reference adopts from the target. A float rounded to an integer (a float-to-integer
//! `Cast`, `Floor`, `Ceil`, `Round`), quantized (`QuantizeLinear`, a QDQ pair) or quantized with parameters it
//! decides itself (`DynamicQuantizeLinear`) moves by a whole step when its input crosses a boundary. Where the
//! target's decision differs from the reference's only at elements whose input, moved by no more than its noise (a
//! few dozen units in the last place of the target's type), crosses one boundary to the target's decision, the
//! reference takes it there: everything downstream is then compared like for like, and the flips are counted on the
//! node instead of read as drift. Flips beyond the input's noise, and decisions whose noise spans more than one
//! step, are kept, so a fault or a decision the precision cannot resolve is still compared and caught. A conversion
//! ONNX leaves undefined (NaN, ±inf or out of the integer type's range) takes the target's value and is counted,
//! never compared as a number.

use std::collections::HashMap;
use std::sync::Arc;

use crate::tensor::formats::Format;
use tract_onnx::prelude::*;

mod dynamic;
mod measured;
mod pairs;
mod ties;
pub use dynamic::adopt_dynamic;
pub use measured::Measured;
pub use pairs::{adopt_pair, adopt_paired_quantize, faithful, faithful_levels, paired_quantize};
pub use ties::{flip as flip_ties, Ties, TIES_FLIPPED};

/// The target's decision on one value, and the noise of the float the decision rounds (its first input): a fixed
/// window (`atol` + `rtol` · max(|x|, RMS of x)) that widens to the noise measured on the input when one is.
#[derive(Clone)]
pub struct Decision {
    pub target: Kept,
    pub atol: f64,
    pub rtol: f64,
    /// The value the decision is taken on, and the noise measured on it as the run goes.
    measured: Option<(String, Arc<Measured>)>,
}

/// Where the target's decision waits for its node: in memory, or on disk in a bounded run (read back when the node
/// runs, so a model's decisions need not fit the memory budget).
#[derive(Clone)]
pub enum Kept {
    Memory(Arc<crate::tensor::Tensor>),
    Disk(Arc<crate::spill::Spill>, String),
}

impl Decision {
    /// The target's decision with a fixed noise window.
    pub fn new(target: Kept, atol: f64, rtol: f64) -> Decision {
        Decision {
            target,
            atol,
            rtol,
            measured: None,
        }
    }

    /// The same decision, its window widened to the noise `measured` records on its input `input`.
    pub fn measured_on(&self, input: &str, measured: &Arc<Measured>) -> Decision {
        Decision {
            measured: Some((input.to_string(), measured.clone())),
            ..self.clone()
        }
    }

    /// The absolute part of the window: the fixed `atol`, or [`Measured::FACTOR`] times the noise measured on the
    /// input when that is larger.
    pub fn noise_atol(&self) -> f64 {
        let measured = (self.measured.as_ref()).and_then(|(input, m)| m.get(input));
        measured.map_or(self.atol, |(n, _)| self.atol.max(Measured::FACTOR * n))
    }

    /// Whether the measured noise widened the window beyond the fixed one at its input's typical element (one of
    /// its RMS): flips adopted there may lie beyond what the expected-noise run, which keeps the fixed windows,
    /// adopts.
    pub fn widened(&self) -> bool {
        let measured = (self.measured.as_ref()).and_then(|(input, m)| m.get(input));
        measured.is_some_and(|(n, rms)| Measured::FACTOR * n > self.atol + self.rtol * rms)
    }

    /// The target's decision: borrowed from memory or read back from disk (`None` when that read fails, which the
    /// store says on stderr: the decision is then not adopted).
    pub fn target(&self) -> Option<std::borrow::Cow<'_, crate::tensor::Tensor>> {
        match &self.target {
            Kept::Memory(t) => Some(std::borrow::Cow::Borrowed(&**t)),
            Kept::Disk(spill, name) => spill.get(name).map(std::borrow::Cow::Owned),
        }
    }

    /// The target's decision as f64, shaped.
    pub fn theirs(&self) -> Option<tract_ndarray::ArrayD<f64>> {
        self.target().map(|t| t.to_f64_array())
    }
}

/// The target's decisions by ONNX value name.
pub type Decisions = HashMap<String, Decision>;

pub use phantom_engine::computed::Adopted;

/// Fractions of the input's noise tried in turn, so the report says how close to a boundary the flips lay.
pub const LADDER: [f64; 3] = [1.0 / 1024.0, 1.0 / 32.0, 1.0];

/// ONNX ops whose outputs are decisions (their first input is the float they round; a `DequantizeLinear` only as
/// the second half of a QDQ pair, see [`paired_quantize`]).
pub const OPS: &[&str] = &[
    "Cast",
    "Floor",
    "Ceil",
    "Round",
    "QuantizeLinear",
    "DynamicQuantizeLinear",
    "DequantizeLinear",
];

/// The reference's decision `ours` reconciled with the target's `theirs`: at each element that differs, `bounds(f)`
/// gives the decisions at the input moved down and up by `f` of its noise; `undefined(i)` says element `i`'s
/// conversion is undefined. Returns the reconciled decisions, or `None` when nothing differs.
pub fn settle(
    ours: &[f64],
    theirs: &[f64],
    bounds: impl FnMut(f64) -> Option<(Vec<f64>, Vec<f64>)>,
    undefined: impl Fn(usize) -> bool,
) -> Option<(Vec<f64>, Adopted)> {
    settle_on(ours, theirs, bounds, undefined, |l, h| h - l <= 1.0)
}

/// [`settle`] for decisions on any grid: `adjacent(l, h)` says whether two decisions are at most one step apart
/// (for integers, `h − l ≤ 1`; for a narrow float format, [`Format::adjacent`]).
pub fn settle_on(
    ours: &[f64],
    theirs: &[f64],
    mut bounds: impl FnMut(f64) -> Option<(Vec<f64>, Vec<f64>)>,
    undefined: impl Fn(usize) -> bool,
    adjacent: impl Fn(f64, f64) -> bool,
) -> Option<(Vec<f64>, Adopted)> {
    let differ = |a: f64, b: f64| a != b && !(a.is_nan() && b.is_nan());
    let mut open: Vec<usize> = (0..ours.len())
        .filter(|&i| differ(ours[i], theirs[i]))
        .collect();
    if open.is_empty() {
        return None;
    }
    let mut out = ours.to_vec();
    let mut a = Adopted::default();
    open.retain(|&i| match undefined(i) {
        true => {
            out[i] = theirs[i];
            a.undefined += 1;
            false
        }
        false => true,
    });
    for f in LADDER {
        if open.is_empty() {
            break;
        }
        let Some((lo, hi)) = bounds(f) else { break };
        open.retain(|&i| {
            let (l, h) = (lo[i].min(hi[i]), lo[i].max(hi[i]));
            // Near exactly one boundary: noise that spans more than one step leaves the decision unresolved at this
            // precision (fp16 index arithmetic), a finding of its own, not a flip to adopt.
            let reached = (l..=h).contains(&theirs[i]) && adjacent(l, h);
            if reached {
                out[i] = theirs[i];
                a.flips += 1;
                a.within = a.within.max(f);
            }
            !reached
        });
    }
    a.beyond = open.len() as u64;
    Some((out, a))
}

/// The RMS of the finite elements of `x` (0 when there are none).
pub fn rms(x: &[f64]) -> f64 {
    let (sum, n) = x
        .iter()
        .filter(|v| v.is_finite())
        .fold((0.0, 0usize), |(s, n), v| (s + v * v, n + 1));
    match n {
        0 => 0.0,
        n => (sum / n as f64).sqrt(),
    }
}

/// Per-element radius: the noise of each element of `x` (atol + rtol · max(|x|, RMS of x)).
pub fn radius(x: &[f64], atol: f64, rtol: f64) -> Vec<f64> {
    let rms = rms(x);
    x.iter().map(|v| atol + rtol * v.abs().max(rms)).collect()
}

/// `x` moved by `sign · f · r`, elementwise.
pub fn moved(x: &[f64], r: &[f64], f: f64, sign: f64) -> Vec<f64> {
    x.iter().zip(r).map(|(v, d)| v + sign * f * d).collect()
}

/// Whether converting `x` to the integer type `dt` is undefined in ONNX (NaN, ±inf, beyond the type's range).
pub fn undefined_to(x: f64, dt: DatumType) -> bool {
    if !x.is_finite() {
        return true;
    }
    let t = x.trunc();
    let (lo, hi) = match dt {
        DatumType::I8 => (i8::MIN as f64, i8::MAX as f64),
        DatumType::I16 => (i16::MIN as f64, i16::MAX as f64),
        DatumType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DatumType::I64 | DatumType::TDim => (i64::MIN as f64, i64::MAX as f64),
        DatumType::U8 => (0.0, u8::MAX as f64),
        DatumType::U16 => (0.0, u16::MAX as f64),
        DatumType::U32 => (0.0, u32::MAX as f64),
        DatumType::U64 => (0.0, u64::MAX as f64),
        _ => return false,
    };
    t < lo || t > hi
}

/// A tract value's elements as f64, in row-major order.
pub fn f64s(v: &TValue) -> Option<Vec<f64>> {
    if v.datum_type() == DatumType::TDim {
        // Through i64: tract's TDim → f64 cast narrows to 32 bits.
        let t = v.cast_to::<i64>().ok()?;
        return Some(
            t.to_plain_array_view::<i64>()
                .ok()?
                .iter()
                .map(|&i| i as f64)
                .collect(),
        );
    }
    let t = v.cast_to::<f64>().ok()?;
    Some(
        t.to_plain_array_view::<f64>()
            .ok()?
            .iter()
            .copied()
            .collect(),
    )
}

/// `values` shaped like `like` and in its element type.
pub fn shaped_like(like: &TValue, values: Vec<f64>) -> TractResult<TValue> {
    let t = match like.datum_type() {
        // Integers go through i64 (tract's f64 → TDim cast narrows to 32 bits).
        DatumType::TDim | DatumType::I64 => {
            let ints: Vec<i64> = values.iter().map(|&v| v as i64).collect();
            tract_ndarray::ArrayD::from_shape_vec(like.shape(), ints)?.into_tensor()
        }
        _ => tract_ndarray::ArrayD::from_shape_vec(like.shape(), values)?.into_tensor(),
    };
    Ok(t.cast_to_dt(like.datum_type())?.into_owned().into_tvalue())
}

/// Reconciles the outputs of a node whose decisions are monotone in its first input (a float-to-integer `Cast`,
/// `Floor`, `Ceil`, `Round`, `QuantizeLinear`, and a `Cast` or `QuantizeLinear` onto a narrow float format, whose
/// `grid` it is): `run` evaluates the node on moved inputs. `cast` marks a `Cast`, whose out-of-range conversions
/// to integers are undefined (the others saturate). Returns what was adopted, by value name.
pub fn adopt_monotone(
    d: &Decisions,
    names: &[(usize, String)],
    (ins, cast, grid): (&TVec<TValue>, bool, Option<Format>),
    out: &mut TVec<TValue>,
    mut run: impl FnMut(TVec<TValue>) -> TractResult<TVec<TValue>>,
) -> Vec<(String, Adopted)> {
    let Some(x0) = ins.first().filter(|v| v.datum_type() == f64::datum_type()) else {
        return vec![];
    };
    let Some(x) = f64s(x0) else { return vec![] };
    let mut found = vec![];
    for (slot, name) in names {
        let (Some(dec), Some(o)) = (d.get(name), out.get(*slot)) else {
            continue;
        };
        let (Some(ours), theirs) = (f64s(o), target_f64s(dec)) else {
            continue;
        };
        if ours.len() != x.len() || theirs.len() != x.len() {
            continue;
        }
        let dt = o.datum_type();
        let narrow_float = grid.is_some_and(Format::is_float);
        if cast && !(dt.is_integer() || dt == DatumType::TDim || narrow_float) {
            continue;
        }
        // The noise only where something differs (most decisions agree everywhere).
        let mut noise: Option<Vec<f64>> = None;
        let bounds = |f: f64| {
            let r = &*noise.get_or_insert_with(|| radius(&x, dec.noise_atol(), dec.rtol));
            let mut at = |s: f64| {
                let xs = moved(&x, r, f, s);
                let mut moved_ins = ins.clone();
                moved_ins[0] = shaped_like(x0, xs).ok()?;
                f64s(run(moved_ins).ok()?.get(*slot)?)
            };
            Some((at(-1.0)?, at(1.0)?))
        };
        let undefined =
            |i: usize| x[i].is_nan() || (cast && !narrow_float && undefined_to(x[i], dt));
        let adjacent = |l: f64, h: f64| match grid {
            Some(f) => f.adjacent(l, h),
            None => h - l <= 1.0,
        };
        match settle_on(&ours, &theirs, bounds, undefined, adjacent) {
            Some((v, a)) => {
                if let Ok(t) = shaped_like(o, v) {
                    out[*slot] = t;
                    found.push((name.clone(), a));
                }
            }
            // Judged as a decision, nothing to adopt.
            None => found.push((name.clone(), Adopted::default())),
        }
    }
    found
}

/// The target's decision as f64, in row-major order.
pub fn target_f64s(d: &Decision) -> Vec<f64> {
    d.theirs()
        .map_or_else(Vec::new, |a| a.iter().copied().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trunc_bounds(x: &[f64], r: &[f64], f: f64) -> Option<(Vec<f64>, Vec<f64>)> {
        let at = |s: f64| moved(x, r, f, s).iter().map(|v| v.trunc()).collect();
        Some((at(-1.0), at(1.0)))
    }

    /// Exact levels 88.70 and 12.10: a target at 88 (truncated) or 13 is the other neighbour, taken; 86 is two
    /// quanta away, kept.
    #[test]
    fn a_faithful_rounding_is_taken_and_a_level_further_away_is_kept() {
        let exact = [88.70, 12.10, 40.2];
        let mut taken = vec![89.0, 12.0, 40.0];
        let theirs = [88.0, 13.0, 38.0];
        let mut a = Adopted {
            beyond: 3,
            ..Default::default()
        };
        faithful(&mut taken, &theirs, |i| exact[i], &mut a);
        assert_eq!(taken, [88.0, 13.0, 40.0]);
        assert_eq!((a.faithful, a.beyond), (2, 1));
    }

    #[test]
    fn a_flip_within_noise_is_adopted_and_one_beyond_is_kept() {
        // 2.9999999 truncates to 2 in f64; the target (its input one fp32 spacing up) said 3: adopted.
        // 5.4 truncates to 5; a target saying 6 is beyond any rounding: kept.
        let x: [f64; 3] = [2.9999999, 5.4, 1.2];
        let ours: Vec<f64> = x.iter().map(|v| v.trunc()).collect();
        let theirs = [3.0, 6.0, 1.0];
        let r = radius(&x, 1e-4, 1e-3);
        let (out, a) = settle(&ours, &theirs, |f| trunc_bounds(&x, &r, f), |_| false).unwrap();
        assert_eq!(out, vec![3.0, 5.0, 1.0]);
        assert_eq!((a.flips, a.beyond, a.undefined), (1, 1, 0));
        assert_eq!(a.within, 1.0 / 1024.0);
    }

    #[test]
    fn nothing_differs_nothing_is_adopted() {
        let x = [1.5, 2.5];
        let ours = [1.0, 2.0];
        assert!(settle(&ours, &ours, |_| None, |_| false).is_none());
        let _ = x;
    }

    #[test]
    fn undefined_conversions_take_the_target_s_value() {
        let x = [f64::NEG_INFINITY, 1.0];
        let ours = [0.0, 1.0];
        let theirs = [i64::MIN as f64, 1.0];
        let (out, a) = settle(
            &ours,
            &theirs,
            |_| None,
            |i| undefined_to(x[i], DatumType::I64),
        )
        .unwrap();
        assert_eq!(out[0], i64::MIN as f64);
        assert_eq!((a.flips, a.undefined, a.beyond), (0, 1, 0));
        assert!(undefined_to(300.0, DatumType::U8) && !undefined_to(255.9, DatumType::U8));
    }
}
