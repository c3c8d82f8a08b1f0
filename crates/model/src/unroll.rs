//! A top-level `Loop` whose trip count is known before the run and whose condition cannot stop it early (absent,
//! or passed through unchanged from a true start), or a `Scan` whose scan inputs' length is known, is unrolled: each iteration's body becomes top-level nodes whose
//! values are named `<value>.iter<t>`, loop-carried values are threaded through, scan outputs are stacked with
//! `Unsqueeze` + `Concat` (a Scan's inputs are sliced per step with `Gather`). tract cannot type `Loop`; unrolled, every iteration's values are computed in f64 and
//! compared on both sides (the target runs the unrolled model too). Loops with nested bodies, a data-dependent
//! stop or more than [`MAX_NODES`] unrolled nodes are left as they are.

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
    if nested(body) {
        return false;
    }
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
fn body_of(n: &NodeProto) -> Option<&GraphProto> {
    n.attribute
        .iter()
        .find(|a| a.name == "body")
        .and_then(|a| a.g.as_ref())
}

/// Whether a body holds nodes with bodies of their own (not unrolled).
fn nested(body: &GraphProto) -> bool {
    body.node.iter().any(|x| {
        x.attribute
            .iter()
            .any(|a| a.g.is_some() || !a.graphs.is_empty())
    })
}

/// Puts `nodes` in place of node `at` and adds `inits`; returns how many nodes were added.
fn replace(g: &mut GraphProto, at: usize, nodes: Vec<NodeProto>, inits: Vec<TensorProto>) -> usize {
    let count = nodes.len();
    g.node.splice(at..at + 1, nodes);
    g.initializer.extend(inits);
    count
}

fn tag(v: &str, t: usize) -> String {
    format!("{v}.iter{t}")
}

/// Appends iteration `t` of `body` to `nodes`: node names and the body's own values tagged `.iter<t>`, the
/// body's inputs renamed as `rename` says. Returns the name iteration `t` gives body output `k`.
fn copy_body<'b>(
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

/// The final values of the carried state, under the node's first outputs.
fn finals(n: &NodeProto, state: &[String], nodes: &mut Vec<NodeProto>) {
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
fn clashes(g: &GraphProto, body: &GraphProto, trips: usize) -> bool {
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

fn ints(n: &NodeProto, name: &str) -> Vec<i64> {
    n.attribute
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.ints.clone())
        .unwrap_or_default()
}

/// A `Scan` node (opset 9 and later) as unrolling needs it.
pub struct ScanShape {
    /// State variables (the node's first inputs and outputs).
    pub states: usize,
    /// The first scan input and its scan axis (negative counts from the end).
    pub first_scan: (String, i64),
}

/// The states and first scan input of a `Scan` node, `None` when it is not a Scan of opset 9 or later or has a
/// nested body.
pub fn scan_shape(n: &NodeProto) -> Option<ScanShape> {
    let body = body_of(n)?;
    if nested(body) {
        return None;
    }
    let m = n.attribute.iter().find(|a| a.name == "num_scan_inputs")?.i as usize;
    let states = n.input.len().checked_sub(m).filter(|_| m > 0)?;
    let first = n.input.get(states).filter(|s| !s.is_empty())?.clone();
    let axis = ints(n, "scan_input_axes").first().copied().unwrap_or(0);
    Some(ScanShape {
        states,
        first_scan: (first, axis),
    })
}

/// Replaces the `Scan` node at `at` by `trips` copies of its body: scan input j sliced with `Gather` at step t
/// along its axis (from the end when its direction is 1), scan outputs stacked along their axes (prepended when
/// their direction is 1). Returns the nodes added, or `None` (graph untouched) as [`unroll`] does.
pub fn unroll_scan(g: &mut GraphProto, at: usize, trips: usize, opset: i64) -> Option<usize> {
    let n = g.node[at].clone();
    let body = body_of(&n).cloned()?;
    let shape = scan_shape(&n)?;
    let m = n.input.len() - shape.states;
    let k_out = body.output.len().checked_sub(shape.states)?;
    if trips == 0
        || trips.saturating_mul(body.node.len() + m + 2) > MAX_NODES
        || opset < 11
        || clashes(g, &body, trips)
    {
        return None;
    }
    let attr = |name: &str, j: usize| ints(&n, name).get(j).copied().unwrap_or(0);
    let mut nodes = vec![];
    let mut inits: Vec<TensorProto> = body.initializer.clone();
    let mut state: Vec<String> = n.input[..shape.states].to_vec();
    let mut stacked: Vec<Vec<String>> = vec![vec![]; k_out];
    for t in 0..trips {
        let mut rename: HashMap<String, String> = HashMap::new();
        for (k, i) in body.input.iter().take(shape.states).enumerate() {
            rename.insert(i.name.clone(), state[k].clone());
        }
        for j in 0..m {
            let step = if attr("scan_input_directions", j) == 1 {
                trips - 1 - t
            } else {
                t
            };
            let (index, slice) = (
                tag(&format!("{}/step{j}", n.name), t),
                tag(&format!("{}/in{j}", n.name), t),
            );
            inits.push(scalar_i64(&index, step as i64));
            nodes.push(NodeProto {
                name: slice.clone(),
                op_type: "Gather".into(),
                input: vec![n.input[shape.states + j].clone(), index],
                output: vec![slice.clone()],
                attribute: vec![int_attr("axis", attr("scan_input_axes", j))],
                ..Default::default()
            });
            if let Some(i) = body.input.get(shape.states + j) {
                rename.insert(i.name.clone(), slice);
            }
        }
        let out = copy_body(&body, t, &mut rename, &mut nodes);
        state = (0..shape.states).map(&out).collect();
        for (j, s) in stacked.iter_mut().enumerate() {
            s.push(out(shape.states + j));
        }
    }
    finals(&n, &state, &mut nodes);
    for (j, parts) in stacked.iter_mut().enumerate() {
        if attr("scan_output_directions", j) == 1 {
            parts.reverse();
        }
        if let Some(o) = n.output.get(shape.states + j).filter(|o| !o.is_empty()) {
            stack(
                &n.name,
                j,
                parts,
                o,
                attr("scan_output_axes", j),
                opset,
                &mut nodes,
                &mut inits,
            );
        }
    }
    Some(replace(g, at, nodes, inits))
}
