//! Error metrics of a target value against the f64 reference, and activation statistics of both, in one
//! parallel pass without copying the target to f64.

use ndarray::ArrayD;
use serde::Serialize;

use super::detail::Spread;
use super::pass::{rms, run};
use super::Tolerance;
use crate::tensor::{Tensor, ToF64};

pub use super::ulp::ulp_distance;

/// Error metrics over all elements of one value.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Metrics {
    pub elements: u64,
    pub max_abs: f64,
    pub mean_abs: f64,
    /// max |t − r| / max(|r|, atol): the tolerance's atol is the floor that keeps near-zero elements finite.
    pub max_rel: f64,
    pub rmse: f64,
    /// Cosine similarity of the finite elements (1 when both are all zero).
    pub cosine: f64,
    /// 10·log10(Σr² / Σ(t−r)²); `None` when the values are identical.
    pub snr_db: Option<f64>,
    /// Largest distance in units in the last place of the target's element type, between the target and the
    /// reference rounded to that type.
    pub max_ulp: u64,
    /// RMS of the finite reference elements: the `scale` in the tolerance test.
    pub scale: f64,
    /// Largest |t − r| / (atol + rtol·max(|r|, scale)) over finite elements: how much of its tolerance the worst
    /// element uses (above 1 it fails).
    pub tolerance_used: f64,
    /// Elements with |t − r| > atol + rtol·max(|r|, scale) (NaN/Inf mismatches included).
    pub failed: u64,
    pub fail_fraction: f64,
    /// Elements where exactly one side is NaN, or the sides hold different infinities.
    pub nonfinite_mismatch: u64,
}

/// Activation statistics of one side.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Stats {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub std: f64,
    pub pct_zero: f64,
    pub pct_inf: f64,
    pub pct_nan: f64,
    pub nan: u64,
    pub inf: u64,
}

/// The first element where NaN/Inf disagree, else the element with the largest absolute difference.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Worst {
    pub index: Vec<usize>,
    pub reference: f64,
    pub target: f64,
}

pub(super) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[i] = flat % d;
            flat /= d;
        }
    }
    idx
}

/// What [`compare`] measured, and the tolerance it applied.
pub struct Compared {
    pub metrics: Metrics,
    pub reference: Stats,
    pub target: Stats,
    pub worst: Option<Worst>,
    /// `tol` scaled to the tensor and its operands ([`Tolerance::scaled`]).
    pub tolerance: Tolerance,
    /// The histogram and worst elements, for [`super::detail`].
    pub spread: Spread,
    /// The largest |round(r) − r| rounding a finite reference element to the target's element type: the error of
    /// one correct rounding (0 for types wider than float32 or not floating-point).
    pub rounding: f64,
}

/// Compares `target` with `reference` (same shape, checked by the caller) under `tol`; with `operands` (the largest
/// RMS of the activations it was computed from, 0 when unknown), `atol` is first scaled to the reference's RMS and
/// theirs ([`Tolerance::scaled`]).
pub fn compare(
    reference: &ArrayD<f64>,
    target: &Tensor,
    tol: Tolerance,
    operands: Option<f64>,
) -> Compared {
    compare_at(reference, target, tol, (operands, None))
}

/// [`compare`], with the reference's RMS when it was measured already (`rms`).
pub fn compare_at(
    reference: &ArrayD<f64>,
    target: &Tensor,
    tol: Tolerance,
    (operands, rms_known): (Option<f64>, Option<f64>),
) -> Compared {
    let r_owned;
    let r = match reference.as_slice() {
        Some(s) => s,
        None => {
            r_owned = reference.iter().copied().collect::<Vec<_>>();
            &r_owned
        }
    };
    let dtype = target.dtype();
    let scale = rms_known.unwrap_or_else(|| rms(r));
    let tol = match operands {
        Some(o) => tol.scaled(scale, o),
        None => tol,
    };
    let mut acc = crate::dispatch_tensor!(target, a => match a.as_slice() {
        Some(s) => run(r, s, dtype, tol, tol.scale(scale)),
        None => run(r, &a.iter().copied().collect::<Vec<_>>(), dtype, tol, tol.scale(scale)),
    }, s => run(r, &vec![f64::NAN; s.len()], dtype, tol, tol.scale(scale)));
    if target.strings().is_some() {
        // Strings have no numeric value: compared as numbers, none is within tolerance ([`super::strings`]
        // compares them).
        acc.failed = acc.n;
    }
    let finite = (acc.n - acc.r.nan - acc.r.inf).max(1) as f64;
    let cosine = if acc.rr == 0.0 && acc.tt == 0.0 {
        1.0
    } else if acc.rr == 0.0 || acc.tt == 0.0 {
        0.0
    } else {
        acc.dot / (acc.rr.sqrt() * acc.tt.sqrt())
    };
    let metrics = Metrics {
        elements: acc.n,
        scale,
        tolerance_used: if acc.tol_used.is_finite() {
            acc.tol_used
        } else {
            f64::MAX
        },
        max_abs: acc.max_abs,
        mean_abs: acc.sum_abs / finite,
        max_rel: acc.max_rel,
        rmse: (acc.sum_sq / finite).sqrt(),
        cosine,
        snr_db: (acc.sum_sq > 0.0)
            .then(|| 10.0 * (acc.rr.max(f64::MIN_POSITIVE) / acc.sum_sq).log10()),
        max_ulp: acc.max_ulp,
        failed: acc.failed,
        fail_fraction: if acc.n == 0 {
            0.0
        } else {
            acc.failed as f64 / acc.n as f64
        },
        nonfinite_mismatch: acc.nonfinite_mismatch,
    };
    // A NaN/Inf mismatch is worse than any finite difference.
    let at = if acc.first_nonfinite_at != usize::MAX {
        acc.first_nonfinite_at
    } else {
        acc.max_abs_at
    };
    let worst = (at != usize::MAX).then(|| Worst {
        index: unravel(at, target.shape()),
        reference: r[at],
        target: crate::dispatch_tensor!(target, a => match a.as_slice() {
            Some(s) => s[at].to_f64(),
            None => a.iter().nth(at).map(|v| v.to_f64()).unwrap_or(f64::NAN),
        }, _s => f64::NAN),
    });
    Compared {
        metrics,
        reference: acc.r.stats(acc.n),
        target: acc.t.stats(acc.n),
        worst,
        tolerance: tol,
        spread: acc.spread,
        rounding: acc.rounding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    #[test]
    fn metrics_on_known_values() {
        let r = ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![1.0, 2.0, 3.0, f64::NAN]).unwrap();
        let t = Tensor::F32(
            ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![1.0f32, 2.5, 3.0, 1.0]).unwrap(),
        );
        let c = compare(
            &r,
            &t,
            Tolerance {
                atol: 0.1,
                rtol: 0.0,
                floor: 0.0,
            },
            None,
        );
        let (m, rs, ts, w) = (c.metrics, c.reference, c.target, c.worst);
        assert_eq!(m.failed, 2);
        assert_eq!(m.nonfinite_mismatch, 1);
        assert_eq!(m.max_abs, 0.5);
        assert_eq!(
            w.unwrap().index,
            vec![1, 1],
            "a NaN mismatch is the worst element"
        );
        assert_eq!(rs.nan, 1);
        assert_eq!(ts.nan, 0);
        assert!((m.max_rel - 0.25).abs() < 1e-12);
    }

    /// Sums over many chunks come out the same, bit for bit, however many threads share them: the RMS and every
    /// sum of the comparison pass.
    #[test]
    fn sums_do_not_depend_on_the_threads() {
        let n: usize = 40 * (1 << 16) + 17;
        let r: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 1013) as f64 / 97.0 - 5.0 + 1e-9 * i as f64)
            .collect();
        let t: Vec<f32> = r.iter().map(|&v| (v * 1.0001) as f32).collect();
        let tol = Tolerance {
            atol: 1e-3,
            rtol: 1e-3,
            floor: 0.0,
        };
        let pool = |k| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(k)
                .build()
                .unwrap()
        };
        let squares = pool(1).install(|| super::super::pass::rms(&r).to_bits());
        for k in [2, 3, 5, 8] {
            assert_eq!(
                pool(k).install(|| super::super::pass::rms(&r).to_bits()),
                squares,
                "{k} threads"
            );
        }
        // A large value, and one whose chunks a thread count could size (under 16 × 64K elements).
        for n in [r.len(), 200_003] {
            let once = || {
                let a =
                    super::super::pass::run(&r[..n], &t[..n], crate::tensor::DType::F32, tol, 1.0);
                (a.sum_sq.to_bits(), a.dot.to_bits(), a.r.sumsq.to_bits())
            };
            let first = pool(1).install(once);
            for k in [2, 3, 5, 8, 8, 8] {
                assert_eq!(pool(k).install(once), first, "{n} elements, {k} threads");
            }
        }
    }
}
