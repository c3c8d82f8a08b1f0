//! `--bisect`: the first divergent value in O(log N) target runs, each exposing one value besides the outputs,
//! with memory bounded by one value: the f64 reference streams once and
//! parks every value on disk. The search walks the ancestors of the first failing output in topological order and
//! assumes, like `git bisect`, that once a value diverges the values after it on that path stay divergent; the
//! full `phantom onnx` run shows every value when that does not hold.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::analysis;
use crate::compare::Scales;
use crate::error::{Error, Result};
use crate::model::{self, Graph};
use crate::pipeline::{prepare, CompareSettings, Prepared};
use crate::report::model::ValueStatus;
use crate::runner::reference::ReferenceRunner;
use crate::spill::{Spill, Values};
use crate::targets::{Capture, Target};
use crate::tensor::Tensor;

/// One probed value.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
    pub status: ValueStatus,
    pub max_abs: Option<f64>,
    pub tolerance_used: Option<f64>,
}

/// What the search found.
#[derive(Clone, Debug, Serialize)]
pub struct BisectReport {
    pub model: String,
    /// The target probed (`ort-cpu`, `wgpu`).
    pub target: String,
    /// What ran: the provider placement or the adapter.
    pub ran: String,
    /// Values on the path searched (ancestors of the first failing output).
    pub candidates: usize,
    /// Target runs made (one for the outputs, then one per probe).
    pub target_runs: usize,
    /// The first failing value on that path; `None` when the outputs pass.
    pub first_divergence: Option<Probe>,
    /// Every probe in the order made.
    pub probes: Vec<Probe>,
}

/// Runs the target exposing `names`; their values.
fn expose(
    target: &mut dyn Target,
    graph: &Graph,
    names: &[&str],
    inputs: &model::inputs::Inputs,
) -> Result<HashMap<String, Tensor>> {
    Ok(target.run(graph, inputs, Capture::Names(names))?.values)
}

fn ancestors(graph: &Graph, of: &str) -> HashSet<usize> {
    let producers = graph.producers();
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = producers.get(of).copied().into_iter().collect();
    while let Some(i) = stack.pop() {
        if seen.insert(i) {
            stack.extend(
                graph.nodes[i]
                    .inputs
                    .iter()
                    .filter_map(|v| producers.get(v.as_str())),
            );
        }
    }
    seen
}

/// The target's values of the nodes the reference stands in for (custom ops, data-dependent lengths), as a whole
/// run seeds them: exposed by one run of `target` when the graph has such nodes.
fn stand_ins(
    target: &mut dyn Target,
    graph: &Graph,
    inputs: &model::inputs::Inputs,
) -> Result<Option<std::sync::Arc<crate::runner::reference::contrib::standin::Known>>> {
    use crate::runner::reference::contrib::standin::may_stand_in;
    let names: Vec<&str> = (graph.nodes.iter())
        .filter(|n| may_stand_in(&n.domain, &n.op_type))
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    let out = target.run(graph, inputs, Capture::Names(&names))?;
    Ok(Some(crate::pipeline::noise::known_from(graph, &out.values)))
}

/// Streams the reference once and parks every value (the slice of it, with --slice) on disk; the RMS of each. The
/// values of nodes the reference stands in for come from `target`, as in a whole run.
pub(crate) fn park(
    s: &CompareSettings,
    graph: &Graph,
    inputs: &model::inputs::Inputs,
    target: &mut dyn Target,
) -> Result<(Spill, Scales)> {
    let mut parked = Spill::new("park")?;
    let mut scales = Scales::new(graph);
    for (n, t) in &inputs.tensors {
        scales.record(n, t);
    }
    let mut failed: Option<Error> = None;
    let mut runner = ReferenceRunner {
        known: stand_ins(target, graph, inputs)?,
        ..Default::default()
    };
    runner.run_streaming(graph, inputs, &mut |name, v| {
        if let (Ok(t), None) = (v, &failed) {
            scales.record(name, &t);
            let t = match &s.slice {
                Some(sp) => sp.apply(&t),
                None => t,
            };
            if let Err(e) = parked.put(name, &t) {
                failed = Some(e);
            }
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok((parked, scales)),
    }
}

/// Compares probed values with the parked reference.
struct Prober<'a> {
    s: &'a CompareSettings,
    graph: &'a Graph,
    parked: &'a Spill,
    scales: &'a Scales,
    outputs: HashSet<&'a str>,
    node_of: HashMap<&'a str, usize>,
}

impl<'a> Prober<'a> {
    fn new(
        s: &'a CompareSettings,
        graph: &'a Graph,
        (parked, scales): (&'a Spill, &'a Scales),
    ) -> Prober<'a> {
        Prober {
            s,
            graph,
            parked,
            scales,
            outputs: graph.outputs.iter().map(|o| o.name.as_str()).collect(),
            node_of: graph.producers(),
        }
    }

    /// The probe of value `name` given the target's value (absent: not produced).
    fn probe(&self, name: &str, t: Option<&Tensor>) -> Option<Probe> {
        let r = self.parked.get(name)?;
        let n = &self.graph.nodes[*self.node_of.get(name)?];
        let cut = t.map(|t| match &self.s.slice {
            Some(sp) => sp.apply(t),
            None => t.clone(),
        });
        let v = analysis::compare_pair(
            name,
            Ok(&r),
            cut.as_ref().ok_or("not produced"),
            &self.s.tolerance,
            self.scales.scaling(name),
            self.outputs.contains(name),
            false,
        );
        Some(Probe {
            node_index: n.index,
            node: n.name.clone(),
            op_type: n.op_type.clone(),
            value: name.to_string(),
            status: v.status,
            max_abs: v.metrics.as_ref().map(|m| m.max_abs),
            tolerance_used: v.metrics.as_ref().map(|m| m.tolerance_used),
        })
    }
}

/// Finds the first divergent value of `s.model` on the target with O(log N) runs.
pub fn bisect(s: &CompareSettings) -> Result<BisectReport> {
    let Prepared {
        graph,
        inputs,
        mut targets,
        ..
    } = prepare(s)?;
    let target = targets[0].as_mut();
    let (parked, scales) = park(s, &graph, &inputs, target)?;
    let pr = Prober::new(s, &graph, (&parked, &scales));
    let out_names: Vec<&str> = graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let got = expose(target, &graph, &out_names, &inputs)?;
    let probes: Vec<Probe> = out_names
        .iter()
        .filter_map(|o| pr.probe(o, got.get(*o)))
        .collect();
    let failing = probes
        .iter()
        .find(|p| p.status == ValueStatus::Fail)
        .cloned();
    let mut report = BisectReport {
        model: graph.path.display().to_string(),
        target: s.target().label(),
        ran: target.facts(&graph).used(),
        candidates: 0,
        target_runs: 1,
        first_divergence: None,
        probes,
    };
    if let Some(out) = failing {
        search(&pr, target, &inputs, out, &mut report)?;
    }
    Ok(report)
}

/// Binary search over the ancestors of the failing output `out`, in topological order.
fn search(
    pr: &Prober,
    target: &mut dyn Target,
    inputs: &model::inputs::Inputs,
    out: Probe,
    report: &mut BisectReport,
) -> Result<()> {
    let on_path = ancestors(pr.graph, &out.value);
    let candidates: Vec<&str> = pr
        .graph
        .nodes
        .iter()
        .filter(|n| on_path.contains(&n.index) && n.op_type != "Constant")
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .filter(|v| pr.parked.has(v))
        .collect();
    let last = candidates
        .iter()
        .position(|v| *v == out.value)
        .unwrap_or(candidates.len().saturating_sub(1));
    let (mut lo, mut hi): (isize, usize) = (-1, last);
    let mut first = Some(out);
    while hi as isize - lo > 1 {
        let mid = ((lo + hi as isize) / 2) as usize;
        let v = candidates[mid];
        let got = expose(target, pr.graph, &[v], inputs)?;
        report.target_runs += 1;
        let p = pr.probe(v, got.get(v));
        let fails = p.as_ref().is_some_and(|p| p.status == ValueStatus::Fail);
        if let Some(p) = p {
            report.probes.push(p.clone());
            if fails {
                first = Some(p);
            }
        }
        match fails {
            true => hi = mid,
            false => lo = mid as isize,
        }
    }
    report.candidates = candidates.len();
    report.first_divergence = first;
    Ok(())
}
