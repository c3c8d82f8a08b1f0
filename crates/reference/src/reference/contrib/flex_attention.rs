//! ONNX `FlexAttention` (domain `ai.onnx.preview`, opset 1) in f64: scaled dot-product attention of rank-4 Q
//! (B, Hq, L, E), K (B, Hkv, S, E) and V (B, Hkv, S, Ev), query head h reading key/value head h / (Hq / Hkv), with
//! two optional graph attributes that rewrite the (B, Hq, L, S) scores before the softmax (`score_mod`: masks,
//! biases, soft caps) and the probabilities after it (`prob_mod`). tract has no such op.
//!
//! Written from the spec and ONNX's reference (onnx/reference/ops/aionnx_preview/op_flex_attention.py):
//! `Y = prob_mod(softmax(score_mod(scale · Q·Kᵀ))) · V`, `scale` defaulting to 1/√E. The softmax is the plain one
//! of the op's function body, so a row `score_mod` sets to −∞ throughout is NaN, as there. The reference rounds
//! √scale to float32 and computes in `softmax_precision`; phantom computes everything in f64, at least the precision
//! any value of that attribute asks for.
//!
//! The modifier graphs are any ONNX graphs of one input and one output: each is parsed by tract, typed for the
//! scores' shape and the graph's declared element type, widened to f64 and run on the f64 scores
//! ([`super::subgraph`]); values they read from the outer scope become inputs of the node ([`explicit`]). Not
//! covered: a modifier declaring bfloat16 (tract cannot widen it), and ops tract and phantom both lack.

use anyhow::Context;
use rayon::prelude::*;
use tract_onnx::pb::NodeProto;
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, PREFIX};
use super::node::{Fact, Node};
use super::subgraph;
use super::util::{fact, float_type, opt, shaped, values};

pub(super) const TABLE: &[Row] = &[Row::new("FlexAttention", &FlexAttention)];

/// The graph attributes, in the order they apply.
const MODS: [&str; 2] = ["score_mod", "prob_mod"];

/// Whether phantom evaluates `n`: every FlexAttention of ONNX's preview domain.
pub fn claims(n: &NodeProto) -> bool {
    n.op_type == "FlexAttention" && n.domain == "ai.onnx.preview"
}

/// Renames `n` to `phantom.FlexAttention` and makes its modifiers' outer-scope reads explicit inputs.
pub fn explicit(n: &mut NodeProto, opsets: &[tract_onnx::pb::OperatorSetIdProto]) {
    subgraph::explicit(n, &MODS, opsets);
    n.op_type = format!("{PREFIX}FlexAttention");
}

/// The extents of one node.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Geo {
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    rows: usize,
    keys: usize,
    depth: usize,
    v_depth: usize,
}

impl Geo {
    /// The extents from the shapes of Q, K and V, checked against each other.
    fn new(n: &Node, q: &[usize], k: &[usize], v: &[usize]) -> TractResult<Geo> {
        let name = &n.proto.name;
        anyhow::ensure!(
            q.len() == 4 && k.len() == 4 && v.len() == 4,
            "FlexAttention `{name}` needs rank-4 Q, K and V, got {q:?}, {k:?} and {v:?}"
        );
        anyhow::ensure!(
            k[0] == q[0] && v[0] == q[0] && v[1] == k[1] && v[2] == k[2] && k[3] == q[3],
            "FlexAttention `{name}`: K {k:?} and V {v:?} do not match Q {q:?} (same batch; K and V the same heads \
             and keys; K the head size of Q)"
        );
        anyhow::ensure!(
            k[1] > 0 && q[1].is_multiple_of(k[1]),
            "FlexAttention `{name}`: {} query heads cannot share {} key/value heads",
            q[1],
            k[1]
        );
        Ok(Geo {
            batch: q[0],
            q_heads: q[1],
            kv_heads: k[1],
            rows: q[2],
            keys: k[2],
            depth: q[3],
            v_depth: v[3],
        })
    }

    /// The shape of the scores and probabilities, (B, Hq, L, S).
    fn scores_shape(&self) -> Vec<usize> {
        vec![self.batch, self.q_heads, self.rows, self.keys]
    }

    /// The key/value head that query head `bh` (batch-major, flat) reads, flat.
    fn kv_head(&self, bh: usize) -> usize {
        let (b, h) = (bh / self.q_heads, bh % self.q_heads);
        b * self.kv_heads + h / (self.q_heads / self.kv_heads)
    }

    /// `scale · Q·Kᵀ`, (B, Hq, L, S) row-major.
    fn scores(&self, q: &[f64], k: &[f64], scale: f64) -> Vec<f64> {
        let (l, s, e) = (self.rows, self.keys, self.depth);
        let mut out = vec![0.0; self.batch * self.q_heads * l * s];
        out.par_chunks_mut((l * s).max(1))
            .enumerate()
            .for_each(|(bh, head)| {
                let (qh, kh) = (&q[bh * l * e..], &k[self.kv_head(bh) * s * e..]);
                for (idx, x) in head.iter_mut().enumerate() {
                    let (i, j) = (idx / s, idx % s);
                    let dot: f64 = (0..e).map(|d| qh[i * e + d] * kh[j * e + d]).sum();
                    *x = dot * scale;
                }
            });
        out
    }

    /// `P·V`, (B, Hq, L, Ev) row-major.
    fn weigh(&self, p: &[f64], v: &[f64]) -> Vec<f64> {
        let (l, s, ev) = (self.rows, self.keys, self.v_depth);
        let mut out = vec![0.0; self.batch * self.q_heads * l * ev];
        out.par_chunks_mut((l * ev).max(1))
            .enumerate()
            .for_each(|(bh, head)| {
                let (ph, vh) = (&p[bh * l * s..], &v[self.kv_head(bh) * s * ev..]);
                for (idx, y) in head.iter_mut().enumerate() {
                    let (i, d) = (idx / ev, idx % ev);
                    *y = (0..s).map(|j| ph[i * s + j] * vh[j * ev + d]).sum();
                }
            });
        out
    }
}

/// Softmax of every row of `s` values, in place (the maximum subtracted first; a row of −∞ gives NaN).
fn softmax_rows(x: &mut [f64], s: usize) {
    for row in x.chunks_mut(s.max(1)) {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        row.iter_mut().for_each(|v| *v = (*v - max).exp());
        let sum: f64 = row.iter().sum();
        row.iter_mut().for_each(|v| *v /= sum);
    }
}

/// The element type modifier `name` is typed with: its input's declared type, else `softmax_precision`'s, else
/// float32 (the spec's default; the graph is widened to f64 either way).
fn mod_type(n: &Node, name: &str) -> TractResult<DatumType> {
    use tract_onnx::pb::type_proto::Value;
    let declared = subgraph::graph(&n.proto, name)
        .and_then(|g| g.input.first())
        .and_then(|i| i.r#type.as_ref())
        .and_then(|t| match &t.value {
            Some(Value::TensorType(t)) => Some(t.elem_type),
            _ => None,
        });
    let code = declared.or_else(|| super::util::int_opt(n, "softmax_precision").map(|c| c as i32));
    match code.unwrap_or(1) {
        1 => Ok(DatumType::F32),
        10 => Ok(DatumType::F16),
        11 => Ok(DatumType::F64),
        c => anyhow::bail!(
            "FlexAttention `{}`: its `{name}` graph works in ONNX element type {c}; phantom runs modifier graphs \
             of float, float16 or double only",
            n.proto.name
        ),
    }
}

/// `x` (shape `shape`) rewritten by modifier graph `name`, fed `outer` (the node's outer-scope inputs) after it;
/// float outer values are assumed to be of the graph's type (the widened model no longer says theirs).
fn modify(
    n: &Node,
    name: &str,
    x: Vec<f64>,
    shape: &[usize],
    outer: &[Tensor],
) -> TractResult<Vec<f64>> {
    // Typed as before the model was widened: the graph's floats (the model's, f64 now) in its declared type.
    let dt = mod_type(n, name)?;
    let typing: Vec<Tensor> = std::iter::once(Tensor::zero_dt(dt, shape))
        .chain(outer.iter().map(|t| match t.datum_type().is_float() {
            true => Tensor::zero_dt(dt, t.shape()),
            false => Ok(t.clone()),
        }))
        .collect::<TractResult<_>>()?;
    let plan = subgraph::plan(n, name, &typing, true)?;
    let feed: Vec<Tensor> = std::iter::once(shaped(shape, x)?)
        .chain(outer.iter().cloned())
        .collect();
    let out = subgraph::run(&plan, feed).with_context(|| {
        format!(
            "running the `{name}` graph of FlexAttention `{}`",
            n.proto.name
        )
    })?;
    let y = out
        .first()
        .ok_or_else(|| anyhow::anyhow!("the `{name}` graph gave no output"))?;
    anyhow::ensure!(
        y.shape() == shape,
        "FlexAttention `{}`: its `{name}` graph gave shape {:?}, not its input's {shape:?}",
        n.proto.name,
        y.shape()
    );
    values::<f64>(y)
}

struct FlexAttention;

impl Kernel for FlexAttention {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (q, k, v) = (fact(n, ins, 0)?, fact(n, ins, 1)?, fact(n, ins, 2)?);
        let g = Geo::new(n, &q.1, &k.1, &v.1)?;
        for name in MODS.iter().filter(|m| n.attr(m).is_some()) {
            mod_type(n, name)?;
        }
        let dt = float_type(n, v)?;
        Ok(vec![(dt, vec![g.batch, g.q_heads, g.rows, g.v_depth])])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (q, k, v) = (opt(n, ins, 0)?, opt(n, ins, 1)?, opt(n, ins, 2)?);
        let g = Geo::new(n, q.shape(), k.shape(), v.shape())?;
        let arity = n.req_int(subgraph::ARITY)? as usize;
        let outer: Vec<Tensor> = (arity..ins.len())
            .map(|s| opt(n, ins, s).cloned())
            .collect::<TractResult<_>>()?;
        let scale = n
            .attr("scale")
            .map_or(1.0 / (g.depth as f64).sqrt(), |a| a.f as f64);
        let shape = g.scores_shape();
        let mut p = g.scores(&values::<f64>(q)?, &values::<f64>(k)?, scale);
        if n.attr(MODS[0]).is_some() {
            p = modify(n, MODS[0], p, &shape, &outer)?;
        }
        softmax_rows(&mut p, g.keys);
        if n.attr(MODS[1]).is_some() {
            p = modify(n, MODS[1], p, &shape, &outer)?;
        }
        let y = g.weigh(&p, &values::<f64>(v)?);
        Ok(vec![shaped(&[g.batch, g.q_heads, g.rows, g.v_depth], y)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, GraphProto, OperatorSetIdProto, TensorProto};

    fn t(shape: &[usize], v: &[f64]) -> Tensor {
        shaped(shape, v.to_vec()).unwrap()
    }

    /// A FlexAttention node reading Q, K, V, with `scale` (when given) and the graph attributes `mods`, made
    /// explicit as the claim does.
    fn node(scale: Option<f32>, mods: Vec<(&str, GraphProto)>) -> Node {
        let mut attribute: Vec<AttributeProto> = (mods.into_iter())
            .map(|(name, g)| AttributeProto {
                name: name.into(),
                r#type: 5,
                g: Some(g),
                ..Default::default()
            })
            .collect();
        attribute.extend(scale.map(|f| AttributeProto {
            name: "scale".into(),
            r#type: 1,
            f,
            ..Default::default()
        }));
        let mut proto = NodeProto {
            op_type: "FlexAttention".into(),
            domain: "ai.onnx.preview".into(),
            name: "flex".into(),
            input: ["q", "k", "v"].map(String::from).to_vec(),
            output: vec!["y".into()],
            attribute,
            ..Default::default()
        };
        let opsets = [OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }];
        assert!(claims(&proto));
        explicit(&mut proto, &opsets);
        Node::new(&proto)
    }

    /// `out = op(x, c)`: a one-node modifier graph on float scores, `c` a float32 initializer of `c_dims`, or an
    /// outer-scope value when `outer`.
    fn modifier(op: &str, c: &[f32], c_dims: &[i64], outer: bool) -> GraphProto {
        let typed = |name: &str| crate::model::surgery::value_info(name, 1, None);
        let init = TensorProto {
            name: "c".into(),
            dims: c_dims.to_vec(),
            data_type: 1,
            float_data: c.to_vec(),
            ..Default::default()
        };
        GraphProto {
            node: vec![NodeProto {
                op_type: op.into(),
                input: vec!["x".into(), if outer { "outer_c" } else { "c" }.into()],
                output: vec!["out".into()],
                ..Default::default()
            }],
            input: vec![typed("x")],
            output: vec![typed("out")],
            initializer: if outer { vec![] } else { vec![init] },
            ..Default::default()
        }
    }

    fn run(n: &Node, ins: &[&Tensor]) -> Vec<f64> {
        let ins: Vec<Option<&Tensor>> = ins.iter().map(|&t| Some(t)).collect();
        values::<f64>(&FlexAttention.eval(n, &ins).unwrap()[0]).unwrap()
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn scores_are_scaled_and_heads_grouped() {
        // One query, two keys scoring 0 and 1·scale: weights softmax([0, s]) over values 1 and 3.
        let (q, k, v) = (
            t(&[1, 1, 1, 1], &[1.0]),
            t(&[1, 1, 2, 1], &[0.0, 1.0]),
            t(&[1, 1, 2, 1], &[1.0, 3.0]),
        );
        let want = |s: f64| {
            let w = s.exp() / (1.0 + s.exp());
            (1.0 - w) + 3.0 * w
        };
        close(&run(&node(None, vec![]), &[&q, &k, &v]), &[want(1.0)]);
        close(&run(&node(Some(2.0), vec![]), &[&q, &k, &v]), &[want(2.0)]);
        // Four query heads on two key/value heads (values 10 and 20): heads 0, 1 read 10, heads 2, 3 read 20.
        let (q, k, v) = (
            t(&[1, 4, 1, 1], &[1.0; 4]),
            t(&[1, 2, 1, 1], &[1.0; 2]),
            t(&[1, 2, 1, 1], &[10.0, 20.0]),
        );
        close(
            &run(&node(None, vec![]), &[&q, &k, &v]),
            &[10.0, 10.0, 20.0, 20.0],
        );
    }

    #[test]
    fn modifier_graphs_rewrite_scores_and_probabilities() {
        // Equal scores over values 1 and 3; prob_mod doubles the probabilities, score_mod masks key 1 with −∞.
        let (q, v) = (t(&[1, 1, 1, 1], &[0.0]), t(&[1, 1, 2, 1], &[1.0, 3.0]));
        let k = t(&[1, 1, 2, 1], &[0.0, 0.0]);
        let double = node(
            None,
            vec![("prob_mod", modifier("Mul", &[2.0], &[], false))],
        );
        close(&run(&double, &[&q, &k, &v]), &[4.0]);
        let mask = modifier("Add", &[0.0, f32::NEG_INFINITY], &[2], false);
        close(
            &run(&node(None, vec![("score_mod", mask)]), &[&q, &k, &v]),
            &[1.0],
        );
    }

    #[test]
    fn outer_scope_reads_become_inputs() {
        let n = node(None, vec![("score_mod", modifier("Add", &[], &[], true))]);
        assert_eq!(n.proto.input, ["q", "k", "v", "outer_c"]);
        let (q, v) = (t(&[1, 1, 1, 1], &[0.0]), t(&[1, 1, 2, 1], &[1.0, 3.0]));
        let (k, bias) = (
            t(&[1, 1, 2, 1], &[0.0, 0.0]),
            t(&[2], &[f64::NEG_INFINITY, 0.0]),
        );
        close(&run(&n, &[&q, &k, &v, &bias]), &[3.0]);
    }

    #[test]
    fn mismatched_shapes_are_errors() {
        let (q3, k2) = (t(&[1, 3, 1, 1], &[0.0; 3]), t(&[1, 2, 1, 1], &[0.0; 2]));
        let n = node(None, vec![]);
        assert!(FlexAttention
            .eval(&n, &[Some(&q3), Some(&k2), Some(&k2)])
            .is_err());
        let flat = t(&[1, 1], &[0.0]);
        assert!(FlexAttention
            .eval(&n, &[Some(&flat), Some(&flat), Some(&flat)])
            .is_err());
    }
}
