//! ONNX `LinearAttention` (opset 27; tract has no kernel) in f64: a recurrent state S (d_k × d_v per key/value
//! head) updated token by token and read by the queries. Q (B, T, H_q·d_k), K (B, T, H_kv·d_k), V (B, T, H_kv·d_v)
//! packed; past_state (B, H_kv, d_k, d_v) optional (zeros where absent); decay g (B, T, H_kv) or (B, T, H_kv·d_k),
//! in log space; beta β (B, T, H_kv) or (B, T, 1). Per token, by `update_rule`:
//! `linear` S += k ⊗ v; `gated` S = e^g·S + k ⊗ v; `delta` S += k ⊗ β(v − Sᵀk); `gated_delta` S = e^g·S, then
//! S += k ⊗ β(v − Sᵀk); and o = scale·qᵀS, query head h reading key/value head h / (H_q / H_kv) (the
//! reference's interleaved repeat). `scale` 0 (the default) means 1/√d_k. Output (B, T, H_q·d_v) and
//! present_state, the final S. `chunk_size` is a tuning hint, ignored.
//!
//! Written from the spec and ONNX's reference (op_linear_attention.py), which decide the corners: decay is
//! required by the gated rules and refused by the others, beta likewise by the delta rules. The reference
//! accumulates in float32; phantom in f64.

use rayon::prelude::*;
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, float_type, opt, shaped, string, values};

/// Claimed in any domain: tract has no kernel for LinearAttention.
pub(super) const TABLE: &[Row] = &[Row::any_domain("LinearAttention", &LinearAttention)];

/// The recurrence `update_rule` names: whether it decays the state, whether it writes the delta.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rule {
    gated: bool,
    delta: bool,
}

impl Rule {
    fn new(n: &Node) -> TractResult<Rule> {
        let (gated, delta) = match string(n, "update_rule", "gated_delta").as_str() {
            "linear" => (false, false),
            "gated" => (true, false),
            "delta" => (false, true),
            "gated_delta" => (true, true),
            other => anyhow::bail!(
                "LinearAttention `{}`: update_rule `{other}` is not one of linear, gated, delta, gated_delta",
                n.proto.name
            ),
        };
        Ok(Rule { gated, delta })
    }
}

/// The extents of one node.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Geo {
    batch: usize,
    steps: usize,
    q_heads: usize,
    kv_heads: usize,
    dk: usize,
    dv: usize,
    /// Decay values per token and key/value head: 1 (per head) or d_k (per key dimension); 0 without decay.
    decay: usize,
    /// Beta values per token: H_kv or 1; 0 without beta.
    beta: usize,
}

/// A positive head-count attribute.
fn heads(n: &Node, name: &str) -> TractResult<usize> {
    let h = n.req_int(name)?;
    anyhow::ensure!(
        h > 0,
        "LinearAttention `{}`: {name} must be positive, got {h}",
        n.proto.name
    );
    Ok(h as usize)
}

impl Geo {
    /// The extents from the inputs' shapes by ONNX slot (Q, K, V, past_state, decay, beta), checked.
    fn new(n: &Node, s: &[Option<&[usize]>], rule: Rule) -> TractResult<Geo> {
        let name = &n.proto.name;
        let (nq, nkv) = (heads(n, "q_num_heads")?, heads(n, "kv_num_heads")?);
        anyhow::ensure!(
            nq.is_multiple_of(nkv),
            "LinearAttention `{name}`: {nq} query heads cannot share {nkv} key/value heads"
        );
        let need = |i: usize| {
            s.get(i)
                .copied()
                .flatten()
                .ok_or_else(|| anyhow::anyhow!("LinearAttention `{name}` lacks its input {i}"))
        };
        let (q, k, v) = (need(0)?, need(1)?, need(2)?);
        let [b, t, qw] = q[..] else {
            anyhow::bail!("LinearAttention `{name}`: query {q:?} must be (B, T, H_q·d_k)");
        };
        anyhow::ensure!(
            k.len() == 3 && v.len() == 3 && k[..2] == [b, t] && v[..2] == [b, t],
            "LinearAttention `{name}`: key {k:?} and value {v:?} must be (B, T, _) like query {q:?}"
        );
        anyhow::ensure!(
            qw.is_multiple_of(nq) && k[2] == nkv * (qw / nq) && v[2].is_multiple_of(nkv),
            "LinearAttention `{name}`: query {q:?}, key {k:?}, value {v:?} do not split into {nq} and {nkv} heads"
        );
        let (dk, dv) = (qw / nq, v[2] / nkv);
        if let Some(p) = s.get(3).copied().flatten() {
            anyhow::ensure!(
                p == [b, nkv, dk, dv],
                "LinearAttention `{name}`: past_state {p:?} must be ({b}, {nkv}, {dk}, {dv})"
            );
        }
        let decay = Geo::per_token(n, s, 4, "decay", rule.gated, [nkv, nkv * dk], [b, t])?;
        let beta = Geo::per_token(n, s, 5, "beta", rule.delta, [nkv, 1], [b, t])?;
        let (batch, steps, q_heads, kv_heads) = (b, t, nq, nkv);
        Ok(Geo {
            batch,
            steps,
            q_heads,
            kv_heads,
            dk,
            dv,
            decay: decay / nkv,
            beta,
        })
    }

    /// The last extent of the per-token input at `slot` (B, T, w), w one of `widths`; 0 where absent. It must be
    /// given where `needed`, and absent elsewhere.
    fn per_token(
        n: &Node,
        s: &[Option<&[usize]>],
        slot: usize,
        what: &str,
        needed: bool,
        widths: [usize; 2],
        bt: [usize; 2],
    ) -> TractResult<usize> {
        let name = &n.proto.name;
        let rule = string(n, "update_rule", "gated_delta");
        match (s.get(slot).copied().flatten(), needed) {
            (None, false) => Ok(0),
            (None, true) => {
                anyhow::bail!("LinearAttention `{name}`: update_rule `{rule}` needs {what}")
            }
            (Some(_), false) => {
                anyhow::bail!("LinearAttention `{name}`: update_rule `{rule}` takes no {what}")
            }
            (Some(d), true) => {
                anyhow::ensure!(
                    d.len() == 3 && d[..2] == bt && widths.contains(&d[2]),
                    "LinearAttention `{name}`: {what} {d:?} must be ({}, {}, w) with w one of {widths:?}",
                    bt[0],
                    bt[1]
                );
                Ok(d[2])
            }
        }
    }

    /// Output shapes by slot: output, present_state.
    fn shapes(&self) -> [Vec<usize>; 2] {
        let (b, t, nkv) = (self.batch, self.steps, self.kv_heads);
        [
            vec![b, t, self.q_heads * self.dv],
            vec![b, nkv, self.dk, self.dv],
        ]
    }
}

/// The inputs' values, row-major (`None` for an absent optional input).
struct Data {
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    past: Option<Vec<f64>>,
    decay: Option<Vec<f64>>,
    beta: Option<Vec<f64>>,
}

/// One key/value head's recurrence (the rule shows in which of decay and beta are present).
struct Recurrence<'a> {
    g: Geo,
    scale: f64,
    data: &'a Data,
}

impl Recurrence<'_> {
    /// Key/value head `h` of batch `b`: its final state (d_k × d_v) and its query heads' outputs, by token, then
    /// query head of the group, then d_v.
    fn head(&self, b: usize, h: usize) -> (Vec<f64>, Vec<f64>) {
        let Geo {
            steps,
            q_heads,
            kv_heads,
            dk,
            dv,
            ..
        } = self.g;
        let d = self.data;
        let group = q_heads / kv_heads;
        let mut s = match &d.past {
            Some(p) => p[(b * kv_heads + h) * dk * dv..][..dk * dv].to_vec(),
            None => vec![0.0; dk * dv],
        };
        let mut out = Vec::with_capacity(steps * group * dv);
        for t in 0..steps {
            let row = b * steps + t;
            let k = &d.k[(row * kv_heads + h) * dk..][..dk];
            let mut v = d.v[(row * kv_heads + h) * dv..][..dv].to_vec();
            if let Some(decay) = &d.decay {
                let w = self.g.decay;
                let g = &decay[(row * kv_heads + h) * w..][..w];
                for (i, srow) in s.chunks_mut(dv).enumerate() {
                    let f = g[if w == 1 { 0 } else { i }].exp();
                    srow.iter_mut().for_each(|x| *x *= f);
                }
            }
            if let Some(beta) = &d.beta {
                let w = self.g.beta;
                let bt = beta[row * w + if w == 1 { 0 } else { h }];
                for (m, vm) in v.iter_mut().enumerate() {
                    let got: f64 = (0..dk).map(|i| s[i * dv + m] * k[i]).sum();
                    *vm = bt * (*vm - got);
                }
            }
            for (i, srow) in s.chunks_mut(dv).enumerate() {
                srow.iter_mut().zip(&v).for_each(|(x, vm)| *x += k[i] * vm);
            }
            for hq in h * group..(h + 1) * group {
                let q = &d.q[(row * q_heads + hq) * dk..][..dk];
                out.extend(
                    (0..dv)
                        .map(|m| self.scale * (0..dk).map(|i| q[i] * s[i * dv + m]).sum::<f64>()),
                );
            }
        }
        (s, out)
    }
}

/// The optional input at `slot`, as f64 values.
fn read(ins: &[Option<&Tensor>], slot: usize) -> TractResult<Option<Vec<f64>>> {
    ins.get(slot)
        .copied()
        .flatten()
        .map(values::<f64>)
        .transpose()
}

struct LinearAttention;

impl Kernel for LinearAttention {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let shapes: Vec<Option<&[usize]>> = ins.iter().map(|f| f.map(|f| f.1.as_slice())).collect();
        let g = Geo::new(n, &shapes, Rule::new(n)?)?;
        let dt = float_type(n, fact(n, ins, 0)?)?;
        // present_state takes past_state's type, or the query's without one.
        let st = match ins.get(3).copied().flatten() {
            Some(p) => float_type(n, p)?,
            None => dt,
        };
        let [y, present] = g.shapes();
        Ok(vec![(dt, y), (st, present)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let shapes: Vec<Option<&[usize]>> = ins.iter().map(|t| t.map(|t| t.shape())).collect();
        // Geo checks that decay and beta are present exactly where the rule reads them.
        let g = Geo::new(n, &shapes, Rule::new(n)?)?;
        let [q, k, v] = [0, 1, 2].map(|s| opt(n, ins, s).and_then(values::<f64>));
        let data = Data {
            q: q?,
            k: k?,
            v: v?,
            past: read(ins, 3)?,
            decay: read(ins, 4)?,
            beta: read(ins, 5)?,
        };
        // The attribute, or 1/√d_k where it is 0 (its default).
        let scale = match n.float("scale", 0.0) {
            0.0 => 1.0 / (g.dk as f64).sqrt(),
            s => s,
        };
        let r = Recurrence {
            g,
            scale,
            data: &data,
        };
        let (b, t, nkv, dv) = (g.batch, g.steps, g.kv_heads, g.dv);
        let heads: Vec<(Vec<f64>, Vec<f64>)> = (0..b * nkv)
            .into_par_iter()
            .map(|bh| r.head(bh / nkv, bh % nkv))
            .collect();
        // Each head's outputs go to its query heads' columns of (B, T, H_q·d_v).
        let width = g.q_heads * dv;
        let run = width / nkv;
        let mut y = vec![0.0; b * t * width];
        for (bh, (_, out)) in heads.iter().enumerate() {
            let (bi, h) = (bh / nkv, bh % nkv);
            for (ti, chunk) in out.chunks(run).enumerate() {
                y[(bi * t + ti) * width + h * run..][..run].copy_from_slice(chunk);
            }
        }
        let state: Vec<f64> = heads.into_iter().flat_map(|(s, _)| s).collect();
        let [ys, ss] = g.shapes();
        Ok(vec![shaped(&ys, y)?, shaped(&ss, state)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, NodeProto};

    /// A node of `rule` with `heads` (query, key/value), `scale`, and `inputs` ONNX input names ("" for absent).
    fn node(rule: &str, heads: (i64, i64), scale: f32, inputs: &[&str]) -> Node {
        let attr = |name: &str| AttributeProto {
            name: name.into(),
            ..Default::default()
        };
        let attribute = vec![
            AttributeProto {
                s: rule.as_bytes().to_vec(),
                ..attr("update_rule")
            },
            AttributeProto {
                i: heads.0,
                ..attr("q_num_heads")
            },
            AttributeProto {
                i: heads.1,
                ..attr("kv_num_heads")
            },
            AttributeProto {
                f: scale,
                ..attr("scale")
            },
        ];
        Node::new(&NodeProto {
            op_type: "LinearAttention".into(),
            name: "la".into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec!["y".into(), "present".into()],
            attribute,
            ..Default::default()
        })
    }

    fn t(shape: &[usize], v: &[f64]) -> Tensor {
        shaped(shape, v.to_vec()).unwrap()
    }

    fn run(n: &Node, ins: &[Option<&Tensor>]) -> Vec<Vec<f64>> {
        let outs = LinearAttention.eval(n, ins).unwrap();
        outs.iter().map(|o| values::<f64>(o).unwrap()).collect()
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        assert!(
            a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12),
            "{a:?} vs {b:?}"
        );
    }

    #[test]
    fn linear_state_sums_outer_products() {
        // d_k = d_v = 1, scale 1: S is the running sum of k·v, each output q·S.
        let (q, k, v) = (
            t(&[1, 2, 1], &[1.0, 2.0]),
            t(&[1, 2, 1], &[3.0, 4.0]),
            t(&[1, 2, 1], &[5.0, 6.0]),
        );
        let out = run(
            &node("linear", (1, 1), 1.0, &["q", "k", "v"]),
            &[Some(&q), Some(&k), Some(&v)],
        );
        close(&out[0], &[15.0, 78.0]);
        close(&out[1], &[39.0]);
    }

    #[test]
    fn gated_delta_decays_then_corrects() {
        // Past S = 2, decay ln 0.5 halves it to 1; β = 0.5, k = 1, v = 3: S = 1 + 0.5·(3 − 1) = 2. Default scale
        // 1/√1.
        let (x, p) = (t(&[1, 1, 1], &[1.0]), t(&[1, 1, 1, 1], &[2.0]));
        let (v, g, b) = (
            t(&[1, 1, 1], &[3.0]),
            t(&[1, 1, 1], &[0.5f64.ln()]),
            t(&[1, 1, 1], &[0.5]),
        );
        let n = node("gated_delta", (1, 1), 0.0, &["q", "k", "v", "p", "g", "b"]);
        let out = run(
            &n,
            &[Some(&x), Some(&x), Some(&v), Some(&p), Some(&g), Some(&b)],
        );
        close(&out[0], &[2.0]);
        close(&out[1], &[2.0]);
    }

    #[test]
    fn query_heads_share_kv_state_in_groups() {
        // Two query heads on one key/value head, d_k = 2, d_v = 1; per-key-dimension decay zeroes dimension 1.
        let (q, k) = (
            t(&[1, 1, 4], &[1.0, 0.0, 0.0, 1.0]),
            t(&[1, 1, 2], &[1.0, 1.0]),
        );
        let (v, g) = (
            t(&[1, 1, 1], &[4.0]),
            t(&[1, 1, 2], &[0.0, f64::NEG_INFINITY]),
        );
        let p = t(&[1, 1, 2, 1], &[1.0, 7.0]);
        let n = node("gated", (2, 1), 1.0, &["q", "k", "v", "p", "g"]);
        let out = run(&n, &[Some(&q), Some(&k), Some(&v), Some(&p), Some(&g)]);
        close(&out[1], &[5.0, 4.0]);
        close(&out[0], &[5.0, 4.0]);
    }

    #[test]
    fn rule_inputs_and_shapes_are_checked() {
        let x = t(&[1, 1, 1], &[1.0]);
        // `linear` takes no decay; `delta` needs beta; three query heads cannot share two.
        let e = LinearAttention
            .eval(
                &node("linear", (1, 1), 0.0, &["q", "k", "v", "", "g"]),
                &[Some(&x), Some(&x), Some(&x), None, Some(&x)],
            )
            .unwrap_err();
        assert!(e.to_string().contains("`la`"), "{e}");
        assert!(LinearAttention
            .eval(
                &node("delta", (1, 1), 0.0, &["q", "k", "v"]),
                &[Some(&x); 3]
            )
            .is_err());
        assert!(LinearAttention
            .eval(
                &node("linear", (3, 2), 0.0, &["q", "k", "v"]),
                &[Some(&x); 3]
            )
            .is_err());
        assert!(LinearAttention
            .eval(
                &node("retention", (1, 1), 0.0, &["q", "k", "v"]),
                &[Some(&x); 3]
            )
            .is_err());
    }
}
