//! Expected noise and introduced error of one value, from tensors the pipeline holds: the reference `r` (f64),
//! the ideal low-precision run `e` (every value rounded to the target's element type, computed in f64 from
//! there) and the isolated target node `t_iso` (fed with the reference's inputs).

use crate::compare::{Tolerance, ToleranceSpec};
use crate::report::model::{Introduced, Noise, ValueReport, ValueStatus};
use crate::runner::reference::kernels::round_one;
use crate::tensor::{DType, Tensor};

/// An error within this multiple of the expected noise counts as rounding when the noise itself meets the
/// tolerance.
pub const NOISE_FACTOR: f64 = 8.0;

/// Noise of the ideal run `e` against `r` under the value's tolerance.
pub fn noise(r: &Tensor, e: &Tensor, tol: Tolerance, scale: f64) -> Option<Noise> {
    if r.len() != e.len() || !e.dtype().is_float() {
        return None;
    }
    let (ra, ea) = (r.to_f64_array(), e.to_f64_array());
    let (mut max_abs, mut sq, mut n, mut used, mut nonfinite) = (0f64, 0f64, 0u64, 0f64, 0u64);
    for (&rv, &ev) in ra.iter().zip(ea.iter()) {
        if !(rv.is_finite() && ev.is_finite()) {
            nonfinite += (rv.is_finite() && !ev.is_finite()) as u64;
            continue;
        }
        let d = (ev - rv).abs();
        max_abs = max_abs.max(d);
        sq += d * d;
        n += 1;
        let allowed = tol.atol + tol.rtol * rv.abs().max(scale);
        used = used.max(if allowed > 0.0 { d / allowed } else { 0.0 });
    }
    Some(Noise {
        max_abs,
        rms: if n > 0 { (sq / n as f64).sqrt() } else { 0.0 },
        tolerance_used: used,
        nonfinite,
        ratio: None,
        excused: false,
    })
}

/// Attaches `noise` to a compared value; with default tolerances, a failure the noise explains passes.
pub fn apply_noise(v: &mut ValueReport, mut noise: Noise, spec: &ToleranceSpec) {
    let Some(m) = v.metrics.as_ref() else {
        v.noise = Some(noise);
        return;
    };
    noise.ratio = (noise.max_abs > 0.0).then(|| m.max_abs / noise.max_abs);
    let defaults = spec.atol.is_none() && spec.rtol.is_none();
    if defaults
        && v.status == ValueStatus::Fail
        && m.nonfinite_mismatch == 0
        && noise.nonfinite == 0
        && noise.tolerance_used <= 1.0
        && m.max_abs <= NOISE_FACTOR * noise.max_abs
    {
        noise.excused = true;
        v.status = ValueStatus::Pass;
        v.reason = Some(format!(
            "beyond the {} tolerance but within {NOISE_FACTOR}× the expected rounding noise",
            v.target_dtype.map(|d| d.name()).unwrap_or("dtype")
        ));
    }
    v.noise = Some(noise);
}

/// The introduced error of a value: `iso` (the isolated target node's output) against `r`, where `stored` is the
/// element type the target keeps this value in.
pub fn introduced(iso: &ValueReport, r: &Tensor, stored: Option<DType>) -> Option<Introduced> {
    let metrics = iso.metrics.clone()?;
    let expected = match stored {
        Some(d) if r.dtype().is_float() => r
            .to_f64_array()
            .iter()
            .filter(|v| v.is_finite())
            .map(|&v| (round_one(v, d) - v).abs())
            .filter(|d| d.is_finite())
            .fold(0.0, f64::max),
        _ => 0.0,
    };
    Some(Introduced {
        status: iso.status,
        ratio: (expected > 0.0).then(|| metrics.max_abs / expected),
        metrics,
        expected,
    })
}
