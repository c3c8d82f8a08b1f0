//! `phantom profile`: where the target's time and memory go, per node. ONNX Runtime runs the model the target runs
//! (its own optimizations, provider and options) with its built-in profiler on, one warm-up run and then `--runs N`;
//! phantom reads the trace ([`trace`]), takes each node's minimum and median over the runs, estimates FLOPs and
//! bytes moved from the shapes ([`cost`]), and ranks nodes and op types by time. Node names are ONNX Runtime's after
//! its graph optimizations (a fused or re-laid-out node has a new name); the model's node is named where they match.
//! The kernels' sum is set beside ONNX Runtime's own run time, and the difference is reported, not spread.

pub mod cost;
pub mod render;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::runner::trace::{self, Run};

/// The `phantom-profile/1` schema name.
pub const SCHEMA: &str = "phantom-profile/1";

/// Minimum and median of a time over the runs, in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Spread {
    pub min_us: f64,
    pub median_us: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Spread {
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        let median = match v.len() % 2 {
            1 => v[mid],
            _ => (v[mid - 1] + v[mid]) / 2.0,
        };
        Spread {
            min_us: v[0],
            median_us: median,
        }
    }
}

/// One node as ONNX Runtime ran it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeProfile {
    /// ONNX Runtime's node name.
    pub name: String,
    /// The model's node of that name, when ONNX Runtime kept it.
    pub model_node: Option<String>,
    pub op_type: String,
    pub provider: String,
    pub time: Spread,
    /// Share of the kernels' median total.
    pub share: f64,
    pub flops: Option<f64>,
    pub bytes: u64,
    /// FLOPs over the median time.
    pub flops_per_s: Option<f64>,
    /// Bytes of its outputs (the memory each value it computes takes).
    pub output_bytes: u64,
}

/// One op type's total.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpProfile {
    pub op_type: String,
    pub nodes: usize,
    pub median_us: f64,
    pub share: f64,
    pub flops: f64,
}

/// A profile of the target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Profile {
    pub schema: String,
    pub model: String,
    pub target: String,
    /// The engine and what ran (`onnxruntime 1.31.1 · CPUExecutionProvider · opt all`).
    pub ran: String,
    /// Timed runs (after one warm-up run).
    pub runs: usize,
    /// ONNX Runtime's own time per run (`model_run`).
    pub run: Spread,
    /// Its executor's time per run, when reported.
    pub executor: Option<Spread>,
    /// The kernels' summed time per run.
    pub kernels: Spread,
    /// Per node, in execution order.
    pub nodes: Vec<NodeProfile>,
    /// Per op type, most time first.
    pub ops: Vec<OpProfile>,
    pub total_flops: f64,
    /// Largest arena memory in use the target reported during a run, in bytes (ONNX Runtime reports it; wgpu does
    /// not).
    pub peak_memory: Option<u64>,
    pub notes: Vec<String>,
}

/// Builds the profile from the timed runs (the first, warm-up run dropped).
pub fn aggregate(runs: &[Run], model: &Graph, head: (String, String, String)) -> Result<Profile> {
    let timed: Vec<&Run> = runs.iter().skip(1).collect();
    if timed.is_empty() {
        return Err(Error::Ort {
            reason: "the profile holds no timed run".into(),
        });
    }
    let names: HashMap<&str, &str> = model
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.name.as_str()))
        .collect();
    let mut order: Vec<&str> = vec![];
    let mut per: HashMap<&str, Vec<f64>> = HashMap::new();
    let mut first: HashMap<&str, &trace::Kernel> = HashMap::new();
    for r in &timed {
        let mut this: BTreeMap<&str, f64> = BTreeMap::new();
        for k in &r.kernels {
            *this.entry(k.node.as_str()).or_default() += k.dur_us as f64;
            if first.insert(k.node.as_str(), k).is_none() {
                order.push(k.node.as_str());
            }
        }
        for n in &order {
            per.entry(n)
                .or_default()
                .push(this.get(n).copied().unwrap_or(0.0));
        }
    }
    let kernels = Spread::of(
        timed
            .iter()
            .map(|r| r.kernels.iter().map(|k| k.dur_us as f64).sum())
            .collect(),
    );
    let nodes: Vec<NodeProfile> = order
        .iter()
        .map(|n| {
            let k = first[n];
            let time = Spread::of(per.remove(n).unwrap_or_default());
            let flops = cost::flops(k);
            NodeProfile {
                name: n.to_string(),
                model_node: names.get(n).map(|s| s.to_string()),
                op_type: k.op_type.clone(),
                provider: k.provider.clone(),
                share: time.median_us / kernels.median_us.max(f64::MIN_POSITIVE),
                flops,
                bytes: cost::bytes(k),
                flops_per_s: flops
                    .filter(|_| time.median_us > 0.0)
                    .map(|f| f / (time.median_us * 1e-6)),
                output_bytes: k.output_bytes,
                time,
            }
        })
        .collect();
    let executor: Vec<f64> = timed
        .iter()
        .filter_map(|r| r.executor_us)
        .map(|u| u as f64)
        .collect();
    let (model_path, target, ran) = head;
    Ok(Profile {
        schema: SCHEMA.into(),
        model: model_path,
        target,
        ran,
        runs: timed.len(),
        run: Spread::of(timed.iter().map(|r| r.total_us as f64).collect()),
        executor: (executor.len() == timed.len()).then(|| Spread::of(executor)),
        kernels,
        ops: ops(&nodes),
        total_flops: nodes.iter().filter_map(|n| n.flops).sum(),
        peak_memory: timed
            .iter()
            .flat_map(|r| r.kernels.iter().map(|k| k.mem_peak))
            .max()
            .filter(|&m| m > 0),
        nodes,
        notes: vec![],
    })
}

/// Per op type: nodes, median time summed, share, FLOPs; most time first.
fn ops(nodes: &[NodeProfile]) -> Vec<OpProfile> {
    let mut by: BTreeMap<&str, OpProfile> = BTreeMap::new();
    for n in nodes {
        let e = by.entry(n.op_type.as_str()).or_insert_with(|| OpProfile {
            op_type: n.op_type.clone(),
            nodes: 0,
            median_us: 0.0,
            share: 0.0,
            flops: 0.0,
        });
        e.nodes += 1;
        e.median_us += n.time.median_us;
        e.share += n.share;
        e.flops += n.flops.unwrap_or(0.0);
    }
    let mut v: Vec<OpProfile> = by.into_values().collect();
    v.sort_by(|a, b| b.median_us.total_cmp(&a.median_us));
    v
}

/// Profiles the target of `s` on its inputs: `runs` timed runs after one warm-up. The profile and the runs (for
/// the Chrome trace).
pub fn profile(s: &crate::pipeline::CompareSettings, runs: usize) -> Result<(Profile, Vec<Run>)> {
    let mut p = crate::pipeline::prepare(s)?;
    let target = p.targets[0].as_mut();
    let (trace_runs, ran) = target.profiled(&p.graph, &p.inputs, runs + 1)?;
    let runs_model = target
        .own_model()
        .cloned()
        .unwrap_or_else(|| p.graph.clone());
    let head = (s.model.display().to_string(), s.target().label(), ran);
    let mut prof = aggregate(&trace_runs, &runs_model, head)?;
    prof.notes.extend(notes(&prof, &p.inputs));
    Ok((prof, trace_runs))
}

/// What the reader should know about the figures.
fn notes(p: &Profile, inputs: &Inputs) -> Vec<String> {
    let mut n = vec![format!(
        "inputs: {}; one warm-up run before the {} timed run(s)",
        inputs
            .summaries
            .iter()
            .map(|s| format!("{} {:?}", s.name, s.shape))
            .collect::<Vec<_>>()
            .join(", "),
        p.runs
    )];
    let gap = 1.0 - p.kernels.median_us / p.run.median_us.max(f64::MIN_POSITIVE);
    if gap > 0.1 {
        n.push(format!(
            "the kernels account for {:.0}% of ONNX Runtime's run time; the rest ({:.0} µs per run) is the session's own \
             work (input binding, allocation, thread hand-offs), not attributed to nodes",
            100.0 * (1.0 - gap),
            p.run.median_us - p.kernels.median_us
        ));
    }
    let renamed = p.nodes.iter().filter(|x| x.model_node.is_none()).count();
    if renamed > 0 {
        n.push(format!(
            "{renamed} node(s) are ONNX Runtime's own (fused or re-laid-out by its graph optimizations); \
             `--ort-opt-level disable` profiles the model's nodes as written"
        ));
    }
    n
}
