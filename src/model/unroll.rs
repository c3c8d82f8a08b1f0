//! A top-level `Loop` whose trip count is known before the run and whose condition cannot stop it early (absent,
//! or passed through unchanged from a true start) is unrolled: each iteration's body becomes top-level nodes whose
//! values are named `<value>.iter<t>`, loop-carried values are threaded through, scan outputs are stacked with
//! `Unsqueeze` + `Concat`. tract cannot type `Loop`; unrolled, every iteration's values are computed in f64 and
//! compared on both sides (the target runs the unrolled model too). Loops with nested bodies, a data-dependent
//! stop or more than [`MAX_NODES`] unrolled nodes are left as they are.

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto, TensorProto,
};

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
    let Some(body) = n
        .attribute
        .iter()
        .find(|a| a.name == "body")
        .and_then(|a| a.g.as_ref())
    else {
        return false;
    };
    if body.node.iter().any(|x| {
        x.attribute
            .iter()
            .any(|a| a.g.is_some() || !a.graphs.is_empty())
    }) {
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

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}

/// Replaces the Loop node at `at` by `plan.trips` copies of its body. Returns the nodes added, or `None` (graph
/// untouched) when the unrolled loop would be too large or names would clash.
pub fn unroll(g: &mut GraphProto, at: usize, plan: &Plan, opset: i64) -> Option<usize> {
    let n = g.node[at].clone();
    let body = n
        .attribute
        .iter()
        .find(|a| a.name == "body")
        .and_then(|a| a.g.clone())?;
    let carried = n.input.len().saturating_sub(2);
    let scans = body.output.len().checked_sub(1 + carried)?;
    if plan.trips == 0 || plan.trips * (body.node.len() + 2) > MAX_NODES {
        return None;
    }
    let existing: HashSet<&str> = g
        .node
        .iter()
        .flat_map(|x| x.output.iter().map(|s| s.as_str()))
        .collect();
    let inner: HashSet<String> = body
        .node
        .iter()
        .flat_map(|x| x.output.iter().cloned())
        .collect();
    let tag = |v: &str, t: usize| format!("{v}.iter{t}");
    if inner
        .iter()
        .any(|v| (0..plan.trips).any(|t| existing.contains(tag(v, t).as_str())))
    {
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
            inits.push(TensorProto {
                name: name.clone(),
                data_type: 7,
                int64_data: vec![t as i64],
                ..Default::default()
            });
            rename.insert(i.name.clone(), name);
        }
        if let Some(c) = body.input.get(1) {
            rename.insert(c.name.clone(), cond.clone());
        }
        for (k, i) in body.input.iter().skip(2).enumerate() {
            rename.insert(i.name.clone(), state[k].clone());
        }
        for v in &inner {
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
        let out = |k: usize| {
            rename
                .get(&body.output[k].name)
                .cloned()
                .unwrap_or_else(|| body.output[k].name.clone())
        };
        state = (0..carried).map(|k| out(1 + k)).collect();
        for (j, s) in stacked.iter_mut().enumerate() {
            s.push(out(1 + carried + j));
        }
    }
    for (k, o) in n.output.iter().take(carried).enumerate() {
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
    let axes = format!("{}/axes0", n.name);
    if opset >= 13 && scans > 0 {
        inits.push(TensorProto {
            name: axes.clone(),
            data_type: 7,
            dims: vec![1],
            int64_data: vec![0],
            ..Default::default()
        });
    }
    for (j, parts) in stacked.iter().enumerate() {
        let Some(o) = n.output.get(carried + j).filter(|o| !o.is_empty()) else {
            continue;
        };
        let mut rows = vec![];
        for (t, p) in parts.iter().enumerate() {
            let row = format!("{o}.row{t}");
            let mut u = NodeProto {
                name: format!("{}/stack{j}.{t}", n.name),
                op_type: "Unsqueeze".into(),
                input: vec![p.clone()],
                output: vec![row.clone()],
                ..Default::default()
            };
            if opset >= 13 {
                u.input.push(axes.clone());
            } else {
                u.attribute.push(AttributeProto {
                    name: "axes".into(),
                    r#type: AttributeType::Ints as i32,
                    ints: vec![0],
                    ..Default::default()
                });
            }
            nodes.push(u);
            rows.push(row);
        }
        nodes.push(NodeProto {
            name: format!("{}/stack{j}", n.name),
            op_type: "Concat".into(),
            input: rows,
            output: vec![o.clone()],
            attribute: vec![int_attr("axis", 0)],
            ..Default::default()
        });
    }
    let count = nodes.len();
    g.node.splice(at..at + 1, nodes);
    g.initializer.extend(inits);
    Some(count)
}
