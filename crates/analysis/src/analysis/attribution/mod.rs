//! Expected noise and introduced error of one value, from tensors the pipeline holds: the reference `r` (f64),
//! the ideal low-precision run `e` (every value rounded to the target's element type, computed in f64 from
//! there) and the isolated target node `t_iso` (fed with the reference's inputs).

use crate::compare::{Tolerance, ToleranceSpec};
use crate::report::model::{Introduced, Noise, ValueReport, ValueStatus};
use crate::tensor::narrow::{self, round_one};
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
        noise_pass(rs, ea.as_slice()?, tol, (tol.scale(scale), e.dtype()))
    }, _s => return None);
    let overflow = overflow_at(e.dtype());
    // Nearly always no element comes near: the largest |r| of the pass says so without another one.
    let near_overflow = match p.largest < overflow - NOISE_FACTOR * p.max_abs {
        true => 0,
        false => crate::dispatch_tensor!(e, a => {
            let ea = a.as_standard_layout();
            near_overflow(rs, ea.as_slice()?, overflow, p.max_abs)
        }, _s => 0),
    };
    Some(Noise {
        max_abs: p.max_abs,
        rms: if p.n > 0 {
            (p.sq / p.n as f64).sqrt()
        } else {
            0.0
        },
        tolerance_used: p.used,
        nonfinite: p.nonfinite,
        near_overflow,
        rounding: p.rounding,
        ratio: None,
        excused: false,
    })
}

/// The magnitude from which a float type rounds to ±inf (its largest finite value plus half a spacing there).
fn overflow_at(d: DType) -> f64 {
    match d {
        DType::F16 => 65520.0,
        DType::Bf16 => 3.3961775292304135e38,
        DType::F32 => f32::MAX as f64 * (1.0 + f32::EPSILON as f64 / 4.0),
        _ => f64::INFINITY,
    }
}

/// Elements finite in f64 and in the ideal run `e` whose magnitude lies within [`NOISE_FACTOR`]× the ideal run's
/// error (`noise`) of `overflow`: rounded in another order, they may overflow in a faithful target.
fn near_overflow<T: ToF64 + Sync>(r: &[f64], e: &[T], overflow: f64, noise: f64) -> u64 {
    let from = overflow - NOISE_FACTOR * noise;
    if !from.is_finite() {
        return 0;
    }
    r.par_iter()
        .zip(e.par_iter())
        .filter(|(rv, ev)| rv.is_finite() && ev.to_f64().is_finite() && rv.abs() >= from)
        .count() as u64
}

#[derive(Clone, Copy, Default)]
struct NoisePass {
    max_abs: f64,
    sq: f64,
    n: u64,
    used: f64,
    nonfinite: u64,
    rounding: f64,
    /// The largest finite |r|.
    largest: f64,
}

/// The noise sums of `e` against `r`, in parallel over chunks, and the largest error of rounding `r` itself to
/// `stored` (the type `e` is stored in).
fn noise_pass<T: ToF64 + Sync>(
    r: &[f64],
    e: &[T],
    tol: Tolerance,
    (scale, stored): (f64, DType),
) -> NoisePass {
    const CHUNK: usize = 1 << 16;
    // Joined in order: the same sums whatever the threads did.
    let parts: Vec<NoisePass> = (r.par_chunks(CHUNK).zip(e.par_chunks(CHUNK)))
        .map(|(rc, ec)| noise_chunk(rc, ec, tol, scale, stored))
        .collect();
    (parts.into_iter()).fold(NoisePass::default(), |a, b| NoisePass {
        max_abs: a.max_abs.max(b.max_abs),
        sq: a.sq + b.sq,
        n: a.n + b.n,
        used: a.used.max(b.used),
        nonfinite: a.nonfinite + b.nonfinite,
        rounding: a.rounding.max(b.rounding),
        largest: a.largest.max(b.largest),
    })
}

crate::widened! {
    /// One chunk of [`noise_pass`], compiled for the widest vector instructions this CPU has (`crate::simd`).
    fn noise_chunk<T: ToF64>(r: &[f64], e: &[T], tol: Tolerance, scale: f64, stored: DType) -> NoisePass = noise_chunk_in
}

/// [`noise_chunk`]'s body: the rounding to `stored` chosen once, not per element.
#[inline(always)]
fn noise_chunk_in<T: ToF64>(
    r: &[f64],
    e: &[T],
    tol: Tolerance,
    scale: f64,
    stored: DType,
) -> NoisePass {
    match stored {
        DType::F32 => noise_blocks(r, e, (tol, scale), |x| x as f32 as f64),
        DType::F16 => noise_blocks(r, e, (tol, scale), narrow::round::<narrow::F16>),
        DType::Bf16 => noise_blocks(r, e, (tol, scale), narrow::round::<narrow::Bf16>),
        _ => noise_blocks(r, e, (tol, scale), |x| x),
    }
}

/// Elements per block of [`noise_blocks`]: the ideal run's block widened to f64 fits in L1.
const BLOCK: usize = 512;
/// Interleaved accumulators of a finite block: independent dependency chains the CPU overlaps.
const LANES: usize = 4;

/// Blocks finite on both sides (nearly all) take a branch-free path over [`LANES`] accumulators; a block holding a
/// NaN or an infinity goes element by element.
#[inline(always)]
fn noise_blocks<T: ToF64>(
    r: &[f64],
    e: &[T],
    (tol, scale): (Tolerance, f64),
    round: impl Fn(f64) -> f64,
) -> NoisePass {
    let mut p = NoisePass::default();
    let mut eb = [0.0f64; BLOCK];
    for (rb, esrc) in r.chunks(BLOCK).zip(e.chunks(BLOCK)) {
        let eb = &mut eb[..rb.len()];
        for (x, v) in eb.iter_mut().zip(esrc) {
            *x = v.to_f64();
        }
        if !(crate::simd::all_finite(rb) && crate::simd::all_finite(eb)) {
            for (&rv, &ev) in rb.iter().zip(eb.iter()) {
                p.element(rv, ev, (tol, scale), &round);
            }
            continue;
        }
        let (mut mx, mut sq, mut used, mut rounding) =
            ([0.0; LANES], [0.0; LANES], [0.0; LANES], [0.0; LANES]);
        let mut largest = [0.0; LANES];
        let quads = rb.chunks_exact(LANES).zip(eb.chunks_exact(LANES));
        for (rq, eq) in quads {
            for k in 0..LANES {
                let (rv, ev) = (rq[k], eq[k]);
                let rounded = (round(rv) - rv).abs();
                // Rounding a finite f64 to a narrower type may overflow: that is not an error of rounding.
                rounding[k] = larger(rounding[k], if rounded.is_finite() { rounded } else { 0.0 });
                let d = (ev - rv).abs();
                largest[k] = larger(largest[k], rv.abs());
                mx[k] = larger(mx[k], d);
                sq[k] += d * d;
                let allowed = tol.atol + tol.rtol * larger(rv.abs(), scale);
                used[k] = larger(used[k], if allowed > 0.0 { d / allowed } else { 0.0 });
            }
        }
        let done = rb.len() - rb.len() % LANES;
        for (&rv, &ev) in rb[done..].iter().zip(&eb[done..]) {
            p.element(rv, ev, (tol, scale), &round);
        }
        let hi = |x: [f64; LANES]| x.iter().copied().fold(0.0, larger);
        p.max_abs = larger(p.max_abs, hi(mx));
        p.sq += sq.iter().sum::<f64>();
        p.used = larger(p.used, hi(used));
        p.rounding = larger(p.rounding, hi(rounding));
        p.largest = larger(p.largest, hi(largest));
        p.n += done as u64;
    }
    p
}

/// `b` when it is larger, else `a` (no NaN reaches it).
#[inline(always)]
fn larger(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

impl NoisePass {
    /// One element on the general path: NaNs and infinities counted, not measured.
    #[inline(always)]
    fn element(
        &mut self,
        rv: f64,
        ev: f64,
        (tol, scale): (Tolerance, f64),
        round: impl Fn(f64) -> f64,
    ) {
        let rounded = (round(rv) - rv).abs();
        if rounded.is_finite() {
            self.rounding = self.rounding.max(rounded);
        }
        if !(rv.is_finite() && ev.is_finite()) {
            self.nonfinite += (rv.is_finite() && !ev.is_finite()) as u64;
            return;
        }
        let d = (ev - rv).abs();
        self.largest = self.largest.max(rv.abs());
        self.max_abs = self.max_abs.max(d);
        self.sq += d * d;
        self.n += 1;
        let allowed = tol.atol + tol.rtol * rv.abs().max(scale);
        self.used = self.used.max(if allowed > 0.0 { d / allowed } else { 0.0 });
    }
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

/// Takes the expected noise off a compared value (its run failed after some values got it): a value it excused
/// fails again, as it did before the noise was attached.
pub fn without_noise(v: &mut ValueReport) {
    if v.noise.take().is_some_and(|n| n.excused) {
        v.status = ValueStatus::Fail;
        v.reason = None;
    }
}

/// Attaches `noise` to a compared value; with default tolerances, a failure the noise explains passes.
pub fn apply_noise(v: &mut ValueReport, mut noise: Noise, spec: &ToleranceSpec) {
    let Some(m) = v.metrics.as_ref() else {
        v.noise = Some(noise);
        return;
    };
    noise.ratio = (noise.max_abs > 0.0).then(|| m.max_abs / noise.max_abs);
    // The noise carries the error of correct rounding.
    v.rounding = None;
    if spec.is_default()
        && v.status == ValueStatus::Fail
        && m.nonfinite_mismatch == 0
        && noise.nonfinite == 0
        && noise.tolerance_used <= 1.0
        && crate::analysis::anomaly::within_noise(m, &noise)
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

/// The largest |round(r) − r| over the finite elements of `r` rounded to `stored`: the error of one correct
/// rounding (0 for values no float type stores).
pub fn rounding_error(r: &Tensor, stored: DType) -> Option<f64> {
    if !r.dtype().is_float() || !stored.is_float() {
        return Some(0.0);
    }
    let ra = r.as_f64();
    let ra = ra.as_standard_layout();
    let largest = ra
        .as_slice()?
        .par_chunks(1 << 14)
        .map(|c| {
            c.iter()
                .filter(|v| v.is_finite())
                .map(|&v| (round_one(v, stored) - v).abs())
                .filter(|d| d.is_finite())
                .fold(0.0, f64::max)
        })
        .reduce(|| 0.0, f64::max);
    Some(largest)
}

/// The introduced error of a value: `iso` (the isolated target node's output) against `r`, where `stored` is the
/// element type the target keeps this value in.
pub fn introduced(iso: &ValueReport, r: &Tensor, stored: Option<DType>) -> Option<Introduced> {
    let metrics = iso.metrics.clone()?;
    let expected = match stored {
        Some(d) => rounding_error(r, d)?,
        None => 0.0,
    };
    Some(Introduced {
        status: iso.status,
        ratio: (expected > 0.0).then(|| metrics.max_abs / expected),
        metrics,
        expected,
    })
}

#[cfg(test)]
pub(crate) mod tests;
