//! The culprit: the first nodes, in topological order, whose own error is out of tolerance while everything they
//! read is within it; the outputs each one spoils, and the path there.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::model::Graph;
use crate::report::model::{Basis, Culprit, NodeReport, ValueReport, ValueStatus};

/// Culprits listed at most.
pub const MAX_CULPRITS: usize = 5;

/// Alone, out of tolerance. A discrete decision that passes in the graph (its flips within the noise adopted) is
/// not blamed for flipping other elements alone: fed with the reference's inputs rounded to the target's type, it
/// decides elements on a boundary either way.
fn introduced_fails(v: &ValueReport) -> bool {
    let settled_decision = v.adopted.is_some() && v.status == ValueStatus::Pass;
    !settled_decision
        && v.introduced
            .as_ref()
            .is_some_and(|i| i.status == ValueStatus::Fail)
}

/// Culprits will be sought in a run holding this value: it fails, in the graph or even in the correctly rounded
/// run. Then every node runs alone (culprits are chosen from what nodes do alone), reading every reference value.
pub fn sought(v: &ValueReport) -> bool {
    v.status == ValueStatus::Fail || ideal_fails(v)
}

/// Even the ideal run (exact math, values stored in the target's type) is out of tolerance, or overflows.
pub fn ideal_fails(v: &ValueReport) -> bool {
    v.noise
        .as_ref()
        .is_some_and(|n| n.nonfinite > 0 || n.tolerance_used > 1.0)
}

/// Finds the culprits among `nodes` (in topological order) of `graph`; causes are left empty. A node is blamed on
/// one of three bases, tried in order: `introduced` — alone, fed with reference inputs, it is out of tolerance
/// while its inputs pass; `ideal` — even the ideal low-precision run (exact math, values stored in the target's
/// type) is out of tolerance here while it is within it on the node's inputs; `cumulative` — its output fails in
/// the graph while its inputs pass.
pub fn find(graph: &Graph, nodes: &[NodeReport]) -> Vec<Culprit> {
    let by_name: HashMap<&str, &ValueReport> = nodes
        .iter()
        .flat_map(|n| n.values.iter().map(|v| (v.name.as_str(), v)))
        .collect();
    let mut out = vec![];
    for n in nodes {
        let reads = || n.inputs.iter().filter_map(|i| by_name.get(i.as_str()));
        let inputs_pass = reads().all(|v| v.status != ValueStatus::Fail);
        let ideal_inputs_pass = reads().all(|v| !ideal_fails(v));
        let pick = |f: &dyn Fn(&ValueReport) -> bool| n.values.iter().find(|v| f(v));
        let (basis, v) = if let Some(v) = pick(&introduced_fails).filter(|_| inputs_pass) {
            (Basis::Introduced, v)
        } else if let Some(v) = pick(&ideal_fails).filter(|_| ideal_inputs_pass) {
            (Basis::Ideal, v)
        } else if let Some(v) = pick(&|v| v.status == ValueStatus::Fail).filter(|_| inputs_pass) {
            (Basis::Cumulative, v)
        } else {
            continue;
        };
        let (max_abs, ratio) = match basis {
            Basis::Introduced => {
                let i = v.introduced.as_ref().expect("introduced fails");
                (i.metrics.max_abs, i.ratio)
            }
            Basis::Ideal => (
                v.noise.as_ref().map(|n| n.max_abs).unwrap_or(f64::NAN),
                None,
            ),
            _ => (
                v.metrics.as_ref().map(|m| m.max_abs).unwrap_or(f64::NAN),
                v.introduced.as_ref().and_then(|i| i.ratio),
            ),
        };
        let (spoils, path) = downstream(graph, nodes, n.index);
        out.push(Culprit {
            node_index: n.index,
            node: n.name.clone(),
            op_type: n.op_type.clone(),
            value: v.name.clone(),
            basis,
            max_abs,
            noise_ratio: ratio,
            causes: vec![],
            spoils,
            path,
        });
        if out.len() == MAX_CULPRITS {
            break;
        }
    }
    precision_last(&mut out);
    out
}

/// Puts the culprits the target's precision explains (basis `ideal`: the correctly rounded run fails there too)
/// after the others, each group in topological order: a node that makes drift of its own is named first.
pub fn precision_last(culprits: &mut [Culprit]) {
    culprits.sort_by_key(|c| c.basis == Basis::Ideal);
}

/// Failing graph outputs reachable from node `from`, and the shortest node path to the first of them.
pub(super) fn downstream(
    graph: &Graph,
    nodes: &[NodeReport],
    from: usize,
) -> (Vec<String>, Vec<String>) {
    let consumers = graph.consumers();
    let failing_outputs: HashSet<&str> = nodes
        .iter()
        .flat_map(|n| n.values.iter())
        .filter(|v| v.is_output && v.status == ValueStatus::Fail)
        .map(|v| v.name.as_str())
        .collect();
    let mut prev: HashMap<usize, usize> = HashMap::new();
    let mut seen: HashSet<usize> = HashSet::from([from]);
    let mut queue = VecDeque::from([from]);
    let mut spoils = vec![];
    let mut first: Option<usize> = None;
    while let Some(i) = queue.pop_front() {
        for o in &graph.nodes[i].outputs {
            if failing_outputs.contains(o.as_str()) {
                spoils.push(o.clone());
                first.get_or_insert(i);
            }
            for &c in consumers.get(o.as_str()).into_iter().flatten() {
                if seen.insert(c) {
                    prev.insert(c, i);
                    queue.push_back(c);
                }
            }
        }
    }
    let mut path = vec![];
    let mut at = first;
    while let Some(i) = at {
        path.push(graph.nodes[i].name.clone());
        at = prev.get(&i).copied();
    }
    path.reverse();
    spoils.sort();
    spoils.dedup();
    (spoils, path)
}
