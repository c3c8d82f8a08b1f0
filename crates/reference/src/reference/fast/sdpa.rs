//! f64 scaled dot-product attention (tract's `Sdpa`, behind ONNX `Attention`): per batch and query head,
//! `softmax(scale · Q·Kᵀ + mask) · V` with key/value heads shared by groups of query heads, an additive float
//! mask or a boolean one (false → −∞), and tract's causal mask (query row i of M sees keys up to i + N − M).
//! tract's own f64 path cannot build its matmul kernels and falls back to f32; this one accumulates in f64.

use rayon::prelude::*;

use super::gemm::{matmul, Mat};

/// The extents of one attention: Q [B, Hq, M, D], K [B, Hk, N, D], V [B, Hk, N, Dv].
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub batch: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    pub rows: usize,
    pub cols: usize,
    pub depth: usize,
    pub v_depth: usize,
}

/// A mask broadcast over [B, Hq, M, N]: its values and the element stride of each axis (0 where broadcast).
pub enum Mask<'a> {
    None,
    Causal,
    Add(&'a [f64], [usize; 4]),
    Keep(&'a [bool], [usize; 4]),
}

/// Returns the attention output [B, Hq, M, Dv], row-major.
pub fn attention(d: Dims, q: &[f64], k: &[f64], v: &[f64], mask: &Mask, scale: f64) -> Vec<f64> {
    let (m, n) = (d.rows, d.cols);
    let group = d.q_heads / d.kv_heads.max(1);
    let mut out = vec![0.0; d.batch * d.q_heads * m * d.v_depth];
    if out.is_empty() {
        return out;
    }
    out.par_chunks_mut(m * d.v_depth)
        .enumerate()
        .for_each(|(bh, o)| {
            let (b, h) = (bh / d.q_heads, bh % d.q_heads);
            let kv = b * d.kv_heads + h / group.max(1);
            let qh = &q[bh * m * d.depth..][..m * d.depth];
            let kh = &k[kv * n * d.depth..][..n * d.depth];
            let vh = &v[kv * n * d.v_depth..][..n * d.v_depth];
            let mut s = vec![0.0; m * n];
            // Kᵀ: element (j, c) of the [D, N] matrix is K[c, j].
            matmul(
                m,
                d.depth,
                n,
                Mat::rows(qh, d.depth),
                Mat {
                    data: kh,
                    rs: 1,
                    cs: d.depth,
                },
                &mut s,
            );
            for (i, row) in s.chunks_exact_mut(n).enumerate() {
                masked_softmax(row, scale, |j| mask_at(mask, [b, h, i, j], m, n));
            }
            matmul(
                m,
                n,
                d.v_depth,
                Mat::rows(&s, n),
                Mat::rows(vh, d.v_depth),
                o,
            );
        });
    out
}

/// What the mask adds at one score: 0, a finite value, or −∞ (masked out).
fn mask_at(mask: &Mask, at: [usize; 4], m: usize, n: usize) -> f64 {
    let offset = |st: &[usize; 4]| at.iter().zip(st).map(|(a, s)| a * s).sum::<usize>();
    match mask {
        Mask::None => 0.0,
        // tract's causal mask adds the lowest finite value, not −∞.
        Mask::Causal if at[3] + m.min(n) > at[2] + n => f64::MIN,
        Mask::Causal => 0.0,
        Mask::Add(v, st) => v[offset(st)],
        Mask::Keep(v, st) if v[offset(st)] => 0.0,
        Mask::Keep(..) => f64::NEG_INFINITY,
    }
}

/// `row ← softmax(scale · row + mask)` in f64. A row masked out entirely attends to nothing: all zeros, as ONNX
/// `Attention` defines it (onnx.reference's `_softmax`), not the NaN of exp(−∞ − (−∞)).
fn masked_softmax(row: &mut [f64], scale: f64, mask: impl Fn(usize) -> f64) {
    for (j, x) in row.iter_mut().enumerate() {
        *x = *x * scale + mask(j);
    }
    let max = row.iter().fold(f64::NEG_INFINITY, |a, &b| {
        if b.is_nan() || a.is_nan() {
            f64::NAN
        } else {
            a.max(b)
        }
    });
    if max == f64::NEG_INFINITY {
        row.fill(0.0);
        return;
    }
    let mut sum = 0.0;
    for x in row.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    row.iter_mut().for_each(|x| *x /= sum);
}
