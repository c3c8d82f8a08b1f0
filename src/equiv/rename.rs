//! The target model with its values renamed to the reference values they equal in f64, so that the comparison,
//! which pairs values by name, pairs them by what they compute. Graph outputs pair by position; graph inputs and
//! initializers keep their names; a target value that equals no reference value but bears a reference value's name
//! (onnxsim keeps a Conv's output name after folding a BatchNormalization into it) is renamed away from it. A value
//! paired with one of another shape (the same elements in logical order) is renamed too; the comparison reads it in
//! the reference's shape ([`super::Equiv::reshaped`]).

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{GraphProto, NodeProto};

use super::Equiv;
use crate::error::Result;
use crate::model::{surgery, Graph};

/// Suffix of a target value renamed away from a reference value's name it does not hold.
const ELSEWHERE: &str = "::target";

/// `target` with each paired value renamed to its reference value (see the module's doc).
pub fn renamed(reference: &Graph, target: &Graph, e: &Equiv) -> Result<Graph> {
    let map = names(reference, target, e);
    let mut proto = surgery::decode(target)?;
    if let Some(g) = proto.graph.as_mut() {
        for v in g.output.iter_mut().chain(g.value_info.iter_mut()) {
            if let Some(n) = map.get(&v.name) {
                v.name = n.clone();
            }
        }
        rename_graph(g, &map, &HashSet::new());
    }
    let mut g = surgery::finish_like(&target.path, proto, target)?;
    g.sha256 = target.sha256.clone();
    g.random_seed = target.random_seed;
    g.handed_on = target.handed_on.clone();
    g.notes = target.notes.clone();
    Ok(g)
}

/// Target value → its new name.
fn names(reference: &Graph, target: &Graph, e: &Equiv) -> HashMap<String, String> {
    let outputs: HashMap<&str, &str> = e
        .outputs
        .iter()
        .map(|o| (o.target.as_str(), o.reference.as_str()))
        .collect();
    let kept: HashSet<&str> = target
        .inputs
        .iter()
        .map(|i| i.name.as_str())
        .chain(target.initializers.keys().map(String::as_str))
        .collect();
    let taken: HashSet<&str> = outputs.values().copied().collect();
    let mut map: HashMap<String, String> = HashMap::new();
    for (t, r) in &e.pairing.to {
        let free =
            !kept.contains(t.as_str()) && !kept.contains(r.as_str()) && !taken.contains(r.as_str());
        if free {
            map.insert(t.clone(), r.clone());
        }
    }
    for (t, r) in &outputs {
        map.insert(t.to_string(), r.to_string());
    }
    // The divergent value takes the name of the reference value its node stands for: the comparison then fails
    // there, where the function changed, and explains the node (its attributes, its weights).
    if let Some((t, r)) = &e.counterpart {
        let free = !map.values().any(|v| v == r) && !kept.contains(r.as_str());
        if free && !map.contains_key(t) {
            map.insert(t.clone(), r.clone());
        }
    }
    let theirs: HashSet<&str> = reference
        .nodes
        .iter()
        .flat_map(|n| n.outputs.iter())
        .map(String::as_str)
        .collect();
    let used: HashSet<String> = map.values().cloned().collect();
    for v in target.nodes.iter().flat_map(|n| n.outputs.iter()) {
        let clash = theirs.contains(v.as_str()) || used.contains(v);
        if !v.is_empty() && !map.contains_key(v) && clash {
            map.insert(v.clone(), format!("{v}{ELSEWHERE}"));
        }
    }
    map
}

/// Renames the values `g`'s nodes read and write, and those its subgraphs read from outside (`local`: the names
/// an enclosing subgraph defines itself, which shadow the map).
fn rename_graph(g: &mut GraphProto, map: &HashMap<String, String>, local: &HashSet<String>) {
    let rename = |s: &mut String| {
        if !local.contains(s.as_str()) {
            if let Some(n) = map.get(s.as_str()) {
                *s = n.clone();
            }
        }
    };
    for n in &mut g.node {
        n.input.iter_mut().for_each(rename);
        n.output.iter_mut().for_each(rename);
        rename_bodies(n, map, local);
    }
}

/// The subgraphs of `n` (If branches, Loop and Scan bodies): their reads of outer values renamed.
fn rename_bodies(n: &mut NodeProto, map: &HashMap<String, String>, outer_local: &HashSet<String>) {
    for a in &mut n.attribute {
        for body in a.g.iter_mut().chain(a.graphs.iter_mut()) {
            let mut local = outer_local.clone();
            local.extend(body.input.iter().map(|i| i.name.clone()));
            local.extend(body.initializer.iter().map(|i| i.name.clone()));
            local.extend(body.node.iter().flat_map(|n| n.output.iter().cloned()));
            let outputs: Vec<String> = body.output.iter().map(|o| o.name.clone()).collect();
            rename_graph(body, map, &local);
            for (o, name) in body.output.iter_mut().zip(outputs) {
                if !local.contains(&name) {
                    if let Some(m) = map.get(&name) {
                        o.name = m.clone();
                    }
                }
            }
        }
    }
}
