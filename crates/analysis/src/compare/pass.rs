//! The one pass over a value's elements behind [`super::compare`]: error sums, extremes, the statistics of both
//! sides and the [`Spread`], in parallel over chunks. Blocks where both sides are finite (nearly all of them) take a
//! branch-light path whose per-element work the CPU can overlap; a block holding a NaN or an infinity takes the
//! general per-element path.

use rayon::prelude::*;

use super::detail::Spread;
use super::lanes::{Lanes, LANES};
use super::side::Side;
use super::ulp::{block_f32, rounding, ulp_distance, ulps};
use super::Tolerance;
use crate::tensor::narrow::{self, round_one};
use crate::tensor::{DType, ToF64};

#[derive(Clone)]
pub(super) struct Acc {
    pub(super) r: Side,
    pub(super) t: Side,
    pub(super) n: u64,
    pub(super) failed: u64,
    pub(super) nonfinite_mismatch: u64,
    pub(super) sum_abs: f64,
    pub(super) sum_sq: f64,
    pub(super) dot: f64,
    pub(super) rr: f64,
    pub(super) tt: f64,
    pub(super) max_abs: f64,
    pub(super) max_abs_at: usize,
    pub(super) max_rel: f64,
    pub(super) max_ulp: u64,
    pub(super) first_nonfinite_at: usize,
    pub(super) tol_used: f64,
    /// The largest |round(r) − r| rounding a finite reference element to the target's type (0 for types wider
    /// than float32 or not floating-point); a rounding that overflows counts 0.
    pub(super) rounding: f64,
    pub(super) spread: Spread,
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
            rounding: 0.0,
            spread: Spread::new(),
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
        self.rounding = self.rounding.max(o.rounding);
        self.spread = self.spread.merge(o.spread);
        self
    }
}

const CHUNK: usize = 1 << 16;

/// Shares a value of fewer than `SHARES` × [`CHUNK`] elements is cut into.
const SHARES: usize = 16;

/// Elements per parallel chunk: [`CHUNK`] for large values, fewer for small ones so that several threads get a share
/// (most activations of a small transformer hold under 64K elements), never below a few blocks. It depends on the
/// value's size alone, not on the machine's threads: the chunks' sums, joined in order, come out the same anywhere.
fn chunk_len(n: usize) -> usize {
    n.div_ceil(SHARES)
        .next_multiple_of(BLOCK)
        .clamp(8 * BLOCK, CHUNK)
}

/// RMS of the finite elements (0 when there are none). The chunks' sums are added in order, so the result does
/// not depend on how the threads shared the work.
pub fn rms<T: ToF64 + Sync>(r: &[T]) -> f64 {
    let parts: Vec<(f64, u64)> = r.par_chunks(CHUNK).map(squares).collect();
    let (sum, n) = (parts.into_iter()).fold((0.0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    if n == 0 {
        0.0
    } else {
        (sum / n as f64).sqrt()
    }
}

crate::widened! {
    /// The sum of squares of a chunk's finite elements and their count, compiled for the widest vector
    /// instructions this CPU has (`crate::simd`).
    fn squares<T: ToF64>(c: &[T]) -> (f64, u64) = squares_in
}

/// [`squares`]' body: branch-free over [`LANES`] interleaved sums.
#[inline(always)]
fn squares_in<T: ToF64>(c: &[T]) -> (f64, u64) {
    let (mut sum, mut n) = ([0.0f64; LANES], [0u64; LANES]);
    let mut quads = c.chunks_exact(LANES);
    for q in &mut quads {
        for k in 0..LANES {
            let v = q[k].to_f64();
            let ok = v.is_finite();
            sum[k] += if ok { v * v } else { 0.0 };
            n[k] += ok as u64;
        }
    }
    for v in quads.remainder().iter().map(|v| v.to_f64()) {
        sum[0] += if v.is_finite() { v * v } else { 0.0 };
        n[0] += v.is_finite() as u64;
    }
    (sum.iter().sum(), n.iter().sum())
}

/// Elements per block of the fast path: both sides widened to f64 and the shares of tolerance fit in L1.
const BLOCK: usize = 512;

/// Every metric, the statistics of both sides and the [`Spread`], in one parallel pass; the chunks' sums are joined
/// in order (the same figures whatever the threads did).
pub(super) fn run<T: ToF64 + Sync>(
    r: &[f64],
    t: &[T],
    dtype: DType,
    tol: Tolerance,
    scale: f64,
) -> Acc {
    let chunk = chunk_len(r.len());
    r.par_chunks(chunk)
        .zip(t.par_chunks(chunk))
        .enumerate()
        .map(|(c, (rc, tc))| accumulate(rc, tc, c * chunk, dtype, tol, scale))
        .collect::<Vec<_>>()
        .into_iter()
        .fold(Acc::new(), Acc::merge)
}

crate::widened! {
    /// One chunk's [`Acc`], the chunk's first element at flat index `base`: compiled for the widest vector
    /// instructions this CPU has (`crate::simd`).
    fn accumulate<T: ToF64>(rc: &[f64], tc: &[T], base: usize, dtype: DType, tol: Tolerance, scale: f64) -> Acc = accumulate_in
}

/// [`accumulate`]'s body: blocks of [`BLOCK`] elements, finite ones on the fast path.
#[inline(always)]
fn accumulate_in<T: ToF64>(
    rc: &[f64],
    tc: &[T],
    base: usize,
    dtype: DType,
    tol: Tolerance,
    scale: f64,
) -> Acc {
    let mut a = Acc::new();
    let (mut tb, mut ub) = ([0.0f64; BLOCK], [0.0f64; BLOCK]);
    for (b, (rb, tsrc)) in rc.chunks(BLOCK).zip(tc.chunks(BLOCK)).enumerate() {
        let base = base + b * BLOCK;
        let tb = &mut tb[..rb.len()];
        for (x, v) in tb.iter_mut().zip(tsrc) {
            *x = v.to_f64();
        }
        if crate::simd::all_finite(rb) && crate::simd::all_finite(tb) {
            a.block(rb, tb, &mut ub[..rb.len()], base, tol, scale);
            a.block_ulps(rb, tb, dtype);
        } else {
            for (k, (&rv, &tv)) in rb.iter().zip(tb.iter()).enumerate() {
                a.add(rv, tv, base + k, dtype, tol, scale);
            }
        }
    }
    a
}

/// `b` when it is larger, else `a` (both finite: no NaN handling).
#[inline(always)]
pub(super) fn larger(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

#[inline(always)]
pub(super) fn smaller(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

impl Acc {
    /// A block whose elements are finite on both sides: the sums and extremes in [`LANES`] interleaved
    /// accumulators (independent dependency chains the CPU overlaps and the compiler can vectorize), each element's
    /// share of tolerance into `u`, then the histogram and worst elements from `u`. The largest error's index is
    /// looked up only in a block that holds a new largest error.
    #[inline(always)]
    fn block(
        &mut self,
        r: &[f64],
        t: &[f64],
        u: &mut [f64],
        base: usize,
        tol: Tolerance,
        scale: f64,
    ) {
        let mut l = Lanes::new(self, tol);
        let mut quads = r.chunks_exact(LANES).zip(t.chunks_exact(LANES));
        let mut uq = u.chunks_exact_mut(LANES);
        for ((rq, tq), uo) in (&mut quads).zip(&mut uq) {
            for k in 0..LANES {
                uo[k] = l.add(k, rq[k], tq[k], tol, scale);
            }
        }
        let done = r.len() - r.len() % LANES;
        for i in done..r.len() {
            u[i] = l.add(0, r[i], t[i], tol, scale);
        }
        let n = r.len() as u64;
        let sum = |x: [f64; LANES]| x.iter().sum::<f64>();
        let count = |x: [u64; LANES]| x.iter().sum::<u64>();
        let lo = |x: [f64; LANES]| x.iter().copied().fold(f64::INFINITY, smaller);
        let hi = |x: [f64; LANES]| x.iter().copied().fold(f64::NEG_INFINITY, larger);
        for (side, (s, q, mn, mx, z)) in [
            (&mut self.r, (l.rs, l.rq, l.rmin, l.rmax, l.rz)),
            (&mut self.t, (l.ts, l.tq, l.tmin, l.tmax, l.tz)),
        ] {
            side.sum += sum(s);
            side.sumsq += sum(q);
            (side.min, side.max) = (lo(mn), hi(mx));
            side.zero += count(z);
            side.finite += n;
        }
        self.n += n;
        self.failed += count(l.failed);
        self.sum_abs += sum(l.sa);
        self.sum_sq += sum(l.sq);
        self.dot += sum(l.dot);
        self.rr += sum(l.rq);
        self.tt += sum(l.tq);
        self.max_rel = hi(l.rel);
        self.tol_used = hi(l.used);
        let dmax = hi(l.dmax);
        if dmax > self.max_abs || self.max_abs_at == usize::MAX {
            let first = r
                .iter()
                .zip(t)
                .position(|(&rv, &tv)| (tv - rv).abs() == dmax);
            self.max_abs = dmax;
            self.max_abs_at = base + first.unwrap_or(0);
        }
        self.spread.add_block(u, base);
    }

    /// The largest ULP distance over a finite block, and the largest error of rounding its reference elements to
    /// `dtype` (the element type matched once, not per element).
    #[inline(always)]
    fn block_ulps(&mut self, r: &[f64], t: &[f64], dtype: DType) {
        #[inline(always)]
        fn most(r: &[f64], t: &[f64], f: impl Fn(f64, f64) -> u64) -> u64 {
            r.iter().zip(t).fold(0, |m, (&a, &b)| m.max(f(a, b)))
        }
        let others = |a: f64, b: f64| if a == b { 0 } else { ulp_distance(dtype, a, b) };
        let (m, off) = match dtype {
            DType::F32 => block_f32(r, t),
            DType::F64 => (
                most(r, t, |a, b| ulps(a.to_bits(), b.to_bits(), 1 << 63)),
                0.0,
            ),
            DType::F16 => (
                most(r, t, others),
                rounding(r, narrow::round::<narrow::F16>),
            ),
            DType::Bf16 => (
                most(r, t, others),
                rounding(r, narrow::round::<narrow::Bf16>),
            ),
            _ => (most(r, t, others), 0.0),
        };
        self.rounding = larger(self.rounding, off);
        self.max_ulp = self.max_ulp.max(m);
    }
}

impl Acc {
    #[inline(always)]
    fn add(&mut self, rv: f64, tv: f64, at: usize, dtype: DType, tol: Tolerance, scale: f64) {
        self.n += 1;
        self.r.add(rv);
        self.t.add(tv);
        // A non-finite element, or one whose rounding overflows, has no error of rounding.
        let off = (round_one(rv, dtype) - rv).abs();
        self.rounding = larger(self.rounding, if off.is_finite() { off } else { 0.0 });
        if !(rv.is_finite() && tv.is_finite()) {
            if rv == tv || (rv.is_nan() && tv.is_nan()) {
                self.spread.add(0.0, at);
            } else {
                self.failed += 1;
                self.nonfinite_mismatch += 1;
                self.max_ulp = u64::MAX;
                self.first_nonfinite_at = self.first_nonfinite_at.min(at);
                self.spread.add(f64::INFINITY, at);
            }
            return;
        }
        let d = (tv - rv).abs();
        self.sum_abs += d;
        self.sum_sq += d * d;
        self.dot += rv * tv;
        self.rr += rv * rv;
        self.tt += tv * tv;
        if d > self.max_abs || self.max_abs_at == usize::MAX {
            self.max_abs = d;
            self.max_abs_at = at;
        }
        self.max_rel = self
            .max_rel
            .max(d / rv.abs().max(tol.atol.max(f64::MIN_POSITIVE)));
        let allowed = tol.atol + tol.rtol * rv.abs().max(scale);
        self.failed += (d > allowed) as u64;
        let used = if d == 0.0 {
            0.0
        } else if allowed > 0.0 {
            d / allowed
        } else {
            f64::INFINITY
        };
        self.tol_used = self.tol_used.max(used);
        self.spread.add(used, at);
        if d > 0.0 {
            self.max_ulp = self.max_ulp.max(ulp_distance(dtype, rv, tv));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunk compiled for this CPU's widest vector instructions (`crate::simd`) gives bit for bit what the
    /// baseline build of the same body gives: sums, extremes, counts and worst elements, on a NaN block too.
    #[test]
    fn dispatched_chunks_are_bit_identical_to_the_baseline() {
        let n = 5 * BLOCK + 13;
        let r: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 1013) as f64 / 97.0 - 5.0)
            .collect();
        let mut t: Vec<f32> = r
            .iter()
            .enumerate()
            .map(|(i, &v)| (v * (1.0 + 1e-6 * (i % 7) as f64)) as f32)
            .collect();
        t[2 * BLOCK + 1] = f32::NAN;
        let tol = Tolerance {
            atol: 1e-5,
            rtol: 1e-5,
            floor: 0.0,
        };
        let wide = accumulate(&r, &t, 0, DType::F32, tol, 1.3);
        let base = accumulate_in(&r, &t, 0, DType::F32, tol, 1.3);
        let bits = |a: &Acc| {
            [
                a.sum_abs, a.sum_sq, a.dot, a.rr, a.tt, a.max_abs, a.max_rel, a.tol_used, a.r.sum,
                a.t.sumsq,
            ]
            .map(f64::to_bits)
        };
        assert_eq!(bits(&wide), bits(&base));
        assert_eq!(
            (
                wide.n,
                wide.failed,
                wide.max_ulp,
                wide.max_abs_at,
                wide.first_nonfinite_at
            ),
            (
                base.n,
                base.failed,
                base.max_ulp,
                base.max_abs_at,
                base.first_nonfinite_at
            )
        );
        assert_eq!(wide.spread.top, base.spread.top);
        assert_eq!(
            format!("{:?}", wide.spread.histogram()),
            format!("{:?}", base.spread.histogram())
        );
        assert_eq!(squares(&r).0.to_bits(), squares_in(&r).0.to_bits());
    }

    /// The block path gives what the per-element path gives: counts, extremes and worst elements exactly, sums
    /// within rounding; on data with exact elements, zeros, sign changes, a failing element and a NaN block.
    #[test]
    fn block_path_matches_per_element_path() {
        let n = 3 * BLOCK + 77;
        let r: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f64 / 250.0 - 2.0)
            .collect();
        let mut t: Vec<f32> = r
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                if i % 3 == 0 {
                    v as f32
                } else {
                    (v * (1.0 + 1e-4 * (i % 5) as f64)) as f32
                }
            })
            .collect();
        t[5] += 0.5;
        let tol = Tolerance {
            atol: 1e-3,
            rtol: 1e-3,
            floor: 0.0,
        };
        let fast = run(&r, &t, DType::F32, tol, 1.0);
        let mut slow = Acc::new();
        for (i, (&rv, tv)) in r.iter().zip(&t).enumerate() {
            slow.add(rv, tv.to_f64(), i, DType::F32, tol, 1.0);
        }
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300);
        assert_eq!(
            (fast.n, fast.failed, fast.max_ulp),
            (slow.n, slow.failed, slow.max_ulp)
        );
        assert_eq!(
            (fast.max_abs, fast.max_abs_at, fast.max_rel, fast.tol_used),
            (slow.max_abs, slow.max_abs_at, slow.max_rel, slow.tol_used)
        );
        assert_eq!(
            (fast.r.zero, fast.t.zero, fast.r.min, fast.t.max),
            (slow.r.zero, slow.t.zero, slow.r.min, slow.t.max)
        );
        for (a, b) in [
            (fast.sum_abs, slow.sum_abs),
            (fast.dot, slow.dot),
            (fast.t.sumsq, slow.t.sumsq),
            (fast.r.sum, slow.r.sum),
        ] {
            assert!(close(a, b), "{a} vs {b}");
        }
        assert_eq!(fast.spread.top, slow.spread.top);
        assert_eq!(
            format!("{:?}", fast.spread.histogram()),
            format!("{:?}", slow.spread.histogram())
        );
        assert_eq!(fast.failed, 1);
        // The error of correctly rounding the reference to float32, on both paths.
        let direct = (r.iter()).fold(0.0, |m: f64, &v| m.max((v as f32 as f64 - v).abs()));
        assert!(direct > 0.0);
        assert_eq!((fast.rounding, slow.rounding), (direct, direct));
        // A NaN in the second block sends that block down the per-element path.
        t[BLOCK + 3] = f32::NAN;
        let with_nan = run(&r, &t, DType::F32, tol, 1.0);
        assert_eq!(
            (with_nan.nonfinite_mismatch, with_nan.t.nan, with_nan.failed),
            (1, 1, 2)
        );
        assert_eq!(with_nan.spread.top[0].1, BLOCK + 3);
    }
}
