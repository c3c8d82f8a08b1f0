//! GroupQueryAttention (`com.microsoft`, onnxruntime-genai's decoders): query heads sharing key/value heads, a KV
//! cache given as past key/values plus per-sequence lengths (`seqlens_k` = total length − 1), rotary embeddings
//! inside (`do_rotary`), a causal local window, softcap, attention bias and a sink logit (smooth softmax).
//!
//! As ORT 1.31's CPU kernel computes it: a local window of W keeps W keys, the current one included
//! (a − W < j ≤ a); softcap applies to the scaled scores before the attention bias; in a first prompt, rotary
//! positions are `position_ids[0] + s` (or s) for every sequence, else `seqlens_k + 1 − S + s` unless position ids
//! are given; rows of a right-padded prompt past the sequence's length attend to all its keys; `present` holds
//! past ‖ new rows, zero beyond. Not implemented (the node is reported unavailable): a static KV cache
//! (`total_sequence_length` ≤ the past buffer's length), `sliding_window_cache`, quantized caches, q/k norms.

use tract_onnx::prelude::*;

use super::attend::{attend, from_heads, to_heads, Dims, Keep, Rows};
use super::attention::{unsupported, Bias};
use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::rotary::Cache;
use super::util::{f64s, f64s_opt, fact, float_type, opt, shaped, values};

pub(super) const TABLE: &[Row] = &[Row::new("GroupQueryAttention", &Gqa)];

struct Gqa;

/// Extents: query heads, key/value heads, head size, and whether Q, K and V come packed in the query.
struct Geo {
    b: usize,
    s: usize,
    heads: usize,
    kv: usize,
    h: usize,
    packed: bool,
    /// The past buffer's length.
    p: usize,
}

impl Geo {
    fn new(
        n: &Node,
        q: &[usize],
        key: Option<&[usize]>,
        past: Option<&[usize]>,
    ) -> TractResult<Geo> {
        anyhow::ensure!(q.len() == 3, "query must be (B, S, width), got {q:?}");
        let (heads, kv) = (
            n.req_int("num_heads")? as usize,
            n.req_int("kv_num_heads")? as usize,
        );
        anyhow::ensure!(
            kv > 0 && heads % kv == 0,
            "num_heads {heads} is not a multiple of kv_num_heads {kv}"
        );
        let packed = key.is_none();
        let parts = if packed { heads + 2 * kv } else { heads };
        anyhow::ensure!(
            q[2].is_multiple_of(parts),
            "query width {} is not {parts} heads",
            q[2]
        );
        let p = past.map_or(0, |s| s.get(2).copied().unwrap_or(0));
        Ok(Geo {
            b: q[0],
            s: q[1],
            heads,
            kv,
            h: q[2] / parts,
            packed,
            p,
        })
    }
}

/// Row rules of one GroupQueryAttention evaluation.
struct GqaRows {
    /// Per batch: valid keys (seqlens_k + 1) and past rows used.
    total: Vec<usize>,
    past: Vec<usize>,
    causal: bool,
    window: Option<usize>,
    softcap: f64,
    bias: Option<Bias>,
    sink: Option<Vec<f64>>,
}

impl Rows for GqaRows {
    fn range(&self, b: usize, _n: usize, i: usize, _keys: usize) -> (usize, usize) {
        let tot = self.total[b];
        let eff = if self.causal {
            (self.past[b] + i + 1).min(tot)
        } else {
            tot
        };
        let lo = match self.window {
            Some(w) if eff > w => eff - w,
            _ => 0,
        };
        (lo, eff)
    }

    fn adjust(&self, b: usize, n: usize, i: usize, lo: usize, scores: &mut [f64]) {
        for (o, x) in scores.iter_mut().enumerate() {
            if self.softcap > 0.0 {
                *x = self.softcap * (*x / self.softcap).tanh();
            }
            if let Some(bias) = &self.bias {
                *x += bias.at(b, n, i, lo + o);
            }
        }
    }

    fn sink(&self, n: usize) -> Option<f64> {
        self.sink
            .as_ref()
            .map(|s| s[n.min(s.len().saturating_sub(1))])
    }
}

impl Kernel for Gqa {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let q = fact(n, ins, 0)?;
        let dt = float_type(n, q)?;
        let key = ins.get(1).copied().flatten().map(|f| f.1.as_slice());
        let g = Geo::new(
            n,
            &q.1,
            key,
            ins.get(3).copied().flatten().map(|f| f.1.as_slice()),
        )?;
        // A dynamic cache: the total length is the past buffer's plus the new rows (a static one is refused).
        let t = g.p + g.s;
        Ok(vec![
            (dt, vec![g.b, g.s, g.heads * g.h]),
            (dt, vec![g.b, g.kv, t, g.h]),
            (dt, vec![g.b, g.kv, t, g.h]),
            (dt, vec![g.b, g.heads, g.s, t]),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        refuse_unimplemented(n, ins)?;
        let q_in = f64s(n, ins, 0)?;
        let key = ins.get(1).copied().flatten();
        let (pk, pv) = (f64s_opt(ins, 3)?, f64s_opt(ins, 4)?);
        let g = Geo::new(
            n,
            q_in.shape(),
            key.map(|t| t.shape()),
            pk.as_ref().map(|a| a.shape()),
        )?;
        let (b, s, h) = (g.b, g.s, g.h);
        let (seqlens, first) = sequence_lengths(n, ins, &g)?;
        let lp = g.p + s;
        let (mut q, mut k, v) = self.split(n, ins, &q_in, &g)?;
        if n.int("do_rotary", 0) != 0 {
            rotate_all(n, ins, &g, &seqlens, first, &mut q, g.heads)?;
            rotate_all(n, ins, &g, &seqlens, first, &mut k, g.kv)?;
        }
        let (total, past) = used_rows(&seqlens, first, &g)?;
        let slice = |a: &Option<tract_onnx::prelude::tract_ndarray::ArrayD<f64>>| {
            a.as_ref().map(|a| a.as_slice().expect("standard").to_vec())
        };
        let present_k = present(slice(&pk).as_deref(), &k, &past, &g, lp);
        let present_v = present(slice(&pv).as_deref(), &v, &past, &g, lp);
        let rows = GqaRows::new(n, ins, total, past, [b, g.heads, s, lp])?;
        let keep = match n.int("qk_output", 0) {
            1 => Keep::Scores,
            2 => Keep::Probs,
            _ => Keep::Nothing,
        };
        let dims = Dims {
            batch: b,
            heads: g.heads,
            kv_heads: g.kv,
            rows: s,
            keys: lp,
            depth: h,
            v_depth: h,
        };
        let scale = match n.float("scale", 0.0) {
            0.0 => 1.0 / (h as f64).sqrt(),
            x => x,
        };
        let (out, qk) = attend(dims, &q, &present_k, &present_v, scale, &rows, keep);
        Ok(vec![
            shaped(&[b, s, g.heads * h], from_heads(&out, b, s, g.heads, h))?,
            shaped(&[b, g.kv, lp, h], present_k)?,
            shaped(&[b, g.kv, lp, h], present_v)?,
            if qk.is_empty() {
                Tensor::default()
            } else {
                shaped(&[b, g.heads, s, lp], qk)?
            },
        ])
    }
}

/// Refuses the inputs and attributes phantom's reference does not implement (quantized caches, q/k norms,
/// `sliding_window_cache`).
fn refuse_unimplemented(n: &Node, ins: &[Option<&Tensor>]) -> TractResult<()> {
    for (slot, what) in [
        (12, "k_scale (quantized cache)"),
        (13, "v_scale (quantized cache)"),
        (14, "q_norm_weight"),
        (15, "k_norm_weight"),
    ] {
        unsupported(n, ins, slot, what)?;
    }
    anyhow::ensure!(
        n.int("sliding_window_cache", 0) == 0,
        "sliding_window_cache is not implemented in phantom's reference"
    );
    Ok(())
}

/// `seqlens_k`, one per sequence, checked against the batch and `total_sequence_length` (a dynamic cache only:
/// the past buffer's length plus the new rows), and whether this is a first prompt (every row new).
fn sequence_lengths(n: &Node, ins: &[Option<&Tensor>], g: &Geo) -> TractResult<(Vec<i64>, bool)> {
    let (b, s) = (g.b, g.s);
    let seqlens = values::<i64>(opt(n, ins, 5)?)?;
    let tsl = values::<i64>(opt(n, ins, 6)?)?
        .first()
        .copied()
        .unwrap_or(0);
    anyhow::ensure!(
        seqlens.len() == b,
        "seqlens_k has {} values, batch {b}",
        seqlens.len()
    );
    anyhow::ensure!(
        tsl as usize == g.p + s,
        "total_sequence_length {tsl} ≠ past length {} + {s} new: a static KV cache is not implemented in phantom's reference",
        g.p
    );
    Ok((seqlens, s == tsl as usize))
}

/// Per sequence: its valid keys (`seqlens_k` + 1) and the past rows it uses, checked to fit the past buffer and
/// the new rows.
fn used_rows(seqlens: &[i64], first: bool, g: &Geo) -> TractResult<(Vec<usize>, Vec<usize>)> {
    let s = g.s;
    let lp = g.p + s;
    let mut total = vec![];
    let mut past = vec![];
    for (bi, &sl) in seqlens.iter().enumerate() {
        let tot = sl + 1;
        let pb = if first { 0 } else { tot - s as i64 };
        anyhow::ensure!(
            tot >= 1 && tot as usize <= lp && pb >= 0 && pb as usize <= g.p,
            "seqlens_k[{bi}] = {sl} does not fit a past of {} and {s} new rows",
            g.p
        );
        total.push(tot as usize);
        past.push(pb as usize);
    }
    Ok((total, past))
}

impl GqaRows {
    /// The row rules from the node's attributes (causal, local window, softcap, smooth softmax), its attention bias
    /// (over `full` = [B, N, S, keys]) and head sinks, for sequences with `total` keys and `past` past rows.
    fn new(
        n: &Node,
        ins: &[Option<&Tensor>],
        total: Vec<usize>,
        past: Vec<usize>,
        full: [usize; 4],
    ) -> TractResult<GqaRows> {
        let sink = match f64s_opt(ins, 11)? {
            Some(hs) => Some(hs.iter().copied().collect()),
            None if n.int("smooth_softmax", -1) == 1 => Some(vec![0.0]),
            None => None,
        };
        let window = n.int("local_window_size", -1);
        Ok(GqaRows {
            total,
            past,
            causal: n.int("causal", 1) != 0,
            window: (window >= 0).then_some(window as usize),
            softcap: n.float("softcap", 0.0),
            bias: Bias::parse(f64s_opt(ins, 10)?, full)?,
            sink,
        })
    }
}

impl Gqa {
    /// Q [B, N, S, H], new K and V [B, Nkv, S, H] from separate or packed inputs.
    fn split(
        &self,
        n: &Node,
        ins: &[Option<&Tensor>],
        q: &tract_onnx::prelude::tract_ndarray::ArrayD<f64>,
        g: &Geo,
    ) -> TractResult<(Vec<f64>, Vec<f64>, Vec<f64>)> {
        let (b, s, h) = (g.b, g.s, g.h);
        if !g.packed {
            let (k, v) = (f64s(n, ins, 1)?, f64s(n, ins, 2)?);
            anyhow::ensure!(
                k.shape() == [b, s, g.kv * h] && v.shape() == k.shape(),
                "key {:?} and value {:?} must be (B, S, kv_num_heads·H)",
                k.shape(),
                v.shape()
            );
            let flat = |a: &tract_onnx::prelude::tract_ndarray::ArrayD<f64>| {
                a.iter().copied().collect::<Vec<f64>>()
            };
            return Ok((
                to_heads(&flat(q), b, s, g.heads, h),
                to_heads(&flat(&k), b, s, g.kv, h),
                to_heads(&flat(&v), b, s, g.kv, h),
            ));
        }
        let w = q.shape()[2];
        let rows: Vec<&[f64]> = q.as_slice().expect("standard").chunks(w).collect();
        let part = |lo: usize, width: usize| {
            rows.iter()
                .flat_map(|r| r[lo..lo + width].to_vec())
                .collect::<Vec<f64>>()
        };
        let (dq, dk) = (g.heads * h, g.kv * h);
        Ok((
            to_heads(&part(0, dq), b, s, g.heads, h),
            to_heads(&part(dq, dk), b, s, g.kv, h),
            to_heads(&part(dq + dk, dk), b, s, g.kv, h),
        ))
    }
}

/// Rotates every head of `x` [B, heads, S, H] to its position.
fn rotate_all(
    n: &Node,
    ins: &[Option<&Tensor>],
    g: &Geo,
    seqlens: &[i64],
    first: bool,
    x: &mut [f64],
    heads: usize,
) -> TractResult<()> {
    let cache = Cache::new(n, ins, 7)?;
    let pos_ids = match ins.get(9).copied().flatten() {
        Some(t) => Some(values::<i64>(t)?),
        None => None,
    };
    let interleaved = n.int("rotary_interleaved", 0) != 0;
    let (s, h) = (g.s, g.h);
    for bi in 0..g.b {
        for si in 0..s {
            let p = match (&pos_ids, first) {
                (Some(ids), true) => ids[0] + si as i64,
                (None, true) => si as i64,
                (Some(ids), false) => ids[bi * s + si],
                (None, false) => seqlens[bi] + 1 - s as i64 + si as i64,
            };
            for ni in 0..heads {
                let at = ((bi * heads + ni) * s + si) * h;
                cache.apply(&mut x[at..at + h], p, cache.half, interleaved)?;
            }
        }
    }
    Ok(())
}

/// The present cache [B, Nkv, Lp, H]: per sequence its used past rows, then the new rows, zeros beyond.
fn present(past: Option<&[f64]>, new: &[f64], used: &[usize], g: &Geo, lp: usize) -> Vec<f64> {
    let (s, h) = (g.s, g.h);
    let mut y = vec![0.0; g.b * g.kv * lp * h];
    for bi in 0..g.b {
        for ki in 0..g.kv {
            let dst = &mut y[(bi * g.kv + ki) * lp * h..][..lp * h];
            let pb = used[bi];
            if let Some(past) = past {
                dst[..pb * h].copy_from_slice(&past[(bi * g.kv + ki) * g.p * h..][..pb * h]);
            }
            dst[pb * h..(pb + s) * h].copy_from_slice(&new[(bi * g.kv + ki) * s * h..][..s * h]);
        }
    }
    y
}
