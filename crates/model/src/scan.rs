//! A `Scan` whose scan length is known before the run, unrolled as [`super::unroll`] unrolls a `Loop`: scan input j
//! sliced with `Gather` at step t along its axis (from the end when its direction is 1), the body copied per step,
//! scan outputs stacked along their axes (prepended when their direction is 1). Opset 8's Scan, whose inputs and
//! outputs lead with a batch axis and which takes `sequence_lens`, unrolls per batch element (each element's
//! steps, then the elements stacked again); with `sequence_lens` given it is left as it is.

use std::collections::HashMap;

use super::proto::{int_attr, scalar_i64};
use super::unroll::{body_of, clashes, copy_body, finals, replace, stack, tag, MAX_NODES};
use tract_onnx::pb::{GraphProto, NodeProto, TensorProto};

/// A `Scan` node as unrolling needs it.
pub struct ScanShape {
    /// State variables (the node's first inputs and outputs, after opset 8's `sequence_lens`).
    pub states: usize,
    /// The first scan input and its scan axis (negative counts from the end).
    pub first_scan: (String, i64),
    /// Opset 8: inputs and outputs lead with a batch axis.
    pub batched: bool,
}

fn ints(n: &NodeProto, name: &str) -> Vec<i64> {
    n.attribute
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.ints.clone())
        .unwrap_or_default()
}

/// The states and first scan input of a `Scan` node of the model's `opset`; `None` when it is not a Scan, or an
/// opset-8 Scan given `sequence_lens`.
pub fn scan_shape(n: &NodeProto, opset: i64) -> Option<ScanShape> {
    body_of(n)?;
    let m = n.attribute.iter().find(|a| a.name == "num_scan_inputs")?.i as usize;
    let batched = opset < 9;
    let lead = usize::from(batched);
    if batched && n.input.first().is_some_and(|s| !s.is_empty()) {
        return None;
    }
    let states = n.input.len().checked_sub(m + lead).filter(|_| m > 0)?;
    let first = n
        .input
        .get(lead + states)
        .filter(|s| !s.is_empty())?
        .clone();
    let axis = match batched {
        true => 1,
        false => ints(n, "scan_input_axes").first().copied().unwrap_or(0),
    };
    Some(ScanShape {
        states,
        first_scan: (first, axis),
        batched,
    })
}

/// Replaces the `Scan` node at `at` by copies of its body, `dims` being its first scan input's shape ([module
/// docs](self)). Returns the nodes added and the steps (per batch element, over all of them), or `None` (graph
/// untouched) when the result would be too large or names would clash.
pub fn unroll_scan(
    g: &mut GraphProto,
    at: usize,
    dims: &[usize],
    opset: i64,
) -> Option<(usize, usize)> {
    let n = g.node[at].clone();
    let body = body_of(&n).cloned()?;
    let shape = scan_shape(&n, opset)?;
    let (input, axis) = &shape.first_scan;
    let rank = dims.len() as i64;
    let trips = *dims.get(usize::try_from(if *axis < 0 { axis + rank } else { *axis }).ok()?)?;
    let batch = if shape.batched { *dims.first()? } else { 1 };
    let lead = usize::from(shape.batched);
    let m = n.input.len() - lead - shape.states;
    let steps = trips.saturating_mul(batch);
    if trips == 0
        || batch == 0
        || steps.saturating_mul(body.node.len() + m + 2) > MAX_NODES
        || clashes(g, &body, steps)
        || input.is_empty()
    {
        return None;
    }
    let mut u = Unrolled {
        n: &n,
        body: &body,
        trips,
        nodes: vec![],
        inits: body.initializer.clone(),
    };
    match shape.batched {
        false => u.whole(shape.states, opset),
        true => u.batched(shape.states, batch, opset),
    }
    let Unrolled { nodes, inits, .. } = u;
    Some((replace(g, at, nodes, inits), steps))
}

/// A Scan's unrolled nodes and initializers, as they are built.
struct Unrolled<'a> {
    n: &'a NodeProto,
    body: &'a GraphProto,
    trips: usize,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
}

impl Unrolled<'_> {
    fn attr(&self, name: &str, j: usize) -> i64 {
        ints(self.n, name).get(j).copied().unwrap_or(0)
    }

    /// `Gather(data, index)` along `axis` into `out`.
    fn gather(&mut self, data: &str, index: &str, axis: i64, out: &str) {
        self.nodes.push(NodeProto {
            name: out.into(),
            op_type: "Gather".into(),
            input: vec![data.into(), index.into()],
            output: vec![out.into()],
            attribute: vec![int_attr("axis", axis)],
            ..Default::default()
        });
    }

    /// The body's steps from `state` over `scans` (value, axis, reversed), named under `label` and tagged with steps
    /// `first..first + trips`: the final state, and each scan output's parts in step order.
    fn steps(
        &mut self,
        mut state: Vec<String>,
        scans: &[(String, i64, bool)],
        label: &str,
        first: usize,
    ) -> (Vec<String>, Vec<Vec<String>>) {
        let (body, trips) = (self.body, self.trips);
        let k_out = body.output.len().saturating_sub(state.len());
        let mut stacked: Vec<Vec<String>> = vec![vec![]; k_out];
        for t in 0..trips {
            let mut rename: HashMap<String, String> = HashMap::new();
            for (k, i) in body.input.iter().take(state.len()).enumerate() {
                rename.insert(i.name.clone(), state[k].clone());
            }
            for (j, (data, axis, reversed)) in scans.iter().enumerate() {
                let step = if *reversed { trips - 1 - t } else { t };
                let index = tag(&format!("{label}/step{j}"), t);
                let slice = tag(&format!("{label}/in{j}"), t);
                self.inits.push(scalar_i64(&index, step as i64));
                self.gather(data, &index, *axis, &slice);
                if let Some(i) = body.input.get(state.len() + j) {
                    rename.insert(i.name.clone(), slice);
                }
            }
            let out = copy_body(body, first + t, &mut rename, &mut self.nodes);
            let states = state.len();
            state = (0..states).map(&out).collect();
            for (j, s) in stacked.iter_mut().enumerate() {
                s.push(out(states + j));
            }
        }
        (state, stacked)
    }

    /// Opset 9 on: one run of steps over the inputs as they are.
    fn whole(&mut self, states: usize, opset: i64) {
        let n = self.n;
        let scans: Vec<(String, i64, bool)> = (n.input[states..].iter().enumerate())
            .map(|(j, s)| {
                let reversed = self.attr("scan_input_directions", j) == 1;
                (s.clone(), self.attr("scan_input_axes", j), reversed)
            })
            .collect();
        let (state, mut stacked) = self.steps(n.input[..states].to_vec(), &scans, &n.name, 0);
        finals(n, &state, &mut self.nodes);
        for (j, parts) in stacked.iter_mut().enumerate() {
            if self.attr("scan_output_directions", j) == 1 {
                parts.reverse();
            }
            if let Some(o) = n.output.get(states + j).filter(|o| !o.is_empty()) {
                let axis = self.attr("scan_output_axes", j);
                stack(
                    &n.name,
                    j,
                    parts,
                    o,
                    axis,
                    opset,
                    &mut self.nodes,
                    &mut self.inits,
                );
            }
        }
    }

    /// Opset 8: each batch element's states and scan inputs picked out, its steps run, and its final states and
    /// scan outputs stacked back along the batch axis.
    fn batched(&mut self, states: usize, batch: usize, opset: i64) {
        let n = self.n;
        let k_out = n.output.len().saturating_sub(states);
        let (mut finals_of, mut outs_of) = (vec![vec![]; states], vec![vec![]; k_out]);
        for b in 0..batch {
            let label = format!("{}/b{b}", n.name);
            let index = format!("{label}/index");
            self.inits.push(scalar_i64(&index, b as i64));
            let state: Vec<String> = (n.input[1..=states].iter().enumerate())
                .map(|(k, s)| {
                    let own = format!("{label}/state{k}");
                    self.gather(s, &index, 0, &own);
                    own
                })
                .collect();
            let scans: Vec<(String, i64, bool)> = (n.input[1 + states..].iter().enumerate())
                .map(|(j, s)| {
                    let own = format!("{label}/scan{j}");
                    self.gather(s, &index, 0, &own);
                    (own, 0, self.attr("directions", j) == 1)
                })
                .collect();
            let (last, stacked) = self.steps(state, &scans, &label, b * self.trips);
            for (k, v) in last.into_iter().enumerate() {
                finals_of[k].push(v);
            }
            for (j, parts) in stacked.iter().enumerate() {
                let out = format!("{label}/out{j}");
                stack(
                    &label,
                    j,
                    parts,
                    &out,
                    0,
                    opset,
                    &mut self.nodes,
                    &mut self.inits,
                );
                outs_of[j].push(out);
            }
        }
        let outs = finals_of.iter().chain(&outs_of).zip(&n.output);
        for (k, (parts, o)) in outs.enumerate().filter(|(_, (_, o))| !o.is_empty()) {
            let node = format!("{}/batch", n.name);
            stack(
                &node,
                k,
                parts,
                o,
                0,
                opset,
                &mut self.nodes,
                &mut self.inits,
            );
        }
    }
}
