//! Values the target's model computes with other nodes than the reference's: a `--target-model` that stores a value
//! in float16 and reads it back, scales it, or splits an op in two. No node of the value's name runs alone there,
//! so its introduced error would go unmeasured; instead the chain of target nodes that computes it from values the
//! reference has runs alone, fed with those values — the error the target makes between them. The chain's inner
//! values get names of their own (so a node of the chain that also runs alone under its name is not clashed with),
//! and at most [`LONGEST`] nodes are taken: beyond that the value stays unmeasured, as before.

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::NodeProto;

use super::{has_body, Feeder};
use crate::model::Graph;

/// Prefix of the values inside a chain.
pub(super) const INSIDE: &str = "phantom_chain::";

/// Nodes a chain holds at most.
const LONGEST: usize = 16;

/// The chains computing the values of `original`'s nodes that no node run alone computes (`computed`), from `all`
/// (the target's nodes), fed by `feeder`; none through a value in ONNX Runtime's NCHWc layout (`blocked`), which
/// the reference's values are not in.
pub(super) fn all(
    original: &Graph,
    all: &[NodeProto],
    (computed, blocked): (&HashSet<String>, &HashSet<String>),
    feeder: &mut Feeder,
) -> Vec<NodeProto> {
    let producer: HashMap<&str, usize> = (all.iter().enumerate())
        .flat_map(|(k, n)| n.output.iter().map(move |o| (o.as_str(), k)))
        .collect();
    let mut out = vec![];
    for n in &original.nodes {
        for value in n.outputs.iter().filter(|o| !o.is_empty()) {
            let Some(&p) = producer.get(value.as_str()) else {
                continue;
            };
            if computed.contains(value) || all[p].name == n.name {
                continue;
            }
            if let Some(nodes) = chain(all, &producer, p, feeder).filter(|nodes| {
                let touches = |k: &usize| {
                    all[*k]
                        .input
                        .iter()
                        .chain(&all[*k].output)
                        .any(|v| blocked.contains(v))
                };
                !nodes.iter().any(touches)
            }) {
                out.extend(renamed(value, all, &nodes, feeder));
            }
        }
    }
    out
}

/// The nodes (indices into `all`, in order) from values the reference has to the output of node `last`; `None`
/// when the way back reaches a value nobody feeds, a control-flow body, or more than [`LONGEST`] nodes.
fn chain(
    all: &[NodeProto],
    producer: &HashMap<&str, usize>,
    last: usize,
    feeder: &Feeder,
) -> Option<Vec<usize>> {
    let mut taken: HashSet<usize> = HashSet::from([last]);
    let mut stack = vec![last];
    while let Some(k) = stack.pop() {
        // A body, or ONNX Runtime's NCHWc layout, which the reference's values are not in.
        if has_body(&all[k]) || all[k].domain == crate::model::nchwc::DOMAIN {
            return None;
        }
        for i in all[k].input.iter().filter(|i| !feeder.is_own(i)) {
            if feeder.feeds(i) {
                continue;
            }
            let &p = producer.get(i.as_str())?;
            if taken.insert(p) {
                stack.push(p);
            }
        }
        if taken.len() > LONGEST {
            return None;
        }
    }
    let mut order: Vec<usize> = taken.into_iter().collect();
    order.sort_unstable();
    Some(order)
}

/// The chain's nodes `order` (of `all`) for `value`: inner values and node names prefixed with [`INSIDE`] and the
/// value, the values the reference has fed.
fn renamed(value: &str, all: &[NodeProto], order: &[usize], feeder: &mut Feeder) -> Vec<NodeProto> {
    let inner: HashSet<&str> = (order.iter().flat_map(|&k| all[k].output.iter()))
        .map(String::as_str)
        .filter(|o| !o.is_empty() && *o != value)
        .collect();
    let rename = |v: &mut String| {
        if inner.contains(v.as_str()) {
            *v = format!("{INSIDE}{value}::{v}");
        }
    };
    (order.iter())
        .map(|&k| {
            let mut n = all[k].clone();
            n.name = format!("{INSIDE}{value}::{}", n.name);
            n.output.iter_mut().for_each(rename);
            n.input.iter_mut().for_each(rename);
            feeder.feed(&mut n, |i| !i.starts_with(INSIDE));
            n
        })
        .collect()
}
