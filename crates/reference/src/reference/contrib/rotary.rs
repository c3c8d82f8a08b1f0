//! Rotary position embeddings: the rotation GroupQueryAttention applies with `do_rotary`, and RotaryEmbedding
//! (`com.microsoft`) on its own.
//!
//! As ORT's CPU kernel computes RotaryEmbedding: its `scale` attribute is read but never applied (phantom ignores
//! it too); the cache row of position p is `cos[p, :R/2]` — ORT reads it at a row stride of R/2, which is the same
//! when the cache is R/2 wide (its documented shape for a partial rotary dim) and differs otherwise.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact, float_type, opt, shaped, values};

pub(super) const TABLE: &[Row] = &[Row::new("RotaryEmbedding", &Rotary)];

/// Rotates the first 2·cos.len() values of one head vector by the angles whose cosines and sines are given:
/// half-split pairs (k, k + R/2), or interleaved pairs (2k, 2k + 1). The rest passes through.
pub fn rotate(x: &mut [f64], cos: &[f64], sin: &[f64], interleaved: bool) {
    let half = cos.len();
    for k in 0..half {
        let (i, j) = if interleaved {
            (2 * k, 2 * k + 1)
        } else {
            (k, k + half)
        };
        let (a, b) = (x[i], x[j]);
        x[i] = a * cos[k] - b * sin[k];
        x[j] = a * sin[k] + b * cos[k];
    }
}

/// A cos/sin cache pair of shape (max positions, R/2), row by position.
pub struct Cache {
    cos: Vec<f64>,
    sin: Vec<f64>,
    pub half: usize,
    rows: usize,
}

impl Cache {
    pub fn new(n: &Node, ins: &[Option<&Tensor>], cos_slot: usize) -> TractResult<Cache> {
        let (cos, sin) = (f64s(n, ins, cos_slot)?, f64s(n, ins, cos_slot + 1)?);
        anyhow::ensure!(
            cos.ndim() == 2 && cos.shape() == sin.shape(),
            "cos_cache {:?} and sin_cache {:?} must be one 2-D shape",
            cos.shape(),
            sin.shape()
        );
        Ok(Cache {
            half: cos.shape()[1],
            rows: cos.shape()[0],
            cos: cos.iter().copied().collect(),
            sin: sin.iter().copied().collect(),
        })
    }

    /// Rotates the first `2·half` values of `x` (`half` ≤ the cache's width) to position `p`.
    pub fn apply(&self, x: &mut [f64], p: i64, half: usize, interleaved: bool) -> TractResult<()> {
        anyhow::ensure!(
            p >= 0 && (p as usize) < self.rows,
            "position {p} is outside the rotary cache's {} rows",
            self.rows
        );
        let at = p as usize * self.half;
        anyhow::ensure!(
            2 * half <= x.len(),
            "rotary dim {} exceeds the head size {}",
            2 * half,
            x.len()
        );
        rotate(
            x,
            &self.cos[at..at + half],
            &self.sin[at..at + half],
            interleaved,
        );
        Ok(())
    }
}

struct Rotary;

impl Kernel for Rotary {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        Ok(vec![(float_type(n, x)?, x.1.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let cache = Cache::new(n, ins, 2)?;
        let shape = x.shape().to_vec();
        let four = match shape.len() {
            3 => false,
            4 => true,
            r => anyhow::bail!("input must be (B, S, hidden) or (B, N, S, H), got rank {r}"),
        };
        let (b, s) = (shape[0], if four { shape[2] } else { shape[1] });
        let hidden = if four { shape[1] * shape[3] } else { shape[2] };
        let (rdim, heads) = (
            n.int("rotary_embedding_dim", 0) as usize,
            n.int("num_heads", 0) as usize,
        );
        let h = if rdim == 0 {
            2 * cache.half
        } else {
            hidden / heads.max(1)
        };
        let heads = if heads > 0 { heads } else { hidden / h.max(1) };
        anyhow::ensure!(
            h > 0 && heads * h == hidden,
            "head size {h} × {heads} heads ≠ hidden {hidden}"
        );
        let r = if rdim > 0 { rdim } else { h };
        anyhow::ensure!(
            r % 2 == 0 && r / 2 <= cache.half,
            "rotary dim {r} needs a cache {} wide",
            r / 2
        );
        let pos = values::<i64>(opt(n, ins, 1)?)?;
        let position = |bi: usize, si: usize| {
            if pos.len() == 1 {
                pos[0] + si as i64
            } else {
                pos[bi * s + si]
            }
        };
        anyhow::ensure!(
            pos.len() == 1 || pos.len() == b * s,
            "position_ids must hold 1 or B·S values"
        );
        let interleaved = n.int("interleaved", 0) != 0;
        let mut y: Vec<f64> = x.iter().copied().collect();
        for bi in 0..b {
            for si in 0..s {
                for ni in 0..heads {
                    let at = if four {
                        ((bi * heads + ni) * s + si) * h
                    } else {
                        ((bi * s + si) * heads + ni) * h
                    };
                    cache.apply(&mut y[at..at + h], position(bi, si), r / 2, interleaved)?;
                }
            }
        }
        Ok(vec![shaped(&shape, y)?])
    }
}
