//! A top-level `Loop` whose trip count is known before the run and whose condition cannot stop it early (absent,
//! or passed through unchanged from a true start), or a `Scan` whose scan inputs' length is known ([`super::scan`]), is unrolled: each iteration's body becomes top-level nodes whose
//! values are named `<value>.iter<t>`, loop-carried values are threaded through, scan outputs are stacked with
//! `Unsqueeze` + `Concat` (a Scan's inputs are sliced per step with `Gather`). tract cannot type `Loop`; unrolled, every iteration's values are computed in f64 and
//! compared on both sides (the target runs the unrolled model too). Bodies with subgraphs of their own (an `If`
//! inside) are copied with those subgraphs' names tagged too, when asked ([`super::inline`] asks first, and unrolls
//! without them when a copy's `If` is left unresolved). Loops with a data-dependent stop or more than [`MAX_NODES`] unrolled nodes are left as they are.

use std::collections::{HashMap, HashSet};

use super::proto::{int_attr, ints_attr, scalar_i64};
use tract_onnx::pb::{GraphProto, NodeProto, TensorProto};

/// The most nodes an unrolled loop may add.
pub const MAX_NODES: usize = 20_000;

/// What is known of a Loop node before the run.
pub struct Plan {
    /// Iterations.
    pub trips: usize,
}

/// Whether the loop's body can only be stopped by its trip count: no condition input, or a condition that starts
/// true (`cond_true`) and that the body passes through unchanged.
pub fn stops_only_at_trip_count(n: &NodeProto, cond_true: Option<bool>) -> bool {
    let Some(body) = body_of(n) else {
        return false;
    };
    let has_cond = n.input.get(1).is_some_and(|c| !c.is_empty());
    if has_cond && cond_true != Some(true) {
        return false;
    }
    let (Some(cin), Some(cout)) = (body.input.get(1), body.output.first()) else {
        return false;
    };
    // cond_out is cond_in itself, or an Identity of it.
    cout.name == cin.name
        || body.node.iter().any(|x| {
            x.op_type == "Identity"
                && x.output.first() == Some(&cout.name)
                && x.input.first() == Some(&cin.name)
        })
}

/// A Loop's or Scan's body.
pub(super) fn body_of(n: &NodeProto) -> Option<&GraphProto> {
    n.attribute
        .iter()
        .find(|a| a.name == "body")
        .and_then(|a| a.g.as_ref())
}

/// Whether a Loop's or Scan's body holds nodes with bodies of their own.
pub fn nested(n: &NodeProto) -> bool {
    body_of(n).is_some_and(|body| {
        body.node.iter().any(|x| {
            x.attribute
                .iter()
                .any(|a| a.g.is_some() || !a.graphs.is_empty())
        })
    })
}

/// Puts `nodes` in place of node `at` and adds `inits`; returns how many nodes were added.
pub(super) fn replace(
    g: &mut GraphProto,
    at: usize,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
) -> usize {
    let count = nodes.len();
    g.node.splice(at..at + 1, nodes);
    g.initializer.extend(inits);
    count
}

pub(super) fn tag(v: &str, t: usize) -> String {
    format!("{v}.iter{t}")
}

/// Appends iteration `t` of `body` to `nodes`: node names and the body's own values tagged `.iter<t>`, the
/// body's inputs renamed as `rename` says. Returns the name iteration `t` gives body output `k`.
pub(super) fn copy_body<'b>(
    body: &'b GraphProto,
    t: usize,
    rename: &'b mut HashMap<String, String>,
    nodes: &mut Vec<NodeProto>,
) -> impl Fn(usize) -> String + 'b {
    for v in body.node.iter().flat_map(|x| x.output.iter()) {
        rename.insert(v.clone(), tag(v, t));
    }
    for x in &body.node {
        let mut y = x.clone();
        y.name = tag(
            if x.name.is_empty() {
                &x.op_type
            } else {
                &x.name
            },
            t,
        );
        for s in y.input.iter_mut().chain(y.output.iter_mut()) {
            if let Some(r) = rename.get(s.as_str()) {
                *s = r.clone();
            }
        }
        for a in &mut y.attribute {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                retag_subgraph(sub, rename, t);
            }
        }
        nodes.push(y);
    }
    let rename: &'b HashMap<String, String> = rename;
    move |k| {
        rename
            .get(&body.output[k].name)
            .cloned()
            .unwrap_or_else(|| body.output[k].name.clone())
    }
}

/// A subgraph (an `If` branch, a nested body) of a node copied for iteration `t`: the outer values it reads renamed
/// as `outer` says, and its own values, inputs and nodes tagged `.iter<t>` (ONNX names are unique across a graph
/// and its subgraphs, so each copy's subgraphs get names of their own), recursively.
fn retag_subgraph(g: &mut GraphProto, outer: &HashMap<String, String>, t: usize) {
    let mut map = outer.clone();
    let own = (g.input.iter().map(|v| &v.name))
        .chain(g.initializer.iter().map(|i| &i.name))
        .chain(g.node.iter().flat_map(|x| x.output.iter()))
        .filter(|v| !v.is_empty());
    let own: Vec<String> = own.cloned().collect();
    map.extend(own.into_iter().map(|v| (v.clone(), tag(&v, t))));
    let renamed = |s: &mut String| {
        if let Some(r) = map.get(s.as_str()) {
            *s = r.clone();
        }
    };
    (g.input
        .iter_mut()
        .chain(g.output.iter_mut())
        .chain(g.value_info.iter_mut()))
    .for_each(|v| renamed(&mut v.name));
    g.initializer.iter_mut().for_each(|i| renamed(&mut i.name));
    for x in &mut g.node {
        x.name = tag(&x.name, t);
        x.input
            .iter_mut()
            .chain(x.output.iter_mut())
            .for_each(renamed);
        for a in &mut x.attribute {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                retag_subgraph(sub, &map, t);
            }
        }
    }
}

/// The final values of the carried state, under the node's first outputs.
pub(super) fn finals(n: &NodeProto, state: &[String], nodes: &mut Vec<NodeProto>) {
    for (k, o) in n.output.iter().take(state.len()).enumerate() {
        if !o.is_empty() {
            nodes.push(NodeProto {
                name: format!("{}/final{k}", n.name),
                op_type: "Identity".into(),
                input: vec![state[k].clone()],
                output: vec![o.clone()],
                ..Default::default()
            });
        }
    }
}

/// Stacks the per-iteration values `parts` along a new `axis` into `out` (`Unsqueeze` each, then `Concat`).
#[allow(clippy::too_many_arguments)]
pub(super) fn stack(
    node: &str,
    j: usize,
    parts: &[String],
    out: &str,
    axis: i64,
    opset: i64,
    nodes: &mut Vec<NodeProto>,
    inits: &mut Vec<TensorProto>,
) {
    let axes = format!("{node}/axes{j}");
    if opset >= 13 {
        inits.push(TensorProto {
            name: axes.clone(),
            data_type: 7,
            dims: vec![1],
            int64_data: vec![axis],
            ..Default::default()
        });
    }
    let mut rows = vec![];
    for (t, p) in parts.iter().enumerate() {
        let row = format!("{out}.row{t}");
        let mut u = NodeProto {
            name: format!("{node}/stack{j}.{t}"),
            op_type: "Unsqueeze".into(),
            input: vec![p.clone()],
            output: vec![row.clone()],
            ..Default::default()
        };
        match opset >= 13 {
            true => u.input.push(axes.clone()),
            false => u.attribute.push(ints_attr("axes", vec![axis])),
        }
        nodes.push(u);
        rows.push(row);
    }
    nodes.push(NodeProto {
        name: format!("{node}/stack{j}"),
        op_type: "Concat".into(),
        input: rows,
        output: vec![out.to_string()],
        attribute: vec![int_attr("axis", axis)],
        ..Default::default()
    });
}

/// Whether a tagged body value would take a name the graph already has.
pub(super) fn clashes(g: &GraphProto, body: &GraphProto, trips: usize) -> bool {
    let existing: HashSet<&str> = g
        .node
        .iter()
        .flat_map(|x| x.output.iter().map(|s| s.as_str()))
        .collect();
    body.node
        .iter()
        .flat_map(|x| x.output.iter())
        .any(|v| (0..trips).any(|t| existing.contains(tag(v, t).as_str())))
}

/// Replaces the Loop node at `at` by `plan.trips` copies of its body. Returns the nodes added, or `None` (graph
/// untouched) when the unrolled loop would be too large or names would clash.
pub fn unroll(g: &mut GraphProto, at: usize, plan: &Plan, opset: i64) -> Option<usize> {
    let n = g.node[at].clone();
    let body = body_of(&n).cloned()?;
    let carried = n.input.len().saturating_sub(2);
    let scans = body.output.len().checked_sub(1 + carried)?;
    if plan.trips == 0 || plan.trips.saturating_mul(body.node.len() + 2) > MAX_NODES {
        return None;
    }
    if clashes(g, &body, plan.trips) {
        return None;
    }
    let mut nodes = vec![];
    let mut inits: Vec<TensorProto> = body.initializer.clone();
    // The condition every iteration sees: the loop's own (checked true), or a constant true.
    let cond = match n.input.get(1).filter(|c| !c.is_empty()) {
        Some(c) => c.clone(),
        None => {
            let name = format!("{}/cond_true", n.name);
            inits.push(TensorProto {
                name: name.clone(),
                data_type: 9,
                int32_data: vec![1],
                ..Default::default()
            });
            name
        }
    };
    let mut state: Vec<String> = n.input[2..].to_vec();
    let mut stacked: Vec<Vec<String>> = vec![vec![]; scans];
    for t in 0..plan.trips {
        let mut rename: HashMap<String, String> = HashMap::new();
        if let Some(i) = body.input.first() {
            let name = tag(&format!("{}/{}", n.name, i.name), t);
            inits.push(scalar_i64(&name, t as i64));
            rename.insert(i.name.clone(), name);
        }
        if let Some(c) = body.input.get(1) {
            rename.insert(c.name.clone(), cond.clone());
        }
        for (k, i) in body.input.iter().skip(2).enumerate() {
            rename.insert(i.name.clone(), state[k].clone());
        }
        let out = copy_body(&body, t, &mut rename, &mut nodes);
        state = (0..carried).map(|k| out(1 + k)).collect();
        for (j, s) in stacked.iter_mut().enumerate() {
            s.push(out(1 + carried + j));
        }
    }
    finals(&n, &state, &mut nodes);
    for (j, parts) in stacked.iter().enumerate() {
        if let Some(o) = n.output.get(carried + j).filter(|o| !o.is_empty()) {
            stack(&n.name, j, parts, o, 0, opset, &mut nodes, &mut inits);
        }
    }
    Some(replace(g, at, nodes, inits))
}
