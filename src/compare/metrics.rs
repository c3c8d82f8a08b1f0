//! Error metrics of a target value against the f64 reference, and activation statistics of both, in one
//! parallel pass without copying the target to f64.

use half::{bf16, f16};
use ndarray::ArrayD;
use rayon::prelude::*;
use serde::Serialize;

use super::Tolerance;
use crate::tensor::{DType, Tensor, ToF64};

/// Error metrics over all elements of one value.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Worst {
    pub index: Vec<usize>,
    pub reference: f64,
    pub target: f64,
}

#[derive(Clone, Copy, Default)]
struct Side {
    min: f64,
    max: f64,
    sum: f64,
    sumsq: f64,
    zero: u64,
    inf: u64,
    nan: u64,
    finite: u64,
}

impl Side {
    fn new() -> Side {
        Side {
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            ..Default::default()
        }
    }
    #[inline]
    fn add(&mut self, v: f64) {
        if v.is_nan() {
            self.nan += 1;
        } else if v.is_infinite() {
            self.inf += 1;
        } else {
            self.finite += 1;
            self.min = self.min.min(v);
            self.max = self.max.max(v);
            self.sum += v;
            self.sumsq += v * v;
            self.zero += (v == 0.0) as u64;
        }
    }
    fn merge(mut self, o: Side) -> Side {
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum += o.sum;
        self.sumsq += o.sumsq;
        self.zero += o.zero;
        self.inf += o.inf;
        self.nan += o.nan;
        self.finite += o.finite;
        self
    }
    fn stats(&self, n: u64) -> Stats {
        let pct = |c: u64| {
            if n == 0 {
                0.0
            } else {
                100.0 * c as f64 / n as f64
            }
        };
        let f = self.finite.max(1) as f64;
        let mean = self.sum / f;
        let var = (self.sumsq / f - mean * mean).max(0.0);
        let (min, max) = if self.finite == 0 {
            (0.0, 0.0)
        } else {
            (self.min, self.max)
        };
        Stats {
            min,
            max,
            mean,
            std: var.sqrt(),
            pct_zero: pct(self.zero),
            pct_inf: pct(self.inf),
            pct_nan: pct(self.nan),
            nan: self.nan,
            inf: self.inf,
        }
    }
}

#[derive(Clone, Copy)]
struct Acc {
    r: Side,
    t: Side,
    n: u64,
    failed: u64,
    nonfinite_mismatch: u64,
    sum_abs: f64,
    sum_sq: f64,
    dot: f64,
    rr: f64,
    tt: f64,
    max_abs: f64,
    max_abs_at: usize,
    max_rel: f64,
    max_ulp: u64,
    first_nonfinite_at: usize,
    tol_used: f64,
}

impl Acc {
    fn new() -> Acc {
        Acc {
            r: Side::new(),
            t: Side::new(),
            n: 0,
            failed: 0,
            nonfinite_mismatch: 0,
            sum_abs: 0.0,
            sum_sq: 0.0,
            dot: 0.0,
            rr: 0.0,
            tt: 0.0,
            max_abs: 0.0,
            max_abs_at: usize::MAX,
            max_rel: 0.0,
            max_ulp: 0,
            first_nonfinite_at: usize::MAX,
            tol_used: 0.0,
        }
    }
    fn merge(mut self, o: Acc) -> Acc {
        self.r = self.r.merge(o.r);
        self.t = self.t.merge(o.t);
        self.n += o.n;
        self.failed += o.failed;
        self.nonfinite_mismatch += o.nonfinite_mismatch;
        self.sum_abs += o.sum_abs;
        self.sum_sq += o.sum_sq;
        self.dot += o.dot;
        self.rr += o.rr;
        self.tt += o.tt;
        if o.max_abs > self.max_abs || self.max_abs_at == usize::MAX {
            self.max_abs = o.max_abs;
            self.max_abs_at = o.max_abs_at;
        }
        self.max_rel = self.max_rel.max(o.max_rel);
        self.max_ulp = self.max_ulp.max(o.max_ulp);
        self.first_nonfinite_at = self.first_nonfinite_at.min(o.first_nonfinite_at);
        self.tol_used = self.tol_used.max(o.tol_used);
        self
    }
}

/// Ordinal of a float's bit pattern so that adjacent floats differ by one.
#[inline]
fn ordinal(bits: u64, sign_bit: u64) -> i128 {
    let mag = (bits & (sign_bit - 1)) as i128;
    if bits & sign_bit != 0 {
        -mag
    } else {
        mag
    }
}

/// ULP distance between the target value `t` and the reference `r` rounded to `dtype`.
#[inline]
pub fn ulp_distance(dtype: DType, r: f64, t: f64) -> u64 {
    if !r.is_finite() || !t.is_finite() {
        return if r == t || (r.is_nan() && t.is_nan()) {
            0
        } else {
            u64::MAX
        };
    }
    let d = match dtype {
        DType::F64 => ordinal(r.to_bits(), 1 << 63) - ordinal(t.to_bits(), 1 << 63),
        DType::F32 => {
            ordinal((r as f32).to_bits() as u64, 1 << 31)
                - ordinal((t as f32).to_bits() as u64, 1 << 31)
        }
        DType::F16 => {
            ordinal(f16::from_f64(r).to_bits() as u64, 1 << 15)
                - ordinal(f16::from_f64(t).to_bits() as u64, 1 << 15)
        }
        DType::Bf16 => {
            ordinal(bf16::from_f64(r).to_bits() as u64, 1 << 15)
                - ordinal(bf16::from_f64(t).to_bits() as u64, 1 << 15)
        }
        _ => (r - t).abs() as i128,
    };
    d.unsigned_abs().min(u64::MAX as u128) as u64
}

const CHUNK: usize = 1 << 16;

fn rms(r: &[f64]) -> f64 {
    let (sum, n) = r
        .par_chunks(CHUNK)
        .map(|c| {
            c.iter()
                .filter(|v| v.is_finite())
                .fold((0.0, 0u64), |(s, n), v| (s + v * v, n + 1))
        })
        .reduce(|| (0.0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    if n == 0 {
        0.0
    } else {
        (sum / n as f64).sqrt()
    }
}

fn run<T: ToF64 + Sync>(r: &[f64], t: &[T], dtype: DType, tol: Tolerance, scale: f64) -> Acc {
    let floor = tol.atol.max(f64::MIN_POSITIVE);
    r.par_chunks(CHUNK)
        .zip(t.par_chunks(CHUNK))
        .enumerate()
        .map(|(c, (rc, tc))| {
            let mut a = Acc::new();
            for (k, (&rv, tv)) in rc.iter().zip(tc).enumerate() {
                let tv = tv.to_f64();
                a.n += 1;
                a.r.add(rv);
                a.t.add(tv);
                if !tol.accepts(rv, tv, scale) {
                    a.failed += 1;
                }
                if !(rv.is_finite() && tv.is_finite()) {
                    if !(rv == tv || (rv.is_nan() && tv.is_nan())) {
                        a.nonfinite_mismatch += 1;
                        a.max_ulp = u64::MAX;
                        a.first_nonfinite_at = a.first_nonfinite_at.min(c * CHUNK + k);
                    }
                    continue;
                }
                let d = (tv - rv).abs();
                a.sum_abs += d;
                a.sum_sq += d * d;
                a.dot += rv * tv;
                a.rr += rv * rv;
                a.tt += tv * tv;
                if d > a.max_abs || a.max_abs_at == usize::MAX {
                    a.max_abs = d;
                    a.max_abs_at = c * CHUNK + k;
                }
                a.max_rel = a.max_rel.max(d / rv.abs().max(floor));
                let allowed = tol.atol + tol.rtol * rv.abs().max(scale);
                a.tol_used = a.tol_used.max(if allowed > 0.0 {
                    d / allowed
                } else if d > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                });
                if d > 0.0 {
                    a.max_ulp = a.max_ulp.max(ulp_distance(dtype, rv, tv));
                }
            }
            a
        })
        .reduce(Acc::new, Acc::merge)
}

fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
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
    let r_owned;
    let r = match reference.as_slice() {
        Some(s) => s,
        None => {
            r_owned = reference.iter().copied().collect::<Vec<_>>();
            &r_owned
        }
    };
    let dtype = target.dtype();
    let scale = rms(r);
    let tol = match operands {
        Some(o) => tol.scaled(scale, o),
        None => tol,
    };
    let acc = crate::dispatch_tensor!(target, a => match a.as_slice() {
        Some(s) => run(r, s, dtype, tol, scale),
        None => run(r, &a.iter().copied().collect::<Vec<_>>(), dtype, tol, scale),
    });
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
        target: crate::dispatch_tensor!(target, a => a.iter().nth(at).map(|v| v.to_f64()).unwrap_or(f64::NAN)),
    });
    Compared {
        metrics,
        reference: acc.r.stats(acc.n),
        target: acc.t.stats(acc.n),
        worst,
        tolerance: tol,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    #[test]
    fn ulp_counts_adjacent_floats() {
        let a = 1.0f32;
        let b = f32::from_bits(a.to_bits() + 3);
        assert_eq!(ulp_distance(DType::F32, a as f64, b as f64), 3);
        assert_eq!(ulp_distance(DType::F32, -0.0, 0.0), 0);
        let tiny = f32::from_bits(1) as f64;
        assert_eq!(ulp_distance(DType::F32, -tiny, tiny), 2);
    }

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
}
