//! BERT-style attention (`com.microsoft`): Attention (the QKV projection inside) and MultiHeadAttention (Q, K, V
//! given), with their padding masks, attention bias, past key/values and causal masking, on [`super::attend`].
//!
//! As ORT's CPU kernel computes them: padding masks add `mask_filter_value` (−10000 by default) rather than
//! exclude keys, so a fully padded row equals the unmasked one; a mask of shape (B, 1) is a placeholder and
//! ignored; (3B + 2) masks use their first B entries as key lengths; raw masks keep the keys whose value is > 0; the
//! causal mask (`unidirectional`) adds float32's lowest value to key j > P + i (P the past length). ORT leaves the
//! last query row unmasked, which differs from this only for MultiHeadAttention with fewer queries than keys and no
//! past; phantom masks every row, as the op's definition reads. Share-buffer KV caches (`past_sequence_length`),
//! beam-search `cache_indirection` and packed 5-D QKV are not implemented (ORT's CPU has none either): such a
//! node is reported as unavailable.

use tract_onnx::prelude::*;

use super::super::fast::gemm::{matmul, Mat};
use super::attend::{attend, concat_past, from_heads, to_heads, Dims, Keep, Rows};
use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, f64s_opt, fact, float_type, shaped, values};

pub(super) const TABLE: &[Row] = &[
    Row::new("Attention", &Fused),
    Row::new("MultiHeadAttention", &super::mha::Mha),
];

/// float32's lowest value, the causal fill ORT adds.
const LOW: f64 = f32::MIN as f64;

/// A padding mask, by its form.
pub(super) enum Pad {
    None,
    /// Key j of batch b is masked iff j ≥ len[b].
    Lengths(Vec<i64>),
    /// Key j is masked iff j ≥ end[b] or j < start[b].
    Span(Vec<i64>, Vec<i64>),
    /// Raw mask [B, T] or [B, S, T] (`rows` = 1 or S): masked iff ≤ 0.
    Raw {
        v: Vec<i64>,
        rows: usize,
        keys: usize,
    },
}

impl Pad {
    pub(super) fn parse(
        t: Option<&Tensor>,
        b: usize,
        s: usize,
        keys: usize,
        two_b: bool,
    ) -> TractResult<Pad> {
        let Some(t) = t else { return Ok(Pad::None) };
        let v = values::<i64>(t)?;
        let shape = t.shape();
        Ok(match shape.len() {
            1 if v.len() == b => Pad::Lengths(v),
            1 if v.len() == 2 * b && two_b => Pad::Span(v[..b].to_vec(), v[b..].to_vec()),
            1 if v.len() == 3 * b + 2 => Pad::Lengths(v[..b].to_vec()),
            2 if shape[1] == 1 => Pad::None,
            2 if shape == [b, keys] => Pad::Raw { v, rows: 1, keys },
            3 if shape == [b, s, keys] => Pad::Raw { v, rows: s, keys },
            _ => anyhow::bail!("mask of shape {shape:?} is not a form phantom reads (B = {b}, S = {s}, T = {keys})"),
        })
    }

    fn masked(&self, b: usize, i: usize, j: usize) -> bool {
        let j = j as i64;
        match self {
            Pad::None => false,
            Pad::Lengths(len) => j >= len[b],
            Pad::Span(end, start) => j >= end[b] || j < start[b],
            Pad::Raw { v, rows, keys } => v[(b * rows + i.min(rows - 1)) * keys + j as usize] <= 0,
        }
    }
}

/// An additive bias broadcast over [B, N, S, T] (strides 0 where broadcast).
pub(super) struct Bias {
    v: Vec<f64>,
    strides: [usize; 4],
}

impl Bias {
    pub(super) fn parse(
        a: Option<tract_onnx::prelude::tract_ndarray::ArrayD<f64>>,
        full: [usize; 4],
    ) -> TractResult<Option<Bias>> {
        let Some(a) = a else { return Ok(None) };
        anyhow::ensure!(
            a.ndim() == 4,
            "attention_bias must be 4-D, got {:?}",
            a.shape()
        );
        let sh = a.shape();
        let mut strides = [0; 4];
        let mut acc = 1;
        for ax in (0..4).rev() {
            anyhow::ensure!(
                sh[ax] == full[ax] || sh[ax] == 1,
                "attention_bias of shape {sh:?} does not broadcast to {full:?}"
            );
            strides[ax] = if sh[ax] == 1 { 0 } else { acc };
            acc *= sh[ax];
        }
        Ok(Some(Bias {
            v: a.iter().copied().collect(),
            strides,
        }))
    }

    /// The bias of (batch b, head n, query i, key j).
    pub(super) fn at(&self, b: usize, n: usize, i: usize, j: usize) -> f64 {
        let st = self.strides;
        self.v[b * st[0] + n * st[1] + i * st[2] + j * st[3]]
    }
}

/// Row adjustments of Attention and MultiHeadAttention.
pub(super) struct Bert {
    pub pad: Pad,
    pub filter: f64,
    pub causal: bool,
    pub past: usize,
    pub bias: Option<Bias>,
}

impl Rows for Bert {
    fn adjust(&self, b: usize, n: usize, i: usize, lo: usize, scores: &mut [f64]) {
        for (o, x) in scores.iter_mut().enumerate() {
            let j = lo + o;
            if let Some(bias) = &self.bias {
                *x += bias.at(b, n, i, j);
            }
            if self.pad.masked(b, i, j) {
                *x += self.filter;
            }
            if self.causal && j > self.past + i {
                *x += LOW;
            }
        }
    }
}

pub(super) fn head_split(total: usize, heads: usize, what: &str) -> TractResult<usize> {
    anyhow::ensure!(
        heads > 0 && total.is_multiple_of(heads),
        "{what} {total} is not divisible by num_heads {heads}"
    );
    Ok(total / heads)
}

/// Attention's Q, K and V widths: `qkv_hidden_sizes`, or a third of the weights' columns each.
fn qkv_sizes(n: &Node, cols: usize) -> TractResult<(usize, usize)> {
    let sizes = n.ints("qkv_hidden_sizes");
    if sizes.is_empty() {
        anyhow::ensure!(
            cols.is_multiple_of(3),
            "weights have {cols} columns, not three equal blocks"
        );
        return Ok((cols / 3, cols / 3));
    }
    anyhow::ensure!(
        sizes.len() == 3 && sizes[0] == sizes[1],
        "qkv_hidden_sizes {sizes:?}: Q and K must match"
    );
    anyhow::ensure!(
        (2 * sizes[0] + sizes[2]) as usize == cols,
        "qkv_hidden_sizes {sizes:?} do not sum to {cols}"
    );
    Ok((sizes[0] as usize, sizes[2] as usize))
}

pub(super) fn unsupported(
    n: &Node,
    ins: &[Option<&Tensor>],
    slot: usize,
    what: &str,
) -> TractResult<()> {
    anyhow::ensure!(
        ins.get(slot).copied().flatten().is_none(),
        "{} with {what} is not implemented in phantom's reference",
        n.op()
    );
    Ok(())
}

struct Fused;

impl Kernel for Fused {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let dt = float_type(n, x)?;
        let w = fact(n, ins, 1)?;
        anyhow::ensure!(
            x.1.len() == 3 && w.1.len() == 2,
            "input must be (B, S, hidden), weights 2-D"
        );
        let heads = n.req_int("num_heads")? as usize;
        let (_, dv) = qkv_sizes(n, w.1[1])?;
        let hv = head_split(dv, heads, "V width")?;
        let p = ins
            .get(4)
            .copied()
            .flatten()
            .map_or(0, |f| f.1.get(3).copied().unwrap_or(0));
        Ok(vec![
            (dt, vec![x.1[0], x.1[1], dv]),
            (dt, vec![2, x.1[0], heads, p + x.1[1], hv]),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        unsupported(n, ins, 6, "past_sequence_length (shared KV buffer)")?;
        anyhow::ensure!(
            n.int("do_rotary", 0) == 0,
            "Attention with do_rotary is not implemented (nor in ORT's CPU)"
        );
        let x = f64s(n, ins, 0)?;
        let w = f64s(n, ins, 1)?;
        let (b, s, din) = (x.shape()[0], x.shape()[1], x.shape()[2]);
        let cols = w.shape()[1];
        anyhow::ensure!(
            w.shape()[0] == din,
            "weights have {} rows, input width {din}",
            w.shape()[0]
        );
        let heads = n.req_int("num_heads")? as usize;
        let (dq, dv) = qkv_sizes(n, cols)?;
        let (h, hv) = (
            head_split(dq, heads, "Q width")?,
            head_split(dv, heads, "V width")?,
        );
        let mut qkv = vec![0.0; b * s * cols];
        matmul(
            b * s,
            din,
            cols,
            Mat::rows(x.as_slice().expect("standard"), din),
            Mat::rows(w.as_slice().expect("standard"), cols),
            &mut qkv,
        );
        if let Some(bias) = f64s_opt(ins, 2)? {
            anyhow::ensure!(
                bias.len() == cols,
                "bias has {} values, weights {cols} columns",
                bias.len()
            );
            qkv.chunks_mut(cols)
                .for_each(|r| r.iter_mut().zip(bias.iter()).for_each(|(v, b)| *v += b));
        }
        let part = |lo: usize, w: usize| -> Vec<f64> {
            qkv.chunks(cols)
                .flat_map(|r| r[lo..lo + w].to_vec())
                .collect()
        };
        let q = to_heads(&part(0, dq), b, s, heads, h);
        let (k_new, v_new) = (
            to_heads(&part(dq, dq), b, s, heads, h),
            to_heads(&part(2 * dq, dv), b, s, heads, hv),
        );
        let past = f64s_opt(ins, 4)?;
        let p = past.as_ref().map_or(0, |a| a.shape()[3]);
        let half = past.as_ref().map(|a| a.len() / 2);
        let pk = past
            .as_ref()
            .map(|a| &a.as_slice().expect("standard")[..half.unwrap_or(0)]);
        let pv = past
            .as_ref()
            .map(|a| &a.as_slice().expect("standard")[half.unwrap_or(0)..]);
        let t = p + s;
        let k = concat_past(pk, &k_new, b * heads, p, s, h);
        let v = concat_past(pv, &v_new, b * heads, p, s, hv);
        let rows = Bert {
            pad: Pad::parse(ins.get(3).copied().flatten(), b, s, t, true)?,
            filter: n.float("mask_filter_value", -10000.0),
            causal: n.int("unidirectional", 0) != 0,
            past: p,
            bias: Bias::parse(f64s_opt(ins, 5)?, [b, heads, s, t])?,
        };
        let d = Dims {
            batch: b,
            heads,
            kv_heads: heads,
            rows: s,
            keys: t,
            depth: h,
            v_depth: hv,
        };
        let scale = match n.float("scale", 0.0) {
            0.0 => 1.0 / (h as f64).sqrt(),
            x => x,
        };
        let (out, _) = attend(d, &q, &k, &v, scale, &rows, Keep::Nothing);
        let present = if n.outs.contains(&1) {
            anyhow::ensure!(
                h == hv,
                "present stacks K and V, whose head sizes differ ({h} and {hv})"
            );
            let mut kv = k;
            kv.extend(v);
            shaped(&[2, b, heads, t, hv], kv)?
        } else {
            Tensor::default()
        };
        Ok(vec![
            shaped(&[b, s, dv], from_heads(&out, b, s, heads, hv))?,
            present,
        ])
    }
}
