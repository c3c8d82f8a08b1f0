//! MultiHeadAttention (`com.microsoft`): Q, K and V given ([B, S, D], or K and V already split into heads as
//! [B, N, L, H]), an optional packed bias for the three, padding masks, attention bias, past key/values, and the
//! optional pre-softmax scores output `qk`. Semantics and ORT's departures: see [`super::attention`].

use tract_onnx::prelude::tract_ndarray::ArrayD;
use tract_onnx::prelude::*;

use super::attend::{attend, concat_past, from_heads, to_heads, Dims, Keep};
use super::attention::{head_split, unsupported, Bert, Bias, Pad};
use super::kernel::Kernel;
use super::node::{Fact, Node};
use super::util::{f64s, f64s_opt, fact, float_type, shaped};

pub struct Mha;

/// The extents of one MultiHeadAttention node.
struct Geo {
    b: usize,
    s: usize,
    l: usize,
    p: usize,
    heads: usize,
    h: usize,
    hv: usize,
    /// K and V come split into heads ([B, N, L, H]).
    split: bool,
}

impl Geo {
    fn new(
        n: &Node,
        q: &[usize],
        k: &[usize],
        v: &[usize],
        past: Option<&[usize]>,
    ) -> TractResult<Geo> {
        anyhow::ensure!(
            q.len() == 3,
            "query must be (B, S, D), got {q:?} (packed QKV is not implemented)"
        );
        let heads = n.req_int("num_heads")? as usize;
        let h = head_split(q[2], heads, "query width")?;
        let split = k.len() == 4;
        let (l, hv) = match (k.len(), v.len()) {
            (3, 3) => (k[1], head_split(v[2], heads, "value width")?),
            (4, 4) => (k[2], v[3]),
            _ => anyhow::bail!("key {k:?} and value {v:?} must both be (B, L, D) or (B, N, L, H)"),
        };
        let p = past.map_or(0, |s| s.get(2).copied().unwrap_or(0));
        anyhow::ensure!(!(split && p > 0), "past key/values with split K/V");
        Ok(Geo {
            b: q[0],
            s: q[1],
            l,
            p,
            heads,
            h,
            hv,
            split,
        })
    }
}

fn plus_bias(x: &ArrayD<f64>, bias: Option<&[f64]>) -> Vec<f64> {
    let mut y: Vec<f64> = x.iter().copied().collect();
    if let Some(b) = bias {
        let w = b.len();
        y.chunks_mut(w)
            .for_each(|r| r.iter_mut().zip(b).for_each(|(v, c)| *v += c));
    }
    y
}

impl Kernel for Mha {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let q = fact(n, ins, 0)?;
        let dt = float_type(n, q)?;
        let (k, v) = (fact(n, ins, 1)?, fact(n, ins, 2)?);
        let g = Geo::new(
            n,
            &q.1,
            &k.1,
            &v.1,
            ins.get(6).copied().flatten().map(|f| f.1.as_slice()),
        )?;
        let t = g.p + g.l;
        Ok(vec![
            (dt, vec![g.b, g.s, g.heads * g.hv]),
            (dt, vec![g.b, g.heads, t, g.h]),
            (dt, vec![g.b, g.heads, t, g.hv]),
            (dt, vec![g.b, g.heads, g.s, t]),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        unsupported(n, ins, 8, "past_sequence_length (shared KV buffer)")?;
        unsupported(n, ins, 9, "cache_indirection (beam search)")?;
        let (q, k, v) = (f64s(n, ins, 0)?, f64s(n, ins, 1)?, f64s(n, ins, 2)?);
        let (pk, pv) = (f64s_opt(ins, 6)?, f64s_opt(ins, 7)?);
        let g = Geo::new(
            n,
            q.shape(),
            k.shape(),
            v.shape(),
            pk.as_ref().map(|a| a.shape()),
        )?;
        let d = g.heads * g.h;
        let bias = f64s_opt(ins, 3)?;
        let bias = bias.as_ref().map(|a| a.as_slice().expect("standard"));
        if let Some(bias) = bias {
            anyhow::ensure!(
                bias.len() == 2 * d + g.heads * g.hv,
                "bias has {} values, expected 2D + Dv",
                bias.len()
            );
        }
        let qh = to_heads(
            &plus_bias(&q, bias.map(|b| &b[..d])),
            g.b,
            g.s,
            g.heads,
            g.h,
        );
        let (kh, vh) = if g.split {
            (k.iter().copied().collect(), v.iter().copied().collect())
        } else {
            (
                to_heads(
                    &plus_bias(&k, bias.map(|b| &b[d..2 * d])),
                    g.b,
                    g.l,
                    g.heads,
                    g.h,
                ),
                to_heads(
                    &plus_bias(&v, bias.map(|b| &b[2 * d..])),
                    g.b,
                    g.l,
                    g.heads,
                    g.hv,
                ),
            )
        };
        let bn = g.b * g.heads;
        let slice =
            |a: &Option<ArrayD<f64>>| a.as_ref().map(|a| a.as_slice().expect("standard").to_vec());
        let (pk, pv) = (slice(&pk), slice(&pv));
        let kc = concat_past(pk.as_deref(), &kh, bn, g.p, g.l, g.h);
        let vc = concat_past(pv.as_deref(), &vh, bn, g.p, g.l, g.hv);
        let t = g.p + g.l;
        let rows = Bert {
            pad: Pad::parse(ins.get(4).copied().flatten(), g.b, g.s, t, false)?,
            filter: n.float("mask_filter_value", -10000.0),
            causal: n.int("unidirectional", 0) != 0,
            past: g.p,
            bias: Bias::parse(f64s_opt(ins, 5)?, [g.b, g.heads, g.s, t])?,
        };
        let dims = Dims {
            batch: g.b,
            heads: g.heads,
            kv_heads: g.heads,
            rows: g.s,
            keys: t,
            depth: g.h,
            v_depth: g.hv,
        };
        let scale = match n.float("scale", 0.0) {
            0.0 => 1.0 / (g.h as f64).sqrt(),
            x => x,
        };
        let keep = if n.outs.contains(&3) {
            Keep::Scores
        } else {
            Keep::Nothing
        };
        let (out, qk) = attend(dims, &qh, &kc, &vc, scale, &rows, keep);
        Ok(vec![
            shaped(
                &[g.b, g.s, g.heads * g.hv],
                from_heads(&out, g.b, g.s, g.heads, g.hv),
            )?,
            shaped(&[g.b, g.heads, t, g.h], kc)?,
            shaped(&[g.b, g.heads, t, g.hv], vc)?,
            // Not computed unless exposed (an unexposed output is dropped unread).
            if qk.is_empty() {
                Tensor::default()
            } else {
                shaped(&[g.b, g.heads, g.s, t], qk)?
            },
        ])
    }
}
