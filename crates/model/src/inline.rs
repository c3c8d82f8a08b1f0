//! Control flow resolved for the inputs at hand: a top-level `If` whose condition can be computed before the run
//! (from the graph inputs, initializers and the nodes in front of it — a sample rate, a shape test) is replaced by
//! the branch the condition selects, for the reference and the target alike. tract then never has to type the
//! branch not taken (Silero VAD's 8 kHz branch does not type with 16 kHz inputs), and every node of the taken branch
//! becomes a top-level node whose values both sides expose and phantom compares. Repeated until no `If` is left
//! that can be resolved, so nested ones unfold too. The report says which branch ran in place of which `If`.
//! A `Loop` whose trip count is known the same way, or a `Scan` whose scan length is, is unrolled ([`super::unroll`]).
//! The sequences the graph builds are followed element by element between these steps ([`super::sequences`]).

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{GraphProto, ModelProto, NodeProto, ValueInfoProto};
use tract_onnx::prelude::*;

use super::inputs::Inputs;
use super::Graph;
use crate::error::Result;
use crate::tract::{datum_type, from_tract, to_tract_f64};

/// The most nodes evaluated in front of one condition (beyond, the `If` stays as it is).
const MAX_ANCESTORS: usize = 400;

/// How many `If`s may be unfolded in one model.
const MAX_INLINED: usize = 256;

/// Replaces every top-level `If` whose condition the inputs decide by its taken branch. Returns the graph to compare
/// (the original when nothing was inlined) and a note per inlined `If`.
pub fn taken_branches(graph: Graph, inputs: &Inputs) -> Result<Graph> {
    let sequences = super::optional::sequence_types(&graph.bytes);
    if !graph.nodes.iter().any(|n| {
        matches!(n.op_type.as_str(), "If" | "Loop" | "Scan")
            || super::sequences::OPS.contains(&n.op_type.as_str())
    }) && sequences.is_empty()
    {
        return Ok(graph);
    }
    let Ok(proto) = crate::import::decoded(&graph) else {
        return Ok(graph);
    };
    // Bodies with control flow of their own are unrolled when every copy of it is then resolved; where one is left
    // (a condition beyond what can be computed before the run), those loops stay whole, as tract runs them.
    match resolved(proto.clone(), inputs, sequences.clone(), true) {
        Ok((p, notes)) if !left_in_copies(&p) => reimported(graph, p, notes),
        _ => {
            let (p, notes) = resolved(proto, inputs, sequences, false)?;
            reimported(graph, p, notes)
        }
    }
}

/// Whether an unrolled loop's copy of a body left an `If`, `Loop` or `Scan` at the top level (named `….iter<t>`).
fn left_in_copies(m: &ModelProto) -> bool {
    let tagged = |name: &str| {
        name.rsplit_once(".iter")
            .is_some_and(|(_, t)| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
    };
    m.graph.as_ref().is_some_and(|g| {
        g.node
            .iter()
            .any(|n| matches!(n.op_type.as_str(), "If" | "Loop" | "Scan") && tagged(&n.name))
    })
}

/// The model with the control flow the inputs decide resolved ([`taken_branches`]), and a note per change;
/// `nested`: whether loops whose bodies hold control flow are unrolled.
fn resolved(
    mut proto: ModelProto,
    inputs: &Inputs,
    sequences: HashMap<String, tract_onnx::pb::type_proto::Tensor>,
    nested: bool,
) -> Result<(ModelProto, Vec<String>)> {
    let mut sequences = super::sequences::Sequences::new(&proto, sequences);
    let reference = |reason| crate::error::Error::Reference { reason };
    let mut notes = vec![];
    while notes.len() < MAX_INLINED {
        if let Some(note) = unroll_one(&mut proto, inputs, nested)
            .or_else(|| unroll_scan_one(&mut proto, inputs, nested))
        {
            notes.push(note);
            continue;
        }
        let Some(g) = proto.graph.as_ref() else { break };
        let Some((at, taken)) = resolvable(&proto, g, inputs) else {
            // Sequences the graph builds by now, followed: a trip count they give may let a Loop unroll next.
            match sequences.pass(&mut proto, inputs).map_err(reference)? {
                true => continue,
                false => break,
            }
        };
        let g = proto.graph.as_mut().expect("checked");
        let n = g.node[at].clone();
        let count = inline(g, at, taken);
        notes.push(format!(
            "If `{}`: its condition is {taken} for these inputs, so its {} branch ({count} nodes) runs in its place on both sides and its nodes are compared",
            n.name,
            if taken { "then" } else { "else" }
        ));
    }
    notes.extend(sequences.finish(&mut proto).map_err(reference)?);
    Ok((proto, notes))
}

/// `proto`, changed from `graph` as `notes` say, imported in its place (the report keeps naming the file as read);
/// `graph` itself when nothing changed.
pub fn reimported(graph: Graph, proto: ModelProto, notes: Vec<String>) -> Result<Graph> {
    if notes.is_empty() {
        return Ok(graph);
    }
    let mut changed = super::surgery::finish_like(&graph.path, proto, &graph)?;
    changed.sha256 = graph.sha256.clone();
    changed.was_unsorted |= graph.was_unsorted;
    changed.notes = graph.notes.iter().cloned().chain(notes).collect();
    Ok(changed)
}

/// Unrolls the first top-level `Loop` whose trip count the inputs decide and that nothing else can stop.
fn unroll_one(m: &mut ModelProto, inputs: &Inputs, nested: bool) -> Option<String> {
    let g = m.graph.as_ref()?;
    let producer = producers(g);
    let opset = opset_of(m);
    let mut found = None;
    for (at, n) in g
        .node
        .iter()
        .enumerate()
        .filter(|(_, n)| n.op_type == "Loop")
    {
        let value =
            |v: &str| ancestors(g, &producer, v).and_then(|a| evaluate(m, g, &a, v, inputs));
        let trips = n
            .input
            .first()
            .filter(|t| !t.is_empty())
            .and_then(|t| value(t));
        let cond = n
            .input
            .get(1)
            .filter(|c| !c.is_empty())
            .and_then(|c| value(c))
            .map(|c| c != 0.0);
        let flat = nested || !super::unroll::nested(n);
        if let Some(t) =
            trips.filter(|&t| t >= 0.0 && flat && super::unroll::stops_only_at_trip_count(n, cond))
        {
            found = Some((at, t as usize, n.name.clone()));
            break;
        }
    }
    let (at, trips, name) = found?;
    let g = m.graph.as_mut()?;
    let added = super::unroll::unroll(g, at, &super::unroll::Plan { trips }, opset)?;
    Some(unrolled_note("Loop", &name, trips, added))
}

fn unrolled_note(op: &str, name: &str, trips: usize, added: usize) -> String {
    format!(
        "{op} `{name}`: {trips} iterations for these inputs, unrolled into {added} nodes on both sides (values `<name>.iter<t>`), so each iteration is computed in f64 and compared"
    )
}

/// Unrolls the first top-level `Scan` whose scan length the inputs decide.
fn unroll_scan_one(m: &mut ModelProto, inputs: &Inputs, nested: bool) -> Option<String> {
    let g = m.graph.as_ref()?;
    let producer = producers(g);
    let opset = opset_of(m);
    let found = g
        .node
        .iter()
        .enumerate()
        .filter(|(_, n)| n.op_type == "Scan" && (nested || !super::unroll::nested(n)))
        .find_map(|(at, n)| {
            let scan = super::scan::scan_shape(n, opset)?;
            let input = &scan.first_scan.0;
            let t = ancestors(g, &producer, input)
                .and_then(|a| evaluate_tensor(m, g, &a, input, inputs))?;
            Some((at, t.shape().to_vec(), n.name.clone()))
        });
    let (at, dims, name) = found?;
    let (added, steps) = super::scan::unroll_scan(m.graph.as_mut()?, at, &dims, opset)?;
    Some(unrolled_note("Scan", &name, steps, added))
}

pub fn opset_of(m: &ModelProto) -> i64 {
    m.opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(13, |o| o.version)
}

fn producers(g: &GraphProto) -> HashMap<&str, usize> {
    g.node
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i)))
        .collect()
}

/// The first top-level `If` whose condition can be computed now, with its value.
fn resolvable(m: &ModelProto, g: &GraphProto, inputs: &Inputs) -> Option<(usize, bool)> {
    let producer: HashMap<&str, usize> = g
        .node
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i)))
        .collect();
    for (at, n) in g.node.iter().enumerate().filter(|(_, n)| n.op_type == "If") {
        let cond = n.input.first()?;
        let Some(nodes) = ancestors(g, &producer, cond) else {
            continue;
        };
        if let Some(v) = evaluate(m, g, &nodes, cond, inputs) {
            return Some((at, v != 0.0));
        }
    }
    None
}

/// Indices (in graph order) of the nodes `value` depends on, when none has a body and there are few enough.
fn ancestors(g: &GraphProto, producer: &HashMap<&str, usize>, value: &str) -> Option<Vec<usize>> {
    let mut seen = HashSet::new();
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        let Some(&i) = producer.get(v) else { continue };
        if !seen.insert(i) {
            continue;
        }
        let n = &g.node[i];
        if n.attribute
            .iter()
            .any(|a| a.g.is_some() || !a.graphs.is_empty())
            || seen.len() > MAX_ANCESTORS
        {
            return None;
        }
        stack.extend(n.input.iter().filter(|s| !s.is_empty()).map(|s| s.as_str()));
    }
    let mut v: Vec<usize> = seen.into_iter().collect();
    v.sort_unstable();
    Some(v)
}

/// The value of `v` for these inputs: an initializer, a `Constant`'s value, a graph input, or computed with tract
/// from the nodes in front of it. `None` when it cannot be known before the run.
pub fn value_of(m: &ModelProto, v: &str, inputs: &Inputs) -> Option<crate::tensor::Tensor> {
    let g = m.graph.as_ref()?;
    if let Some(t) = g.initializer.iter().find(|t| t.name == v) {
        return super::proto::tensor_from_proto(t, None).ok();
    }
    if let Some((_, t)) = inputs.tensors.iter().find(|(n, _)| n == v) {
        return Some(t.clone());
    }
    let producer = producers(g);
    let n = &g.node[*producer.get(v)?];
    if n.op_type == "Constant" {
        let t = n.attribute.iter().find(|a| a.name == "value")?.t.as_ref()?;
        return super::proto::tensor_from_proto(t, None).ok();
    }
    ancestors(g, &producer, v).and_then(|a| evaluate_tensor(m, g, &a, v, inputs))
}

/// Computes the scalar `cond` with tract on the sub-model of `nodes`, fed the prepared inputs. `None` when it cannot.
fn evaluate(
    m: &ModelProto,
    g: &GraphProto,
    nodes: &[usize],
    cond: &str,
    inputs: &Inputs,
) -> Option<f64> {
    let c = evaluate_tensor(m, g, nodes, cond, inputs)?;
    (c.len() == 1)
        .then(|| c.to_f64_array().iter().next().copied())
        .flatten()
}

/// Computes the value `cond` with tract on the sub-model of `nodes`, fed the prepared inputs.
fn evaluate_tensor(
    m: &ModelProto,
    g: &GraphProto,
    nodes: &[usize],
    cond: &str,
    inputs: &Inputs,
) -> Option<crate::tensor::Tensor> {
    let used: HashSet<&str> = nodes
        .iter()
        .flat_map(|&i| g.node[i].input.iter().map(|s| s.as_str()))
        .chain(std::iter::once(cond))
        .collect();
    let sub_inputs: Vec<ValueInfoProto> = g
        .input
        .iter()
        .filter(|i| used.contains(i.name.as_str()))
        .cloned()
        .map(|mut v| {
            bfloat16_as_float(&mut v);
            v
        })
        .collect();
    let sub = GraphProto {
        // Unique names: tract refuses a node named like another node or an initializer.
        node: nodes
            .iter()
            .map(|&i| NodeProto {
                name: format!("phantom_eval_{i}"),
                ..g.node[i].clone()
            })
            .collect(),
        initializer: g
            .initializer
            .iter()
            .filter(|t| used.contains(t.name.as_str()))
            .cloned()
            .collect(),
        input: sub_inputs.clone(),
        output: vec![super::surgery::untyped_value(cond)],
        name: "phantom_condition".into(),
        ..Default::default()
    };
    let sub_model = super::surgery::Header::of(m).model("phantom", sub);
    let mut model = tract_onnx::onnx()
        .with_ignore_value_info(true)
        .model_for_proto_model(&sub_model)
        .ok()?;
    let mut feeds = tvec![];
    for (k, i) in sub_inputs.iter().enumerate() {
        let t = inputs
            .tensors
            .iter()
            .find(|(n, _)| *n == i.name)
            .map(|(_, t)| t)?;
        let dt = datum_type(t.dtype());
        let v = to_tract_f64(t)
            .into_tensor()
            .cast_to_dt(dt)
            .ok()?
            .into_owned();
        model
            .set_input_fact(k, InferenceFact::dt_shape(dt, v.shape()))
            .ok()?;
        feeds.push(v.into_tvalue());
    }
    let plan = model.into_typed().ok()?.into_runnable().ok()?;
    let out = plan.run(feeds).ok()?;
    from_tract(out.first()?)
}

/// A bfloat16 graph input declared float32 for the evaluation (tract has no bfloat16; phantom holds such inputs in
/// float32, exactly): the casts a computed condition or trip count applies to it read it the same.
fn bfloat16_as_float(v: &mut ValueInfoProto) {
    use tract_onnx::pb::type_proto::Value;
    if let Some(Value::TensorType(t)) = v.r#type.as_mut().and_then(|t| t.value.as_mut()) {
        if t.elem_type == 16 {
            t.elem_type = 1;
        }
    }
}

/// Every value name the graph `g` defines or reads, and the outputs of `n` (the `If` being inlined, already taken out
/// of `g`).
fn outer_names(g: &GraphProto, n: &NodeProto) -> HashSet<String> {
    let values = g.node.iter().flat_map(|x| x.input.iter().chain(&x.output));
    (g.input.iter().chain(&g.output).map(|v| &v.name))
        .chain(g.initializer.iter().map(|t| &t.name))
        .chain(values)
        .chain(&n.output)
        .filter(|v| !v.is_empty())
        .cloned()
        .collect()
}

/// A branch is a scope of its own: it may define a name the outer graph defines too (optimum's merged decoders
/// write `logits` inside each branch and as the `If`'s output). Before its nodes join the outer graph, each value it
/// defines under a name in `outer` is renamed `{at}/{name}`, wherever the branch (and the graphs inside it) read it.
fn rename_shadowed(body: &mut GraphProto, outer: &HashSet<String>, at: &str) {
    let defined = (body.node.iter().flat_map(|x| x.output.iter()))
        .chain(body.initializer.iter().map(|t| &t.name))
        .filter(|v| !v.is_empty() && outer.contains(*v));
    let mut renames: HashMap<String, String> = HashMap::new();
    for v in defined {
        let base = format!("{at}/{v}");
        let fresh = (0..)
            .map(|k| {
                if k == 0 {
                    base.clone()
                } else {
                    format!("{base}.{k}")
                }
            })
            .find(|c| !outer.contains(c) && !renames.values().any(|r| r == c))
            .expect("a free name");
        renames.insert(v.clone(), fresh);
    }
    if !renames.is_empty() {
        rename_in(body, &renames);
    }
}

/// Applies `renames` to every definition and use in `g` and in the graphs inside it.
fn rename_in(g: &mut GraphProto, renames: &HashMap<String, String>) {
    let swap = |v: &mut String| {
        if let Some(r) = renames.get(v.as_str()) {
            *v = r.clone();
        }
    };
    for x in g.node.iter_mut() {
        x.input.iter_mut().chain(x.output.iter_mut()).for_each(swap);
        for a in x.attribute.iter_mut() {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                rename_in(sub, renames);
            }
        }
    }
    g.initializer.iter_mut().for_each(|t| swap(&mut t.name));
    (g.input
        .iter_mut()
        .chain(g.output.iter_mut())
        .chain(g.value_info.iter_mut()))
    .for_each(|v| swap(&mut v.name));
}

/// Replaces node `at` (an `If`) by the nodes of its `then` (`taken`) or `else` branch; returns how many.
fn inline(g: &mut GraphProto, at: usize, taken: bool) -> usize {
    let n = g.node.remove(at);
    let name = if taken { "then_branch" } else { "else_branch" };
    let Some(mut body) = n
        .attribute
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.g.clone())
    else {
        return 0;
    };
    rename_shadowed(&mut body, &outer_names(g, &n), &n.name);
    let mut names: HashSet<String> = g.node.iter().map(|x| x.name.clone()).collect();
    let mut nodes: Vec<NodeProto> = body
        .node
        .into_iter()
        .map(|mut x| {
            if x.name.is_empty() || names.contains(&x.name) {
                let base = format!(
                    "{}/{}",
                    n.name,
                    if x.name.is_empty() {
                        &x.op_type
                    } else {
                        &x.name
                    }
                );
                x.name = (0..)
                    .map(|k| {
                        if k == 0 {
                            base.clone()
                        } else {
                            format!("{base}.{k}")
                        }
                    })
                    .find(|c| !names.contains(c))
                    .expect("a free name");
            }
            names.insert(x.name.clone());
            x
        })
        .collect();
    let count = nodes.len();
    for (k, (out, inner)) in n.output.iter().zip(&body.output).enumerate() {
        if out.is_empty() {
            continue;
        }
        nodes.push(NodeProto {
            name: format!("{}/output{k}", n.name),
            op_type: "Identity".into(),
            input: vec![inner.name.clone()],
            output: vec![out.clone()],
            ..Default::default()
        });
    }
    g.initializer.extend(body.initializer);
    g.value_info.extend(body.value_info);
    g.node.splice(at..at, nodes);
    count
}
