//! ONNX `Attention` (the ONNX domain, opsets 23 to 25): scaled dot-product attention of Q, K and V given 3-D
//! (B, S, N·H, heads from `q_num_heads`/`kv_num_heads`) or 4-D (B, N, S, H); grouped-query heads (query head n
//! reads key/value head n / (Nq / Nkv), the reference's interleaved repeat); a past key/value cache put before
//! the new keys (outputs `present_key`/`present_value`); `scale` (default 1/√H), `softcap`, and the additive bias
//! of mask, causal frontier, window and `nonpad_kv_seqlen`. Output 3, `qk_matmul_output`, holds the scores at the
//! stage `qk_matmul_output_mode` names: 0 the scaled Q·Kᵀ, 1 after softcap, 2 after the bias, 3 the
//! probabilities. This module owns the node (shapes, heads, cache); [`super::onnx_attn_rows`] computes each head.
//!
//! Written from the ONNX spec and its reference implementation (onnx/reference/ops/op_attention.py), which
//! decide the corners: softcap `c·tanh(x/c)` applies before the bias; a row whose bias is −∞ for every key has
//! zero probabilities, so a zero row of Y. Mode 0 with a softcap follows the spec and the op's function body
//! (the raw scores); the Python reference hands out the capped ones there. `softmax_precision` is accepted and
//! ignored: phantom computes everything in f64, at least the precision any value of it asks for.
//!
//! tract imports ONNX Attention itself, without most of this; [`claims`] takes every ONNX-domain Attention node,
//! renamed `phantom.OnnxAttention` to keep it apart from `com.microsoft` Attention ([`super::attention`]).

use rayon::prelude::*;
use tract_onnx::pb::NodeProto;
use tract_onnx::prelude::*;

use super::attend::{concat_past, from_heads, to_heads, Dims};
use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::onnx_attn_rows::{stage, Bias, Rule};
use super::util::{fact, float_type, opt, shaped, values};

/// The name phantom's ONNX Attention goes by (after `phantom.`).
pub const OP: &str = "OnnxAttention";

/// ONNX's Attention, taken by [`claims`] and renamed [`OP`] (plain `Attention` is com.microsoft's).
pub(super) const TABLE: &[Row] = &[Row::new(OP, &OnnxAttention)];

/// Whether `n` is the ONNX-domain Attention (not ORT's `com.microsoft` one).
pub fn claims(n: &NodeProto) -> bool {
    n.op_type == "Attention" && (n.domain.is_empty() || n.domain == "ai.onnx")
}

/// The extents of one node, heads split out: Q (B, Nq, S, H), K (B, Nkv, P + L, H), V (B, Nkv, P + L, Hv).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Geo {
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    rows: usize,
    /// New keys (L) and past keys (P; `None` without a past cache).
    new: usize,
    past: Option<usize>,
    depth: usize,
    v_depth: usize,
    /// Q, K, V and Y are 3-D, heads side by side.
    packed: bool,
}

/// `total / heads`, where it divides.
fn per_head(total: usize, heads: usize, what: &str) -> TractResult<usize> {
    anyhow::ensure!(
        heads > 0 && total.is_multiple_of(heads),
        "{what} {total} is not divisible by its {heads} heads"
    );
    Ok(total / heads)
}

impl Geo {
    /// The extents from the shapes of Q, K, V and the past key and value, checked against each other.
    fn new(
        n: &Node,
        q: &[usize],
        k: &[usize],
        v: &[usize],
        past: [Option<&[usize]>; 2],
    ) -> TractResult<Geo> {
        let mut g = match (q.len(), k.len(), v.len()) {
            (3, 3, 3) => Geo::packed(n, q, k, v)?,
            (4, 4, 4) => Geo::split(q, k, v)?,
            _ => anyhow::bail!("Q {q:?}, K {k:?} and V {v:?} must all be 3-D or all 4-D"),
        };
        let (kl, vl) = if g.packed { (k[1], v[1]) } else { (k[2], v[2]) };
        anyhow::ensure!(
            k[0] == g.batch && v[0] == g.batch && kl == vl && (g.packed || v[1] == g.kv_heads),
            "K {k:?} and V {v:?} do not match Q {q:?}"
        );
        anyhow::ensure!(
            g.kv_heads > 0 && g.q_heads.is_multiple_of(g.kv_heads),
            "{} query heads cannot share {} key/value heads",
            g.q_heads,
            g.kv_heads
        );
        g.past = g.past_len(past)?;
        Ok(g)
    }

    /// 3-D Q (B, S, Nq·H), K (B, L, Nkv·H), V (B, L, Nkv·Hv), the head counts from the attributes.
    fn packed(n: &Node, q: &[usize], k: &[usize], v: &[usize]) -> TractResult<Geo> {
        let heads = |name| -> TractResult<usize> {
            let h = n.req_int(name)?;
            anyhow::ensure!(h > 0, "{name} must be positive, got {h}");
            Ok(h as usize)
        };
        let (nq, nkv) = (heads("q_num_heads")?, heads("kv_num_heads")?);
        let depth = per_head(q[2], nq, "Q width")?;
        anyhow::ensure!(
            per_head(k[2], nkv, "K width")? == depth,
            "K's head size is not Q's ({depth})"
        );
        let v_depth = per_head(v[2], nkv, "V width")?;
        let (batch, rows, new) = (q[0], q[1], k[1]);
        let (q_heads, kv_heads, past, packed) = (nq, nkv, None, true);
        Ok(Geo {
            batch,
            q_heads,
            kv_heads,
            rows,
            new,
            past,
            depth,
            v_depth,
            packed,
        })
    }

    /// 4-D Q (B, Nq, S, H), K (B, Nkv, L, H), V (B, Nkv, L, Hv).
    fn split(q: &[usize], k: &[usize], v: &[usize]) -> TractResult<Geo> {
        anyhow::ensure!(k[3] == q[3], "K {k:?} and Q {q:?} differ in head size");
        let (batch, q_heads, rows, depth) = (q[0], q[1], q[2], q[3]);
        let (kv_heads, new, v_depth) = (k[1], k[2], v[3]);
        let (past, packed) = (None, false);
        Ok(Geo {
            batch,
            q_heads,
            kv_heads,
            rows,
            new,
            past,
            depth,
            v_depth,
            packed,
        })
    }

    /// The past length from past_key and past_value, which come together as (B, Nkv, P, H) and (B, Nkv, P, Hv).
    fn past_len(&self, past: [Option<&[usize]>; 2]) -> TractResult<Option<usize>> {
        let (pk, pv) = match past {
            [None, None] => return Ok(None),
            [Some(pk), Some(pv)] => (pk, pv),
            _ => anyhow::bail!("past_key and past_value must be given together"),
        };
        let (b, nkv) = (self.batch, self.kv_heads);
        anyhow::ensure!(
            pk.len() == 4 && pv.len() == 4 && pk[2] == pv[2] && pk[..2] == [b, nkv] && pv[..2] == [b, nkv],
            "past_key {pk:?} and past_value {pv:?} must be (B, Nkv, P, _) with B = {b}, Nkv = {nkv}"
        );
        anyhow::ensure!(
            pk[3] == self.depth && pv[3] == self.v_depth,
            "past_key {pk:?} and past_value {pv:?} differ from the new keys' head sizes"
        );
        Ok(Some(pk[2]))
    }

    /// Q (B, Nq, S, H), and K (B, Nkv, T, H) and V (B, Nkv, T, Hv) with the past before the new keys: the
    /// inputs split into heads where packed.
    fn heads(&self, qkv: [&Tensor; 3], past: [&Past; 2]) -> TractResult<[Vec<f64>; 3]> {
        let (b, nq, nkv, s, l) = (self.batch, self.q_heads, self.kv_heads, self.rows, self.new);
        let [mut q, mut k, mut v] = [
            values::<f64>(qkv[0])?,
            values::<f64>(qkv[1])?,
            values::<f64>(qkv[2])?,
        ];
        if self.packed {
            q = to_heads(&q, b, s, nq, self.depth);
            k = to_heads(&k, b, l, nkv, self.depth);
            v = to_heads(&v, b, l, nkv, self.v_depth);
        }
        let p = self.past.unwrap_or(0);
        let [pk, pv] = past.map(|x| x.as_ref().map(|(data, _)| data.as_slice()));
        let k = concat_past(pk, &k, b * nkv, p, l, self.depth);
        let v = concat_past(pv, &v, b * nkv, p, l, self.v_depth);
        Ok([q, k, v])
    }

    /// The extents of one head's attention.
    fn dims(&self) -> Dims {
        Dims {
            batch: self.batch,
            heads: self.q_heads,
            kv_heads: self.kv_heads,
            rows: self.rows,
            keys: self.keys(),
            depth: self.depth,
            v_depth: self.v_depth,
        }
    }

    /// All keys: past and new (T).
    fn keys(&self) -> usize {
        self.past.unwrap_or(0) + self.new
    }

    /// Output shapes by slot: Y, present_key, present_value, qk_matmul_output.
    fn shapes(&self) -> [Vec<usize>; 4] {
        let (b, nq, nkv, s, t) = (
            self.batch,
            self.q_heads,
            self.kv_heads,
            self.rows,
            self.keys(),
        );
        let y = match self.packed {
            true => vec![b, s, nq * self.v_depth],
            false => vec![b, nq, s, self.v_depth],
        };
        [
            y,
            vec![b, nkv, t, self.depth],
            vec![b, nkv, t, self.v_depth],
            vec![b, nq, s, t],
        ]
    }
}

/// A past key or value: its row-major values and shape (`None` where absent).
type Past = Option<(Vec<f64>, Vec<usize>)>;

/// Input `slot` as a [`Past`].
fn read(ins: &[Option<&Tensor>], slot: usize) -> TractResult<Past> {
    match ins.get(slot).copied().flatten() {
        Some(t) => Ok(Some((values::<f64>(t)?, t.shape().to_vec()))),
        None => Ok(None),
    }
}

struct OnnxAttention;

impl Kernel for OnnxAttention {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (q, k, v) = (fact(n, ins, 0)?, fact(n, ins, 1)?, fact(n, ins, 2)?);
        let (dt, vt) = (float_type(n, q)?, float_type(n, v)?);
        let past = [4, 5].map(|s| ins.get(s).copied().flatten().map(|f| f.1.as_slice()));
        let g = Geo::new(n, &q.1, &k.1, &v.1, past)?;
        stage(n)?;
        let [y, pk, pv, qk] = g.shapes();
        Ok(vec![(dt, y), (dt, pk), (vt, pv), (dt, qk)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (q, k, v) = (opt(n, ins, 0)?, opt(n, ins, 1)?, opt(n, ins, 2)?);
        let (pk, pv) = (read(ins, 4)?, read(ins, 5)?);
        let past = [&pk, &pv].map(|p| p.as_ref().map(|(_, s)| s.as_slice()));
        let g = Geo::new(n, q.shape(), k.shape(), v.shape(), past)?;
        let [q, k, v] = g.heads([q, k, v], [&pk, &pv])?;
        let (b, nq, s) = (g.batch, g.q_heads, g.rows);
        let bias = Bias::new(n, ins, [b, nq, s, g.keys()], g.past)?;
        let rule = Rule {
            d: g.dims(),
            // The attribute, or 1/√H.
            scale: n
                .attr("scale")
                .map_or(1.0 / (g.depth as f64).sqrt(), |a| a.f as f64),
            cap: n.float("softcap", 0.0),
            bias: &bias,
            keep: n.outs.contains(&3).then(|| stage(n)).transpose()?,
        };
        let heads: Vec<(Vec<f64>, Vec<f64>)> = (0..b * nq)
            .into_par_iter()
            .map(|idx| rule.head(idx, &q, &k, &v))
            .collect();
        let (y, qk): (Vec<Vec<f64>>, Vec<Vec<f64>>) = heads.into_iter().unzip();
        let mut y: Vec<f64> = y.concat();
        if g.packed {
            y = from_heads(&y, b, s, nq, g.v_depth);
        }
        let [ys, pks, pvs, qks] = g.shapes();
        let qk = match rule.keep {
            Some(_) => shaped(&qks, qk.concat())?,
            None => Tensor::default(),
        };
        Ok(vec![
            shaped(&ys, y)?,
            shaped(&pks, k)?,
            shaped(&pvs, v)?,
            qk,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::AttributeProto;

    /// An ONNX Attention node with integer and float attributes, `inputs` ONNX input names ("" for absent) and
    /// all four outputs.
    fn node(ints: &[(&str, i64)], floats: &[(&str, f32)], inputs: &[&str]) -> Node {
        let attr = |name: &str| AttributeProto {
            name: name.into(),
            ..Default::default()
        };
        let attribute = (ints
            .iter()
            .map(|&(name, i)| AttributeProto { i, ..attr(name) }))
        .chain(
            floats
                .iter()
                .map(|&(name, f)| AttributeProto { f, ..attr(name) }),
        )
        .collect();
        Node::new(&NodeProto {
            op_type: format!("phantom.{OP}"),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: ["Y", "present_key", "present_value", "qk"]
                .map(String::from)
                .to_vec(),
            attribute,
            ..Default::default()
        })
    }

    fn t(shape: &[usize], v: &[f64]) -> Tensor {
        shaped(shape, v.to_vec()).unwrap()
    }

    /// The four outputs' values (an output not computed is empty).
    fn run(n: &Node, ins: &[Option<&Tensor>]) -> Vec<Vec<f64>> {
        let outs = OnnxAttention.eval(n, ins).unwrap();
        outs.iter()
            .map(|o| match o.len() {
                0 => vec![],
                _ => values::<f64>(o).unwrap(),
            })
            .collect()
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12 || x == y, "{a:?} vs {b:?}");
        }
    }

    /// A 4-D input of `heads` heads of width 1: (1, heads, len / heads, 1).
    fn col(heads: usize, v: &[f64]) -> Tensor {
        t(&[1, heads, v.len() / heads, 1], v)
    }

    const QKV: &[&str] = &["q", "k", "v"];

    #[test]
    fn causal_rows_see_keys_up_to_their_own() {
        // Equal scores: each row averages the values it sees.
        let (q, v) = (col(1, &[0.0; 2]), col(1, &[1.0, 3.0]));
        let ins = [Some(&q), Some(&q), Some(&v)];
        close(&run(&node(&[], &[], QKV), &ins)[0], &[2.0, 2.0]);
        close(
            &run(&node(&[("is_causal", 1)], &[], QKV), &ins)[0],
            &[1.0, 2.0],
        );
    }

    #[test]
    fn query_heads_share_kv_heads_in_groups() {
        // Four query heads on two key/value heads (values 10 and 20): heads 0, 1 read 10, heads 2, 3 read 20.
        let (q, k, v) = (col(4, &[1.0; 4]), col(2, &[1.0; 2]), col(2, &[10.0, 20.0]));
        let out = run(&node(&[], &[], QKV), &[Some(&q), Some(&k), Some(&v)]);
        close(&out[0], &[10.0, 10.0, 20.0, 20.0]);
    }

    #[test]
    fn packed_heads_come_back_side_by_side() {
        // 3-D, two heads of width 1: Y (B, S, N·Hv) holds each head's value in its column.
        let (q, v) = (t(&[1, 1, 2], &[0.0; 2]), t(&[1, 1, 2], &[5.0, 7.0]));
        let n = node(&[("q_num_heads", 2), ("kv_num_heads", 2)], &[], QKV);
        close(&run(&n, &[Some(&q), Some(&q), Some(&v)])[0], &[5.0, 7.0]);
    }

    #[test]
    fn qk_output_stages_follow_the_mode() {
        // Q·K = 2 with scale 1, softcap 1, a float mask of 0.5: raw 2, capped tanh 2, biased tanh 2 + 0.5.
        let (q, k, v, m) = (
            col(1, &[2.0]),
            col(1, &[1.0]),
            col(1, &[4.0]),
            t(&[1], &[0.5]),
        );
        let want = [2.0, 2f64.tanh(), 2f64.tanh() + 0.5, 1.0];
        for (mode, w) in want.iter().enumerate() {
            let ints = [("qk_matmul_output_mode", mode as i64)];
            let n = node(
                &ints,
                &[("scale", 1.0), ("softcap", 1.0)],
                &["q", "k", "v", "m"],
            );
            let out = run(&n, &[Some(&q), Some(&k), Some(&v), Some(&m)]);
            close(&out[3], &[*w]);
            close(&out[0], &[4.0]);
        }
    }

    #[test]
    fn fully_masked_rows_are_zero_and_short_masks_pad_with_neg_inf() {
        // Row 0's mask forbids its one given key and the padded second; row 1 keeps key 0 only.
        let (q, v) = (col(1, &[0.0; 2]), col(1, &[1.0, 3.0]));
        let m = Tensor::from_shape(&[2, 1], &[false, true]).unwrap();
        let n = node(&[("qk_matmul_output_mode", 3)], &[], &["q", "k", "v", "m"]);
        let out = run(&n, &[Some(&q), Some(&q), Some(&v), Some(&m)]);
        close(&out[0], &[0.0, 1.0]);
        close(&out[3], &[0.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn bad_shapes_are_errors() {
        // Three query heads cannot share two key/value heads; a width of 3 does not split into 2 heads.
        let (q, k) = (col(3, &[0.0; 3]), col(2, &[0.0; 2]));
        let n = node(&[], &[], QKV);
        assert!(OnnxAttention
            .eval(&n, &[Some(&q), Some(&k), Some(&k)])
            .is_err());
        let q3 = t(&[1, 1, 3], &[0.0; 3]);
        let n3 = node(&[("q_num_heads", 2), ("kv_num_heads", 1)], &[], QKV);
        assert!(OnnxAttention
            .eval(&n3, &[Some(&q3), Some(&q3), Some(&q3)])
            .is_err());
    }
}
