//! ONNX `Loop`, evaluated by phantom in f64 where it cannot be unrolled before the run (`model/unroll.rs` unrolls
//! a loop whose trip count the inputs decide; a loop its own condition stops, a decoder's "until the end token",
//! is left to this kernel). tract-onnx has no `Loop`.
//!
//! Before parsing, [`explicit`] turns the node into `phantom.Loop` and appends every value its body reads from the
//! outer scope to its inputs, so tract wires them like any input. At run time the body is parsed as a model of its
//! own (widened to f64 with the rest, phantom's kernels registered) and run once per iteration, as the ONNX
//! definition says: while `i < M` and `cond`, `(cond, v…, scan…) = body(i, cond, v…)`.
//!
//! Covered: loop-carried values whose shape is the same every iteration (their facts are the initial values'), and
//! scan outputs (each iteration's value stacked along a new first axis). A scan output's length is the iteration
//! count, which only the run decides, and tract types every value before running: such a loop cannot be typed, so
//! it stands in with the shapes the target's run gave it ([`super::standin`]) and this kernel runs on the run's
//! inputs, computed in f64 where it iterates as often as the target did. Not covered, refused with the reason: a
//! carried value that changes shape, and scan outputs of a loop that runs no iteration.
//! The body's own values are not compared (as for every control-flow body); the loop's outputs are.

use tract_onnx::pb::{GraphProto, NodeProto, OperatorSetIdProto};
use tract_onnx::tract_hir::internal::*;

use super::kernel::{Kernel, Row, PREFIX};
use super::node::{Fact, Node};
use super::subgraph;
use super::util::fact;

pub(super) const TABLE: &[Row] = &[Row::new("Loop", &Looped)];

/// Whether phantom evaluates this node: every default-domain `Loop` left at parse time.
pub fn claims_loop(n: &NodeProto) -> bool {
    n.op_type == "Loop" && n.domain.is_empty()
}

/// Renames `n` to `phantom.Loop` and makes its body's outer-scope reads explicit inputs.
pub fn explicit(n: &mut NodeProto, opsets: &[OperatorSetIdProto]) {
    if body(n).is_none() {
        return;
    }
    subgraph::explicit(n, &["body"], opsets);
    n.op_type = format!("{PREFIX}Loop");
}

fn body(n: &NodeProto) -> Option<&GraphProto> {
    subgraph::graph(n, "body")
}

struct Looped;

/// The loop's shape: carried values, scan outputs.
fn counts(n: &Node) -> TractResult<(usize, usize)> {
    let arity = n.req_int(subgraph::ARITY)? as usize;
    let carried = arity.saturating_sub(2);
    let outs = body(&n.proto).map_or(0, |b| b.output.len());
    let scans = outs.checked_sub(1 + carried).ok_or_else(|| {
        anyhow::anyhow!(
            "Loop `{}`: its body has {outs} outputs, fewer than 1 + {carried} loop-carried values",
            n.proto.name
        )
    })?;
    Ok((carried, scans))
}

impl Kernel for Looped {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (carried, scans) = counts(n)?;
        ensure!(
            scans == 0,
            "Loop `{}` has {scans} scan output(s), whose length only the run decides",
            n.proto.name
        );
        (0..carried).map(|k| fact(n, ins, 2 + k).cloned()).collect()
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (carried, scans) = counts(n)?;
        let arity = 2 + carried;
        let trips = match ins.first().copied().flatten() {
            Some(m) => Some(scalar::<i64>(m)?),
            None => None,
        };
        let mut cond = match ins.get(1).copied().flatten() {
            Some(c) => scalar::<bool>(c)?,
            None => true,
        };
        ensure!(
            trips.is_some() || ins.get(1).copied().flatten().is_some(),
            "Loop `{}` has neither a trip count nor a condition: it never ends",
            n.proto.name
        );
        let mut state: Vec<Tensor> = (2..arity)
            .map(|k| subgraph::plain(super::util::opt(n, ins, k)?))
            .collect::<TractResult<_>>()?;
        let outer: Vec<Tensor> = ins[arity.min(ins.len())..]
            .iter()
            .map(|t| {
                let t = t.ok_or_else(|| {
                    anyhow::anyhow!("Loop `{}` lacks an outer value", n.proto.name)
                })?;
                subgraph::plain(t)
            })
            .collect::<TractResult<_>>()?;
        let feed = |i: i64, cond: bool, state: &[Tensor]| -> Vec<Tensor> {
            let mut f = vec![tensor0(i), tensor0(cond)];
            f.extend(state.iter().chain(&outer).cloned());
            f
        };
        // Typed once when every shape in the body is known from the inputs' shapes; else once per iteration, with
        // the small integer inputs (a step counter slicing a buffer) given as values, so the shapes they decide are.
        let once = subgraph::plan(n, "body", &feed(0, cond, &state), false)?;
        let fixed = once.concrete;
        let mut stacked: Vec<Vec<Tensor>> = vec![vec![]; scans];
        let mut i = 0i64;
        while cond && trips.is_none_or(|m| i < m) {
            let f = feed(i, cond, &state);
            let pinned;
            let body = match fixed {
                true => &once,
                false => {
                    pinned = subgraph::plan(n, "body", &f, true)?;
                    &pinned
                }
            };
            let out = subgraph::run(body, f)
                .with_context(|| format!("{}, iteration {i}", n.proto.name))?;
            cond = scalar::<bool>(&out[0])?;
            for (k, (s, o)) in state.iter_mut().zip(out.iter().skip(1)).enumerate() {
                ensure!(
                    s.shape() == o.shape(),
                    "Loop `{}`: loop-carried value {k} changes shape at iteration {i} ({:?} to {:?}); phantom's f64 \
                     Loop needs fixed shapes",
                    n.proto.name,
                    s.shape(),
                    o.shape()
                );
                *s = o
                    .clone()
                    .into_tensor()
                    .cast_to_dt(s.datum_type())?
                    .into_owned();
            }
            for (k, o) in out.iter().skip(1 + carried).enumerate().take(scans) {
                let mut t = o.clone().into_tensor();
                t.insert_axis(0)?;
                stacked[k].push(t);
            }
            i += 1;
        }
        for each in stacked {
            ensure!(
                !each.is_empty(),
                "Loop `{}` ran no iteration: its scan outputs' shapes are unknown",
                n.proto.name
            );
            state.push(Tensor::stack_tensors(0, &each)?);
        }
        Ok(state)
    }
}

/// The one element of `t`, cast to `T`.
fn scalar<T: Datum + Copy>(t: &Tensor) -> TractResult<T> {
    t.cast_to_scalar::<T>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::AttributeProto;

    fn node(op: &str, ins: &[&str], out: &str) -> NodeProto {
        NodeProto {
            op_type: op.into(),
            input: ins.iter().map(|s| s.to_string()).collect(),
            output: vec![out.into()],
            name: out.into(),
            ..Default::default()
        }
    }

    /// `acc += i` while `acc < limit` (an outer-scope read), at most `trips` times.
    fn counter(trips: i64) -> (NodeProto, Vec<Tensor>) {
        let typed =
            |name: &str, code: i32| crate::model::surgery::value_info(name, code, Some(vec![]));
        let mut cast = node("Cast", &["i"], "fi");
        cast.attribute.push(AttributeProto {
            name: "to".into(),
            r#type: 2,
            i: 11,
            ..Default::default()
        });
        let body = GraphProto {
            node: vec![
                cast,
                node("Add", &["acc", "fi"], "acc2"),
                node("Less", &["acc2", "limit"], "go"),
            ],
            input: vec![typed("i", 7), typed("c", 9), typed("acc", 11)],
            output: vec![typed("go", 9), typed("acc2", 11)],
            ..Default::default()
        };
        let mut n = NodeProto {
            op_type: "Loop".into(),
            name: "count".into(),
            input: vec!["m".into(), "".into(), "acc0".into()],
            output: vec!["acc_last".into()],
            attribute: vec![AttributeProto {
                name: "body".into(),
                r#type: 5,
                g: Some(body),
                ..Default::default()
            }],
            ..Default::default()
        };
        let opsets = [OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }];
        explicit(&mut n, &opsets);
        (n, vec![tensor0(trips), tensor0(0f64), tensor0(10f64)])
    }

    fn run(trips: i64) -> f64 {
        let (proto, ins) = counter(trips);
        assert_eq!(
            proto.input,
            vec!["m", "", "acc0", "limit"],
            "the outer read is an input"
        );
        let n = Node::new(&proto);
        // tract wires the present inputs only: m, acc0, limit.
        let by_slot: Vec<Option<&Tensor>> = n.by_slot(&ins);
        let out = Looped.eval(&n, &by_slot).unwrap();
        out[0].cast_to_scalar::<f64>().unwrap()
    }

    #[test]
    fn the_condition_stops_the_loop() {
        // 0, +1, +2, +3, +4 = 10: not below 10, so the loop stops after 5 iterations.
        assert_eq!(run(100), 10.0);
    }

    #[test]
    fn the_trip_count_stops_it_first() {
        assert_eq!(run(3), 3.0);
        assert_eq!(run(0), 0.0);
    }
}
