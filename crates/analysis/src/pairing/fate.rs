//! What became of each reference value in the target model (paired, a copy of a paired value, inside a fused node
//! of the target, or lost), and where two graphs stop computing the same function: the first target node whose
//! output equals no reference value although its inputs do, on the way to a graph output that differs.

use std::collections::{HashMap, HashSet};

use super::pair::Pairing;
use crate::model::Graph;

/// What became of one reference value in the target model.
#[derive(Clone, Debug, PartialEq)]
pub enum Fate {
    /// The target value that holds it.
    Paired(String),
    /// A copy (Identity, Reshape...) of the reference value named, which is paired.
    Copy(String),
    /// Computed inside the target node named (its op), whose output is the first value downstream paired closely
    /// ([`Pairing::close`]: values that agree only loosely, a near-uniform Softmax after a change, cover nothing).
    Fused { node: String, op: String },
    /// Neither: nothing downstream of it is paired either.
    Lost,
}

/// The fate of every value the reference graph computes.
pub fn fates(
    reference: &Graph,
    target: &Graph,
    p: &Pairing,
    copies: &HashMap<String, String>,
) -> HashMap<String, Fate> {
    let consumers = consumers(reference);
    let held = |o: &str| {
        p.from
            .get(o)
            .or_else(|| copies.get(o).and_then(|c| p.from.get(c)))
            .filter(|t| p.close(t).is_some())
            .cloned()
    };
    // The first paired value downstream of each value (reference node index, target value), nodes in reverse order.
    let mut cover: HashMap<&str, (usize, String)> = HashMap::new();
    for n in reference.nodes.iter().rev() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            let below = consumers
                .get(o.as_str())
                .into_iter()
                .flatten()
                .filter_map(|&c| node_cover(reference, c, &cover, &held))
                .min();
            if let Some(b) = below {
                cover.insert(o, b);
            }
        }
    }
    let producers = target.producers();
    let mut out = HashMap::new();
    for o in reference.nodes.iter().flat_map(|n| n.outputs.iter()) {
        let fate = if let Some(t) = p.from.get(o) {
            Fate::Paired(t.clone())
        } else if let Some(c) = copies.get(o) {
            Fate::Copy(c.clone())
        } else if let Some(n) = cover
            .get(o.as_str())
            .and_then(|(_, t)| producers.get(t.as_str()))
        {
            let n = &target.nodes[*n];
            Fate::Fused {
                node: n.name.clone(),
                op: n.op_type.clone(),
            }
        } else {
            Fate::Lost
        };
        out.insert(o.clone(), fate);
    }
    out
}

/// The first paired value at or below reference node `c`: one of its own outputs, else the cover of its outputs.
fn node_cover(
    g: &Graph,
    c: usize,
    cover: &HashMap<&str, (usize, String)>,
    held: &dyn Fn(&str) -> Option<String>,
) -> Option<(usize, String)> {
    let outs = g.nodes[c].outputs.iter().filter(|o| !o.is_empty());
    let own = outs.clone().find_map(|o| held(o)).map(|t| (c, t));
    own.or_else(|| outs.filter_map(|o| cover.get(o.as_str()).cloned()).min())
}

/// The initializers, and the values computed from them alone.
fn constants(g: &Graph) -> HashSet<String> {
    let mut c: HashSet<String> = g.initializers.keys().cloned().collect();
    for n in &g.nodes {
        if n.inputs.iter().all(|i| i.is_empty() || c.contains(i)) {
            c.extend(n.outputs.iter().cloned());
        }
    }
    c
}

/// Nodes reading each value (top-level nodes, by index).
fn consumers(g: &Graph) -> HashMap<&str, Vec<usize>> {
    let mut m: HashMap<&str, Vec<usize>> = HashMap::new();
    for n in &g.nodes {
        for i in n.inputs.iter().filter(|i| !i.is_empty()) {
            m.entry(i.as_str()).or_default().push(n.index);
        }
    }
    m
}

/// Where the target model stops computing the reference model's function.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Divergence {
    /// The target value that equals no reference value although the values it is computed from do.
    pub value: String,
    /// The node computing it, and its op.
    pub node: String,
    pub op: String,
    /// Further such values (other branches that diverge too), in graph order.
    pub others: Vec<String>,
}

/// The first divergence on the way to the target outputs in `differing` (those that equal no reference output):
/// among the values that lead to one of them and to no paired value, the first whose node reads none of them.
pub fn divergence(target: &Graph, p: &Pairing, differing: &[String]) -> Option<Divergence> {
    let consumers = consumers(target);
    let bad: HashSet<&str> = differing.iter().map(String::as_str).collect();
    let matched = |v: &str| p.close(v).is_some();
    // Per value: (leads to a differing output, leads to a paired value), nodes in reverse order.
    let mut leads: HashMap<&str, (bool, bool)> = HashMap::new();
    for n in target.nodes.iter().rev() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            let mut l = (bad.contains(o.as_str()), false);
            for &c in consumers.get(o.as_str()).into_iter().flatten() {
                for co in target.nodes[c].outputs.iter().filter(|o| !o.is_empty()) {
                    let (b, m) = leads.get(co.as_str()).copied().unwrap_or_default();
                    l = (l.0 || b, l.1 || m || matched(co));
                }
            }
            leads.insert(o, l);
        }
    }
    let diverged = |v: &str| !matched(v) && leads.get(v).is_some_and(|&(b, m)| b && !m);
    // A node computed from constants alone (a Constant, an Identity of a weight) is no part of the function's
    // computation: its consumer is where it enters.
    let constant = constants(target);
    let computes = |n: &&crate::model::Node| {
        n.inputs
            .iter()
            .any(|i| !i.is_empty() && !constant.contains(i))
    };
    let mut roots = (target.nodes.iter().filter(computes))
        .filter(|n| n.outputs.iter().any(|o| diverged(o)) && !n.inputs.iter().any(|i| diverged(i)));
    let first = roots.next()?;
    let value = first.outputs.iter().find(|o| diverged(o))?.clone();
    Some(Divergence {
        value,
        node: first.name.clone(),
        op: first.op_type.clone(),
        others: roots
            .filter_map(|n| n.outputs.iter().find(|o| diverged(o)).cloned())
            .collect(),
    })
}
