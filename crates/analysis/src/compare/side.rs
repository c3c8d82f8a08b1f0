//! The statistics of one side (reference or target) of a comparison, gathered element by element in
//! the comparison pass (`pass.rs`) and merged across its parallel chunks.

use super::metrics::Stats;

/// The running statistics of one side of a comparison: extremes and sums of its finite elements, and counts of
/// zeros, infinities and NaNs.
#[derive(Clone, Copy, Default)]
pub(super) struct Side {
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) sum: f64,
    pub(super) sumsq: f64,
    pub(super) zero: u64,
    pub(super) inf: u64,
    pub(super) nan: u64,
    pub(super) finite: u64,
}

impl Side {
    pub(super) fn new() -> Side {
        Side {
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            ..Default::default()
        }
    }
    #[inline(always)]
    pub(super) fn add(&mut self, v: f64) {
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
    pub(super) fn merge(mut self, o: Side) -> Side {
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
    pub(super) fn stats(&self, n: u64) -> Stats {
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
