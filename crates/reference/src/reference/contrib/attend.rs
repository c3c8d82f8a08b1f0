//! The attention core the contrib attention ops share: per batch and query head, scaled scores Q·Kᵀ (f64 GEMM),
//! each row adjusted by the op (bias, masks, softcap) over the keys it may see, a softmax (optionally with a sink
//! logit), and the probabilities times V. Query heads share key/value heads in groups.

use rayon::prelude::*;

use super::super::fast::gemm::{matmul, Mat};

/// Extents: Q [B, N, S, H], K [B, Nkv, T, H], V [B, Nkv, T, Hv], all row-major.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub rows: usize,
    pub keys: usize,
    pub depth: usize,
    pub v_depth: usize,
}

/// What an op does to one row of scores.
pub trait Rows: Sync {
    /// The keys row `i` of head `n` in batch `b` sees, as `lo..hi` (the others get probability 0).
    fn range(&self, _b: usize, _n: usize, _i: usize, keys: usize) -> (usize, usize) {
        (0, keys)
    }
    /// Adjusts the scaled scores of keys `lo..lo + scores.len()` in place (bias, masks, softcap).
    fn adjust(&self, b: usize, n: usize, i: usize, lo: usize, scores: &mut [f64]);
    /// A sink logit joining the softmax's denominator (smooth softmax), if any.
    fn sink(&self, _n: usize) -> Option<f64> {
        None
    }
}

/// Which per-row values to hand back besides the output, as [B, N, S, T] (0 outside a row's keys).
#[derive(Clone, Copy, PartialEq)]
pub enum Keep {
    Nothing,
    Scores,
    Probs,
}

/// softmax over `x` in place, with an optional sink logit in the denominator.
fn softmax(x: &mut [f64], sink: Option<f64>) {
    let mut m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if let Some(s) = sink {
        m = m.max(s);
    }
    let mut sum = sink.map_or(0.0, |s| (s - m).exp());
    for v in x.iter_mut() {
        *v = (*v - m).exp();
        sum += *v;
    }
    x.iter_mut().for_each(|v| *v /= sum);
}

/// Returns the output [B, N, S, Hv] and, when asked, the kept scores or probabilities [B, N, S, T].
pub fn attend(
    d: Dims,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    scale: f64,
    rows: &dyn Rows,
    keep: Keep,
) -> (Vec<f64>, Vec<f64>) {
    let (s, t) = (d.rows, d.keys);
    let group = (d.heads / d.kv_heads.max(1)).max(1);
    let bn = d.batch * d.heads;
    let mut out = vec![0.0; bn * s * d.v_depth];
    let mut kept = vec![0.0; if keep == Keep::Nothing { 0 } else { bn * s * t }];
    let work = |(idx, (o, kp)): (usize, (&mut [f64], Option<&mut [f64]>))| {
        let (b, n) = (idx / d.heads, idx % d.heads);
        let kv = b * d.kv_heads + n / group;
        let qh = &q[idx * s * d.depth..][..s * d.depth];
        let kh = &k[kv * t * d.depth..][..t * d.depth];
        let vh = &v[kv * t * d.v_depth..][..t * d.v_depth];
        let mut sc = vec![0.0; s * t];
        let kt = Mat {
            data: kh,
            rs: 1,
            cs: d.depth,
        };
        matmul(s, d.depth, t, Mat::rows(qh, d.depth), kt, &mut sc);
        let mut kp = kp;
        for (i, row) in sc.chunks_exact_mut(t.max(1)).enumerate().take(s) {
            let (lo, hi) = rows.range(b, n, i, t);
            row.iter_mut().for_each(|x| *x *= scale);
            rows.adjust(b, n, i, lo, &mut row[lo..hi]);
            if keep == Keep::Scores {
                kp.as_deref_mut().expect("kept")[i * t + lo..i * t + hi]
                    .copy_from_slice(&row[lo..hi]);
            }
            softmax(&mut row[lo..hi], rows.sink(n));
            row[..lo].fill(0.0);
            row[hi..].fill(0.0);
            if keep == Keep::Probs {
                kp.as_deref_mut().expect("kept")[i * t..][..t].copy_from_slice(row);
            }
        }
        matmul(
            s,
            t,
            d.v_depth,
            Mat::rows(&sc, t),
            Mat::rows(vh, d.v_depth),
            o,
        );
    };
    let chunk = (s * d.v_depth).max(1);
    if keep == Keep::Nothing {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, o)| work((i, (o, None))));
    } else {
        out.par_chunks_mut(chunk)
            .zip(kept.par_chunks_mut((s * t).max(1)))
            .enumerate()
            .for_each(|(i, (o, kp))| work((i, (o, Some(kp)))));
    }
    (out, kept)
}

/// [B, S, N·H] (heads side by side) → [B, N, S, H].
pub fn to_heads(x: &[f64], b: usize, s: usize, n: usize, h: usize) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for bi in 0..b {
        for si in 0..s {
            for ni in 0..n {
                let src = &x[((bi * s + si) * n + ni) * h..][..h];
                y[((bi * n + ni) * s + si) * h..][..h].copy_from_slice(src);
            }
        }
    }
    y
}

/// [B, N, S, H] → [B, S, N·H].
pub fn from_heads(x: &[f64], b: usize, s: usize, n: usize, h: usize) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for bi in 0..b {
        for ni in 0..n {
            for si in 0..s {
                let src = &x[((bi * n + ni) * s + si) * h..][..h];
                y[((bi * s + si) * n + ni) * h..][..h].copy_from_slice(src);
            }
        }
    }
    y
}

/// Concatenates per (batch, head) a past [B, N, P, H] and new rows [B, N, L, H] into [B, N, P + L, H].
pub fn concat_past(
    past: Option<&[f64]>,
    new: &[f64],
    bn: usize,
    p: usize,
    l: usize,
    h: usize,
) -> Vec<f64> {
    let mut y = Vec::with_capacity(bn * (p + l) * h);
    for i in 0..bn {
        if let Some(past) = past {
            y.extend_from_slice(&past[i * p * h..][..p * h]);
        }
        y.extend_from_slice(&new[i * l * h..][..l * h]);
    }
    y
}
