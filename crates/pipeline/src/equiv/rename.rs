//! The target model with its values renamed to the reference values they equal in f64, so that the comparison,
//! which pairs values by name, pairs them by what they compute. Graph outputs pair by position; graph inputs and
//! initializers keep their names. A value that equals another reference value than its name says takes that value's
//! name (onnxsim keeps a Conv's output name after folding a BatchNormalization into it), unless the target model
//! gives that name to a value that pairs with none. Such a value keeps its name, so names still pair what values
//! cannot (a quantized model's, a perturbation inserted after a node); one whose name a paired value took is renamed
//! away, with the suffix `::target`. A value
//! paired with one of another shape (the same elements in logical order) is renamed too; the comparison reads it in
//! the reference's shape ([`super::Equiv::reshaped`]).

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{GraphProto, NodeProto};

use super::Equiv;
use crate::error::Result;
use crate::model::{surgery, Graph};

/// Suffix of a target value renamed away from a reference value's name it does not hold.
const ELSEWHERE: &str = "::target";

/// `target` with each paired value renamed to its reference value (see the module's doc), and the names changed
/// (the target model's name → the name it runs under).
pub fn renamed(target: &Graph, e: &Equiv) -> Result<(Graph, HashMap<String, String>)> {
    let mut map = names(target, e);
    map.retain(|t, r| t != r);
    if map.is_empty() {
        return Ok((target.clone(), map));
    }
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
    Ok((g, map))
}

/// Target value → its new name.
fn names(target: &Graph, e: &Equiv) -> HashMap<String, String> {
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
    let own: HashSet<&str> = (target.nodes.iter())
        .flat_map(|n| n.outputs.iter())
        .map(String::as_str)
        .collect();
    // A name the target model gives a value that pairs with nothing stays that value's: names still pair what
    // values cannot (a perturbation inserted after a node, keeping its name).
    let held = |r: &str| own.contains(r) && !e.pairing.to.contains_key(r);
    let mut map: HashMap<String, String> = HashMap::new();
    for (t, r) in &e.pairing.to {
        let free =
            !kept.contains(t.as_str()) && !kept.contains(r.as_str()) && !taken.contains(r.as_str());
        if free && !held(r) && !e.retyped.contains(t) {
            map.insert(t.clone(), r.clone());
        }
    }
    for (t, r) in &outputs {
        map.insert(t.to_string(), r.to_string());
    }
    // The divergent value takes the name of the reference value its node stands for: the comparison then fails
    // there, where the function changed, and explains the node (its attributes, its weights).
    if let Some((t, r)) = &e.counterpart {
        let named = e.fates.contains_key(t);
        let free =
            !named && !map.values().any(|v| v == r) && !kept.contains(r.as_str()) && !held(r);
        if free && !map.contains_key(t) {
            map.insert(t.clone(), r.clone());
        }
    }
    let used: HashSet<String> = map.values().cloned().collect();
    for v in target.nodes.iter().flat_map(|n| n.outputs.iter()) {
        if !v.is_empty() && !map.contains_key(v) && used.contains(v) {
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
