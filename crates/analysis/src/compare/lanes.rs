//! The interleaved accumulators of the comparison pass's fast path (`pass.rs`): per lane, the sums and extremes
//! of a block whose elements are finite on both sides, so the lanes' dependency chains overlap.

use super::pass::{larger, smaller, Acc};
use super::Tolerance;

/// Interleaved accumulators of [`Acc::block`].
pub(super) const LANES: usize = 4;

/// The running sums and extremes of a finite block, one set per lane (element `i` goes to lane `i % LANES`).
pub(super) struct Lanes {
    pub(super) rs: [f64; LANES],
    pub(super) rq: [f64; LANES],
    pub(super) ts: [f64; LANES],
    pub(super) tq: [f64; LANES],
    pub(super) sa: [f64; LANES],
    pub(super) sq: [f64; LANES],
    pub(super) dot: [f64; LANES],
    pub(super) rmin: [f64; LANES],
    pub(super) rmax: [f64; LANES],
    pub(super) tmin: [f64; LANES],
    pub(super) tmax: [f64; LANES],
    pub(super) dmax: [f64; LANES],
    pub(super) rel: [f64; LANES],
    pub(super) used: [f64; LANES],
    pub(super) rz: [u64; LANES],
    pub(super) tz: [u64; LANES],
    pub(super) failed: [u64; LANES],
    floor: f64,
}

impl Lanes {
    /// Fresh sums; extremes starting from what `a` holds so far; relative errors measured against |r| floored at
    /// `tol.atol`.
    #[inline(always)]
    pub(super) fn new(a: &Acc, tol: Tolerance) -> Lanes {
        let z = [0.0; LANES];
        Lanes {
            rs: z,
            rq: z,
            ts: z,
            tq: z,
            sa: z,
            sq: z,
            dot: z,
            rmin: [a.r.min; LANES],
            rmax: [a.r.max; LANES],
            tmin: [a.t.min; LANES],
            tmax: [a.t.max; LANES],
            dmax: [0.0; LANES],
            rel: [a.max_rel; LANES],
            used: [a.tol_used; LANES],
            rz: [0; LANES],
            tz: [0; LANES],
            failed: [0; LANES],
            floor: tol.atol.max(f64::MIN_POSITIVE),
        }
    }

    /// One finite element pair into lane `k`; returns its share of tolerance.
    #[inline(always)]
    pub(super) fn add(&mut self, k: usize, rv: f64, tv: f64, tol: Tolerance, scale: f64) -> f64 {
        let d = (tv - rv).abs();
        self.rs[k] += rv;
        self.rq[k] += rv * rv;
        self.ts[k] += tv;
        self.tq[k] += tv * tv;
        self.sa[k] += d;
        self.sq[k] += d * d;
        self.dot[k] += rv * tv;
        self.rmin[k] = smaller(self.rmin[k], rv);
        self.rmax[k] = larger(self.rmax[k], rv);
        self.tmin[k] = smaller(self.tmin[k], tv);
        self.tmax[k] = larger(self.tmax[k], tv);
        self.rz[k] += (rv == 0.0) as u64;
        self.tz[k] += (tv == 0.0) as u64;
        self.dmax[k] = larger(self.dmax[k], d);
        let ra = rv.abs();
        self.rel[k] = larger(self.rel[k], d / larger(ra, self.floor));
        let allowed = tol.atol + tol.rtol * larger(ra, scale);
        self.failed[k] += (d > allowed) as u64;
        let ui = if allowed > 0.0 {
            d / allowed
        } else if d == 0.0 {
            0.0
        } else {
            f64::INFINITY
        };
        self.used[k] = larger(self.used[k], ui);
        ui
    }
}
