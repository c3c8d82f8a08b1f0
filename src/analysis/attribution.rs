//! Expected noise and introduced error of one value, from tensors the pipeline holds: the reference `r` (f64),
//! the ideal low-precision run `e` (every value rounded to the target's element type, computed in f64 from
//! there) and the isolated target node `t_iso` (fed with the reference's inputs).

use crate::compare::{Tolerance, ToleranceSpec};
use crate::report::model::{Introduced, Noise, ValueReport, ValueStatus};
use crate::runner::reference::kernels::round_one;
use rayon::prelude::*;

use crate::tensor::{DType, Tensor, ToF64};

/// An error within this multiple of the expected noise counts as rounding when the noise itself meets the
/// tolerance.
pub const NOISE_FACTOR: f64 = 8.0;

/// Noise of the ideal run `e` against `r` under the value's tolerance.
pub fn noise(r: &Tensor, e: &Tensor, tol: Tolerance, scale: f64) -> Option<Noise> {
    if r.len() != e.len() || !e.dtype().is_float() {
        return None;
    }
    let ra = r.as_f64();
    let ra = ra.as_standard_layout();
    let rs = ra.as_slice()?;
    let p = crate::dispatch_tensor!(e, a => {
        let ea = a.as_standard_layout();
        noise_pass(rs, ea.as_slice()?, tol, scale)
    });
    Some(Noise {
        max_abs: p.max_abs,
        rms: if p.n > 0 {
            (p.sq / p.n as f64).sqrt()
        } else {
            0.0
        },
        tolerance_used: p.used,
        nonfinite: p.nonfinite,
        ratio: None,
        excused: false,
    })
}

#[derive(Clone, Copy, Default)]
struct NoisePass {
    max_abs: f64,
    sq: f64,
    n: u64,
    used: f64,
    nonfinite: u64,
}

/// The noise sums of `e` against `r`, in parallel over chunks.
fn noise_pass<T: ToF64 + Sync>(r: &[f64], e: &[T], tol: Tolerance, scale: f64) -> NoisePass {
    const CHUNK: usize = 1 << 16;
    r.par_chunks(CHUNK)
        .zip(e.par_chunks(CHUNK))
        .map(|(rc, ec)| {
            let mut p = NoisePass::default();
            for (&rv, ev) in rc.iter().zip(ec) {
                let ev = ev.to_f64();
                if !(rv.is_finite() && ev.is_finite()) {
                    p.nonfinite += (rv.is_finite() && !ev.is_finite()) as u64;
                    continue;
                }
                let d = (ev - rv).abs();
                p.max_abs = p.max_abs.max(d);
                p.sq += d * d;
                p.n += 1;
                let allowed = tol.atol + tol.rtol * rv.abs().max(scale);
                p.used = p.used.max(if allowed > 0.0 { d / allowed } else { 0.0 });
            }
            p
        })
        .reduce(NoisePass::default, |a, b| NoisePass {
            max_abs: a.max_abs.max(b.max_abs),
            sq: a.sq + b.sq,
            n: a.n + b.n,
            used: a.used.max(b.used),
            nonfinite: a.nonfinite + b.nonfinite,
        })
}

/// Measures the expected noise of `v` (the reference `r` against the reference rerun with the target's rounding,
/// `e`) and applies it to its report: what correct rounding alone would give, and whether that explains a failure.
pub fn with_noise(v: &mut ValueReport, r: &Tensor, e: Option<Tensor>, spec: &ToleranceSpec) {
    let (Some(e), Some(tol), Some(scale)) = (e, v.tolerance, v.metrics.as_ref().map(|m| m.scale))
    else {
        return;
    };
    if let Some(n) = noise(r, &e, tol, scale) {
        apply_noise(v, n, spec);
    }
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
        Some(d) if r.dtype().is_float() => {
            let ra = r.as_f64();
            let ra = ra.as_standard_layout();
            ra.as_slice()?
                .par_chunks(1 << 14)
                .map(|c| {
                    c.iter()
                        .filter(|v| v.is_finite())
                        .map(|&v| (round_one(v, d) - v).abs())
                        .filter(|d| d.is_finite())
                        .fold(0.0, f64::max)
                })
                .reduce(|| 0.0, f64::max)
        }
        _ => 0.0,
    };
    Some(Introduced {
        status: iso.status,
        ratio: (expected > 0.0).then(|| metrics.max_abs / expected),
        metrics,
        expected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{Metrics, Tolerance};
    use crate::tensor::DType;

    fn failing(max_abs: f64) -> ValueReport {
        ValueReport {
            name: "v".into(),
            status: ValueStatus::Fail,
            reason: None,
            shape: vec![4],
            target_dtype: Some(DType::F16),
            tolerance: Some(Tolerance {
                atol: 1e-2,
                rtol: 1e-2,
            }),
            metrics: Some(Metrics {
                max_abs,
                ..Default::default()
            }),
            reference_stats: None,
            target_stats: None,
            worst: None,
            detail: None,
            noise: None,
            introduced: None,
            is_output: false,
            sample: None,
            adopted: None,
        }
    }

    fn noise(max_abs: f64, used: f64) -> Noise {
        Noise {
            max_abs,
            rms: max_abs,
            tolerance_used: used,
            nonfinite: 0,
            ratio: None,
            excused: false,
        }
    }

    #[test]
    fn noise_excuses_only_errors_near_an_acceptable_noise() {
        let defaults = ToleranceSpec::default();
        // 5× a noise that meets the tolerance: expected rounding.
        let mut v = failing(0.05);
        apply_noise(&mut v, noise(0.01, 0.9), &defaults);
        assert_eq!(v.status, ValueStatus::Pass);
        assert!(v.noise.as_ref().unwrap().excused);
        assert_eq!(v.noise.as_ref().unwrap().ratio, Some(5.0));
        // 20× the noise: drift.
        let mut v = failing(0.2);
        apply_noise(&mut v, noise(0.01, 0.9), &defaults);
        assert_eq!(v.status, ValueStatus::Fail);
        // The noise itself fails the tolerance: the precision is too coarse, not excused.
        let mut v = failing(0.05);
        apply_noise(&mut v, noise(0.04, 1.5), &defaults);
        assert_eq!(v.status, ValueStatus::Fail);
        // Explicit tolerances are never relaxed.
        let mut v = failing(0.05);
        let explicit = ToleranceSpec {
            atol: Some(1e-2),
            ..Default::default()
        };
        apply_noise(&mut v, noise(0.01, 0.9), &explicit);
        assert_eq!(v.status, ValueStatus::Fail);
    }

    #[test]
    fn introduced_error_is_measured_against_correct_rounding() {
        let r = Tensor::F64(ndarray::ArrayD::from_shape_vec(vec![2], vec![1.0, 1000.3]).unwrap());
        let mut iso = failing(0.5);
        iso.status = ValueStatus::Pass;
        let i = introduced(&iso, &r, Some(DType::F16)).unwrap();
        // 1000.3 rounds to 1000.5 in fp16 (spacing 0.5 there): 0.2 is the error of correct rounding.
        assert!((i.expected - 0.2).abs() < 1e-9, "{}", i.expected);
        assert!((i.ratio.unwrap() - 2.5).abs() < 1e-9);
    }
}
