//! One head of ONNX `Attention` ([`super::onnx_attention`]) at a time: scores Q·Kᵀ (f64 GEMM), scaled, soft-capped,
//! plus the additive bias, softmax, times V; and the stage of the scores `qk_matmul_output_mode` asks for.
//!
//! The bias is the sum of the `attn_mask` (a float mask as given, a boolean one as 0 where true and −∞ where
//! false), the causal frontier (`is_causal`), the sliding window (`left_window_size`/`right_window_size`, opset 25)
//! and the padding of `nonpad_kv_seqlen` (opset 24), each of the last three 0 where a key is allowed and −∞ where
//! it is not. As the ONNX reference (onnx/reference/ops/op_attention.py) builds it: the mask broadcasts
//! right-aligned to (B, Nq, S, T) (so a 3-D mask is (heads, queries, keys)), and its key axis, when shorter than
//! the T keys, is padded with −∞, never broadcast; causal and window are aligned bottom-right by an offset — the
//! past length with a `past_key`, `nonpad_kv_seqlen[b] − S` with `nonpad_kv_seqlen`, 0 otherwise — so query i sees
//! key j iff j ≤ i + offset, and i + offset − left ≤ j ≤ i + offset + right for each window bound ≥ 0. A row
//! whose bias is −∞ for every key gets zero probabilities. The bias is built one row at a time: as a (B, Nq, S, T)
//! tensor it would not fit in memory for a long context.

use tract_onnx::prelude::*;

use super::super::fast::gemm::{matmul, Mat};
use super::attend::Dims;
use super::node::Node;
use super::util::values;

/// An attention mask broadcast over (B, Nq, S, T): strides 0 on broadcast axes, keys past `width` at −∞.
struct Mask {
    v: Vec<f64>,
    /// Strides of (batch, head, query); the key axis is always contiguous.
    strides: [usize; 3],
    /// Length of the mask's key axis (≤ T).
    width: usize,
}

impl Mask {
    /// Reads `t` (bool or numeric, rank 1 to 4) against the extents (B, Nq, S, T).
    fn parse(t: &Tensor, full: [usize; 4]) -> TractResult<Mask> {
        let shape = t.shape();
        anyhow::ensure!(
            (1..=4).contains(&shape.len()),
            "attn_mask must have rank 1 to 4, got shape {shape:?}"
        );
        let width = shape[shape.len() - 1];
        anyhow::ensure!(
            width <= full[3],
            "attn_mask of shape {shape:?} has more keys than the {} the node attends",
            full[3]
        );
        // Right-align the leading axes on (B, Nq, S).
        let lead = &shape[..shape.len() - 1];
        let mut strides = [0; 3];
        let mut acc = width;
        for (k, &d) in lead.iter().enumerate().rev() {
            let ax = 3 - lead.len() + k;
            anyhow::ensure!(
                d == full[ax] || d == 1,
                "attn_mask of shape {shape:?} does not broadcast to {full:?}"
            );
            strides[ax] = if d == 1 { 0 } else { acc };
            acc *= d;
        }
        let v = if t.datum_type() == bool::datum_type() {
            let keep = values::<bool>(t)?;
            keep.into_iter()
                .map(|k| if k { 0.0 } else { f64::NEG_INFINITY })
                .collect()
        } else {
            values::<f64>(t)?
        };
        Ok(Mask { v, strides, width })
    }

    /// Adds the mask of (batch b, head n, query i) to `row` (one value per key).
    fn add(&self, b: usize, n: usize, i: usize, row: &mut [f64]) {
        let st = self.strides;
        let base = &self.v[b * st[0] + n * st[1] + i * st[2]..][..self.width];
        let (given, padded) = row.split_at_mut(self.width);
        given.iter_mut().zip(base).for_each(|(x, m)| *x += m);
        padded.fill(f64::NEG_INFINITY);
    }
}

/// Every additive term of one node's scores.
pub(super) struct Bias {
    mask: Option<Mask>,
    causal: bool,
    /// Window bounds (−1: unbounded).
    left: i64,
    right: i64,
    /// Queries per head (S), for the per-batch offset of `nonpad_kv_seqlen`.
    rows: usize,
    /// Past length (P, the offset with a `past_key`).
    past: usize,
    /// `nonpad_kv_seqlen`: the valid keys of each batch.
    nonpad: Option<Vec<i64>>,
}

impl Bias {
    /// The bias of a node with extents (B, Nq, S, T) and a past of `past` keys, from its attributes and its
    /// `attn_mask` (slot 3) and `nonpad_kv_seqlen` (slot 6) inputs.
    pub(super) fn new(
        n: &Node,
        ins: &[Option<&Tensor>],
        full: [usize; 4],
        past: Option<usize>,
    ) -> TractResult<Bias> {
        let mask = match ins.get(3).copied().flatten() {
            Some(t) => Some(Mask::parse(t, full)?),
            None => None,
        };
        let nonpad = match ins.get(6).copied().flatten() {
            Some(t) => Some(values::<i64>(t)?),
            None => None,
        };
        if let Some(lens) = &nonpad {
            anyhow::ensure!(
                lens.len() == full[0],
                "nonpad_kv_seqlen has {} values for a batch of {}",
                lens.len(),
                full[0]
            );
            anyhow::ensure!(
                past.is_none(),
                "nonpad_kv_seqlen cannot be combined with past_key/past_value"
            );
        }
        let (left, right) = (
            n.int("left_window_size", -1),
            n.int("right_window_size", -1),
        );
        anyhow::ensure!(
            left >= -1 && right >= -1,
            "window sizes must be -1 or nonnegative, got left {left}, right {right}"
        );
        Ok(Bias {
            mask,
            causal: n.int("is_causal", 0) != 0,
            left,
            right,
            rows: full[2],
            past: past.unwrap_or(0),
            nonpad,
        })
    }

    /// How many keys precede batch `b`'s query block: where the causal and window frontiers sit.
    fn offset(&self, b: usize) -> i64 {
        match &self.nonpad {
            Some(lens) => lens[b].saturating_sub(self.rows as i64),
            None => self.past as i64,
        }
    }

    /// Whether query i of batch b may see key j under the causal, window and padding rules.
    fn allowed(&self, b: usize, i: usize, j: usize) -> bool {
        // Saturating: `nonpad_kv_seqlen` is data, and may be anything.
        let (pos, j) = ((i as i64).saturating_add(self.offset(b)), j as i64);
        let causal = !self.causal || j <= pos;
        let left = self.left < 0 || pos.saturating_sub(j) <= self.left;
        let right = self.right < 0 || j.saturating_sub(pos) <= self.right;
        let valid = self.nonpad.as_ref().is_none_or(|lens| j < lens[b]);
        causal && left && right && valid
    }

    /// Writes the bias of (batch b, head n, query i) into `row`, one value per key.
    pub(super) fn row(&self, b: usize, n: usize, i: usize, row: &mut [f64]) {
        for (j, x) in row.iter_mut().enumerate() {
            *x = if self.allowed(b, i, j) {
                0.0
            } else {
                f64::NEG_INFINITY
            };
        }
        if let Some(mask) = &self.mask {
            mask.add(b, n, i, row);
        }
    }
}

/// The stage of the scores `qk_matmul_output` holds.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Stage {
    Raw,
    Capped,
    Biased,
    Probs,
}

pub(super) fn stage(n: &Node) -> TractResult<Stage> {
    Ok(match n.int("qk_matmul_output_mode", 0) {
        0 => Stage::Raw,
        1 => Stage::Capped,
        2 => Stage::Biased,
        3 => Stage::Probs,
        m => anyhow::bail!("qk_matmul_output_mode {m} is not 0, 1, 2 or 3"),
    })
}

/// What every head's scores go through.
pub(super) struct Rule<'a> {
    pub d: Dims,
    pub scale: f64,
    /// Softcap (0: none).
    pub cap: f64,
    pub bias: &'a Bias,
    /// The stage to hand back as `qk_matmul_output`, when asked.
    pub keep: Option<Stage>,
}

/// softmax over `row` in place as the reference computes it: 0 where the bias `row_bias` forbids every key (a
/// fully masked row), 0 where every score is −∞; NaN scores spread over the row.
fn softmax(row: &mut [f64], row_bias: &[f64]) {
    if row_bias.iter().all(|&x| x == f64::NEG_INFINITY) {
        row.fill(0.0);
        return;
    }
    let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let m = if m == f64::NEG_INFINITY { 0.0 } else { m };
    let mut sum = 0.0;
    for x in row.iter_mut() {
        *x = (*x - m).exp();
        sum += *x;
    }
    let sum = if sum == 0.0 { 1.0 } else { sum };
    row.iter_mut().for_each(|x| *x /= sum);
}

impl Rule<'_> {
    /// The scores of batch `b`, query head `n` (S × T, in place) through scale, softcap, bias and softmax;
    /// returns the kept stage (empty when none is asked for).
    fn rows(&self, b: usize, n: usize, sc: &mut [f64]) -> Vec<f64> {
        let t = self.d.keys;
        let mut kept = Vec::with_capacity(if self.keep.is_some() { sc.len() } else { 0 });
        let mut keep = |at: Stage, row: &[f64]| {
            if self.keep == Some(at) {
                kept.extend_from_slice(row);
            }
        };
        let mut row_bias = vec![0.0; t];
        for (i, row) in sc.chunks_exact_mut(t.max(1)).enumerate() {
            row.iter_mut().for_each(|x| *x *= self.scale);
            keep(Stage::Raw, row);
            if self.cap != 0.0 {
                row.iter_mut()
                    .for_each(|x| *x = self.cap * (*x / self.cap).tanh());
            }
            keep(Stage::Capped, row);
            self.bias.row(b, n, i, &mut row_bias);
            row.iter_mut().zip(&row_bias).for_each(|(x, c)| *x += c);
            keep(Stage::Biased, row);
            softmax(row, &row_bias);
            keep(Stage::Probs, row);
        }
        kept
    }

    /// Y (S × Hv) and the kept scores of batch `b`, query head `n`, from Q (B, Nq, S, H) and all keys and values.
    pub(super) fn head(&self, idx: usize, q: &[f64], k: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let d = self.d;
        let (s, t, h, hv) = (d.rows, d.keys, d.depth, d.v_depth);
        let (b, n) = (idx / d.heads, idx % d.heads);
        // Query heads share key/value heads in consecutive groups.
        let kv = b * d.kv_heads + n / (d.heads / d.kv_heads);
        let qh = &q[idx * s * h..][..s * h];
        let kh = &k[kv * t * h..][..t * h];
        let vh = &v[kv * t * hv..][..t * hv];
        let mut sc = vec![0.0; s * t];
        matmul(
            s,
            h,
            t,
            Mat::rows(qh, h),
            Mat {
                data: kh,
                rs: 1,
                cs: h,
            },
            &mut sc,
        );
        let kept = self.rows(b, n, &mut sc);
        let mut y = vec![0.0; s * hv];
        matmul(s, t, hv, Mat::rows(&sc, t), Mat::rows(vh, hv), &mut y);
        (y, kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO: f64 = f64::NEG_INFINITY;

    /// A bias without mask or window.
    fn causal(rows: usize, past: usize, nonpad: Option<Vec<i64>>) -> Bias {
        Bias {
            mask: None,
            causal: true,
            left: -1,
            right: -1,
            rows,
            past,
            nonpad,
        }
    }

    /// The bias rows of batch 0, head `n`, queries 0..rows, over `t` keys.
    fn rows(bias: &Bias, n: usize, t: usize) -> Vec<Vec<f64>> {
        (0..bias.rows)
            .map(|i| {
                let mut r = vec![f64::NAN; t];
                bias.row(0, n, i, &mut r);
                r
            })
            .collect()
    }

    #[test]
    fn causal_with_past_aligns_bottom_right() {
        // Two queries after a past of one key: query i sees keys 0..=i + 1.
        assert_eq!(
            rows(&causal(2, 1, None), 0, 3),
            [[0.0, 0.0, NO], [0.0, 0.0, 0.0]]
        );
    }

    #[test]
    fn nonpad_lengths_shift_the_frontier_and_pad() {
        // Three valid keys of four, two queries: offset 1; key 3 is padding.
        let b = causal(2, 0, Some(vec![3]));
        assert_eq!(rows(&b, 0, 4), [[0.0, 0.0, NO, NO], [0.0, 0.0, 0.0, NO]]);
        // One valid key, two queries: offset −1 leaves query 0 no key at all.
        assert_eq!(
            rows(&causal(2, 0, Some(vec![1])), 0, 2),
            [[NO, NO], [0.0, NO]]
        );
    }

    #[test]
    fn windows_bound_both_sides() {
        let b = Bias {
            causal: false,
            left: 1,
            right: 0,
            ..causal(3, 0, None)
        };
        assert_eq!(
            rows(&b, 0, 3),
            [[0.0, NO, NO], [0.0, 0.0, NO], [NO, 0.0, 0.0]]
        );
    }

    #[test]
    fn masks_broadcast_right_aligned_and_pad_keys() {
        // A 3-D mask is (heads, queries, keys); its one key column is padded to two with −∞.
        let m = Tensor::from_shape(&[2, 1, 1], &[0.5f64, -1.0]).unwrap();
        let mask = Mask::parse(&m, [1, 2, 2, 2]).unwrap();
        let b = Bias {
            mask: Some(mask),
            causal: false,
            ..causal(2, 0, None)
        };
        assert_eq!(rows(&b, 1, 2), [[-1.0, NO], [-1.0, NO]]);
        let keep = Tensor::from_shape(&[2], &[true, false]).unwrap();
        let b = Bias {
            mask: Some(Mask::parse(&keep, [1, 1, 1, 2]).unwrap()),
            ..causal(1, 1, None)
        };
        assert_eq!(rows(&b, 0, 2), [[0.0, NO]]);
        assert!(Mask::parse(&m, [1, 3, 2, 2]).is_err());
    }

    #[test]
    fn softcap_bounds_scores() {
        // Scores 10 and −10 capped at 2 become ±2·tanh 5; softmax then weighs them accordingly.
        let bias = causal(1, 0, None);
        let rule = Rule {
            d: Dims {
                batch: 1,
                heads: 1,
                kv_heads: 1,
                rows: 1,
                keys: 2,
                depth: 1,
                v_depth: 1,
            },
            scale: 1.0,
            cap: 2.0,
            bias: &Bias {
                causal: false,
                ..bias
            },
            keep: Some(Stage::Capped),
        };
        let mut sc = [10.0, -10.0];
        let kept = rule.rows(0, 0, &mut sc);
        let c = 2.0 * 5f64.tanh();
        assert_eq!(kept, [c, -c]);
        let p0 = 1.0 / (1.0 + (-2.0 * c).exp());
        assert!((sc[0] - p0).abs() < 1e-15 && (sc[1] - (1.0 - p0)).abs() < 1e-15);
    }
}
