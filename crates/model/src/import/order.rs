//! The nodes of an imported graph in topological order: Kahn's algorithm, stable with respect to the file's order,
//! with errors that name the nodes of a cycle and the inputs nothing produces.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::path::Path;

use tract_onnx::pb::{self, GraphProto};

use super::{count_nodes, subgraphs};
use crate::error::{Error, Result};
use crate::{InitInfo, Node};

/// Kahn's algorithm, stable with respect to file order. Errors on cycles and on inputs nothing produces.
pub(super) fn sort_nodes(
    g: &GraphProto,
    inits: &HashMap<String, InitInfo>,
    path: &Path,
) -> Result<(Vec<Node>, bool)> {
    let mut available: HashSet<&str> = g.input.iter().map(|i| i.name.as_str()).collect();
    available.extend(inits.keys().map(|s| s.as_str()));
    available.insert("");
    let producer = producers(g, path)?;
    let deps = dependencies(g, &available, &producer, path)?;
    let order = node_order(g, &deps, &producer, path)?;
    let unsorted = order.iter().enumerate().any(|(k, &i)| k != i);
    Ok((named_nodes(g, &order), unsorted))
}

/// The node that produces each value; errors on a value produced twice.
fn producers<'g>(g: &'g GraphProto, path: &Path) -> Result<HashMap<&'g str, usize>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in g.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if let Some(first) = producer.insert(o.as_str(), i) {
                return Err(Error::MalformedModel {
                    path: path.to_path_buf(),
                    reason: format!(
                        "value `{o}` is produced by two nodes ({} and {}): ONNX graphs assign each value once",
                        label(g, first),
                        label(g, i)
                    ),
                });
            }
        }
    }
    Ok(producer)
}

/// The values each node waits on: its inputs and what its bodies read from outside, less those `available` from
/// the start. Errors on a value no node produces.
fn dependencies(
    g: &GraphProto,
    available: &HashSet<&str>,
    producer: &HashMap<&str, usize>,
    path: &Path,
) -> Result<Vec<Vec<String>>> {
    let deps: Vec<Vec<String>> = g
        .node
        .iter()
        .map(|n| {
            crate::surgery::reads(n)
                .into_iter()
                .filter(|v| !available.contains(v.as_str()))
                .collect()
        })
        .collect();
    for (i, d) in deps.iter().enumerate() {
        if let Some(missing) = d.iter().find(|v| !producer.contains_key(v.as_str())) {
            return Err(Error::MalformedModel {
                path: path.to_path_buf(),
                reason: format!(
                    "{} reads `{missing}`, which is no graph input, initializer or node output",
                    label(g, i)
                ),
            });
        }
    }
    Ok(deps)
}

/// The order to run the nodes in: file order when it is already topological, otherwise the earliest ready node in
/// file order first. Errors on a cycle.
fn node_order(
    g: &GraphProto,
    deps: &[Vec<String>],
    producer: &HashMap<&str, usize>,
    path: &Path,
) -> Result<Vec<usize>> {
    // A file order that is already topological is kept as it is.
    let in_order = deps
        .iter()
        .enumerate()
        .all(|(i, d)| d.iter().all(|v| producer[v.as_str()] < i));
    let mut pending: Vec<usize> = deps.iter().map(|d| d.len()).collect();
    let users = users_of(deps, producer);
    // Otherwise the earliest ready node in file order runs first.
    let mut ready: BinaryHeap<Reverse<usize>> = (0..g.node.len())
        .filter(|&i| pending[i] == 0 && !in_order)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(g.node.len());
    let mut queued: Vec<bool> = pending.iter().map(|&p| p == 0).collect();
    if in_order {
        order.extend(0..g.node.len());
        queued.iter_mut().for_each(|q| *q = true);
    }
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        let mut woken = Vec::new();
        for o in g.node[i].output.iter().filter(|o| !o.is_empty()) {
            for &u in users.get(o.as_str()).map(|v| v.as_slice()).unwrap_or(&[]) {
                pending[u] -= 1;
                if pending[u] == 0 && !queued[u] {
                    queued[u] = true;
                    woken.push(u);
                }
            }
        }
        ready.extend(woken.into_iter().map(Reverse));
    }
    if order.len() != g.node.len() {
        let stuck: Vec<String> = (0..g.node.len())
            .filter(|i| !queued[*i])
            .take(5)
            .map(|i| label(g, i))
            .collect();
        return Err(Error::MalformedModel {
            path: path.to_path_buf(),
            reason: format!(
                "the graph has a cycle: these nodes wait on each other and can never run: {}",
                stuck.join(", ")
            ),
        });
    }
    Ok(order)
}

/// The nodes waiting on each value, by the value's name as `producer` holds it.
fn users_of<'g>(
    deps: &[Vec<String>],
    producer: &HashMap<&'g str, usize>,
) -> HashMap<&'g str, Vec<usize>> {
    let mut users: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, d) in deps.iter().enumerate() {
        for v in d {
            users
                .entry(
                    producer
                        .get_key_value(v.as_str())
                        .map(|(k, _)| *k)
                        .unwrap_or(""),
                )
                .or_default()
                .push(i);
        }
    }
    users
}

/// The nodes of `g` in `order`, each with a unique name (`{Op}_{index}` for an unnamed one, `#index` appended to
/// a repeated one).
fn named_nodes(g: &GraphProto, order: &[usize]) -> Vec<Node> {
    let mut taken: HashSet<String> = HashSet::new();
    order
        .iter()
        .enumerate()
        .map(|(index, &i)| {
            let n = &g.node[i];
            let mut name = if n.name.is_empty() {
                format!("{}_{index}", n.op_type)
            } else {
                n.name.clone()
            };
            if !taken.insert(name.clone()) {
                name = format!("{name}#{index}");
                taken.insert(name.clone());
            }
            Node {
                index,
                source_index: i,
                name,
                op_type: n.op_type.clone(),
                domain: n.domain.clone(),
                inputs: n.input.clone(),
                outputs: n.output.clone(),
                subgraph_nodes: subgraphs(n).map(count_nodes).sum(),
            }
        })
        .collect()
}

/// `node `name` (Op)`, or `node #i (Op)` for an unnamed node.
fn label(g: &pb::GraphProto, i: usize) -> String {
    let n = &g.node[i];
    match n.name.is_empty() {
        true => format!("node #{i} ({})", n.op_type),
        false => format!("node `{}` ({})", n.name, n.op_type),
    }
}
