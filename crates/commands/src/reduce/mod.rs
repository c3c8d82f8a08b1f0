//! `phantom reduce`: the smallest subgraph that reproduces a culprit, as a bundle an upstream project can run.
//!
//! The node is the first culprit of a full comparison (or `--node`). phantom cuts it out of the model the target
//! runs (the converted or `--target-model` one), feeds it the f64 reference's values stored as the target stores
//! them, and runs the cut on the same target. While the cut does not fail, it grows by one ring of producers (a
//! fused pattern needs its neighbours), up to `--max-nodes`. The f64 reference then runs the same cut (from the
//! original model) on the same inputs, so the bundle says both that the target fails and whether exact arithmetic
//! on those inputs passes. [`bundle`] writes the files.

pub mod bundle;
mod check;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde::Serialize;

use crate::bisect::park;
use crate::compare::tolerance::Tolerance;
use crate::error::{Error, Result};
use crate::model::cut::Cut;
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::pipeline::{self, CompareSettings};
use crate::report::model::{Basis, Report};
use crate::runner::facts::TargetFacts;
use crate::targets::Target;
use crate::tensor::Tensor;
use check::Ctx;

/// The `phantom-reduce/1` summary written beside the bundle.
pub const SCHEMA: &str = "phantom-reduce/1";

/// What `phantom reduce` was asked.
pub struct ReduceSettings {
    pub compare: CompareSettings,
    /// The node to cut out; the first culprit when absent.
    pub node: Option<String>,
    pub out: PathBuf,
    pub force: bool,
    /// The most nodes of the model (phantom's casts not counted) a cut may grow to.
    pub max_nodes: usize,
}

/// One output of the cut: how the target and the f64 reference fare on it.
#[derive(Clone, Debug, Serialize)]
pub struct OutputCheck {
    /// The cut's output (the name in the model the target runs).
    pub name: String,
    /// The value of the original model it stands for.
    pub value: String,
    /// The tolerance applied (scaled as `phantom onnx` scales it) and the reference's RMS it is relative to.
    pub tolerance: Tolerance,
    pub scale: f64,
    /// The target on the cut against the full model's f64 reference.
    pub target_fails: bool,
    pub target_max_abs: f64,
    pub target_failing: u64,
    /// Elements NaN or infinite on one side only (not in `target_max_abs`, which is over finite differences).
    pub target_nonfinite: u64,
    pub elements: u64,
    /// The f64 reference on the cut (same inputs as the target) against the full model's f64 reference.
    pub reference_passes: bool,
    pub reference_max_abs: f64,
}

/// One size of cut tried.
#[derive(Clone, Debug, Serialize)]
pub struct Attempt {
    /// Model nodes in the cut.
    pub nodes: usize,
    /// Whose values fed it: `reference` or `target`.
    pub fed: String,
    pub reproduced: bool,
    /// The largest share of its tolerance an output used.
    pub tolerance_used: f64,
}

/// What `phantom reduce` did (`reduce.json` in the bundle).
#[derive(Clone, Debug, Serialize)]
pub struct Reduced {
    pub schema: String,
    pub phantom_version: String,
    pub command: Vec<String>,
    pub model: String,
    /// The target, as `phantom onnx` labels it.
    pub target: String,
    /// What ran the cut.
    pub facts: TargetFacts,
    pub node: String,
    pub op_type: String,
    /// Why this node: `--node`, or the full comparison's first culprit / first divergence.
    pub chosen: String,
    /// The cut's nodes, in topological order (names of the model the target runs).
    pub nodes: Vec<String>,
    /// The cut's inputs: (graph input, original value).
    pub inputs: Vec<(String, String)>,
    pub outputs: Vec<OutputCheck>,
    pub attempts: Vec<Attempt>,
    pub reproduced: bool,
    /// `reference`: the cut is fed the f64 reference's values (rounded as the target stores them); `target`: fed
    /// the target's own values, because no cut fed the reference's fails (the node amplifies inherited error).
    pub inputs_from: String,
    pub reference_passes: bool,
}

/// Finds the node, grows the cut until it reproduces, checks it on the reference; the bundle is written by the
/// caller ([`bundle::write`]) from what this returns.
pub fn reduce(s: &ReduceSettings) -> Result<(Reduced, Bundle)> {
    let picked = pick(s)?;
    let mut p = pipeline::prepare(&s.compare)?;
    let target = p.targets[0].as_mut();
    let (parked, scales) = park(&s.compare, &p.graph, &p.inputs, target)?;
    let rounding = target.rounding(&p.graph)?;
    let runs = target
        .own_model()
        .cloned()
        .unwrap_or_else(|| p.graph.clone());
    let start = start_node(&runs, &picked)?;
    let ctx = Ctx {
        inputs: &p.inputs,
        parked: &parked,
        scales: &scales,
        rounding: &rounding,
        settings: s,
    };
    let tried = search(&ctx, target, (&p.graph, &runs), start)?;
    let used: HashMap<String, Tensor> = tried
        .cut
        .feeds
        .iter()
        .zip(&tried.inputs.tensors)
        .map(|(f, (_, t))| (f.base.clone(), t.clone()))
        .collect();
    let checks = ctx.on_reference(
        &p.graph,
        &runs,
        &tried.keep,
        &picked.node,
        tried.checks,
        &used,
    )?;
    let expected = tried
        .cut
        .outputs
        .iter()
        .filter_map(|(n, b)| parked.get(b).map(|t| (n.clone(), t)))
        .collect();
    let found = Found {
        facts: tried.facts,
        checks,
        cut: tried.cut,
        inputs: tried.inputs,
        attempts: tried.attempts,
        from_target: tried.from_target,
    };
    Ok(finish(
        s,
        (picked.node, picked.chosen),
        &runs,
        &tried.keep,
        found,
        expected,
        target,
    ))
}

/// The cut settled on and what the target did with it.
struct Tried {
    keep: HashSet<usize>,
    cut: Cut,
    inputs: Inputs,
    checks: Vec<check::OutputCheckDraft>,
    attempts: Vec<Attempt>,
    facts: TargetFacts,
    from_target: bool,
}

/// Grows the cut from `start` by rings of producers, fed the reference's values, until it fails on the target or
/// reaches `--max-nodes`; then, as a last resort, the node alone fed the target's own values at its boundary.
fn search(
    ctx: &Ctx,
    target: &mut dyn Target,
    (original, runs): (&Graph, &Graph),
    start: usize,
) -> Result<Tried> {
    let mut keep: HashSet<usize> = HashSet::from([start]);
    let mut attempts = vec![];
    loop {
        let c = ctx.cut(runs, &keep, start)?;
        if let Some(more) = ctx.unfed(runs, &c.feeds)? {
            keep.extend(more);
            continue;
        }
        let inputs = ctx.feed(&c.feeds)?;
        let tried = attempt(ctx, target, (keep.clone(), c, inputs), &mut attempts, runs)?;
        let grown = grow(runs, &keep);
        let full = grown.is_empty()
            || model_nodes(runs, &keep) + model_nodes(runs, &grown) > ctx.settings.max_nodes;
        if tried.checks.iter().any(|o| o.target_fails) {
            return Ok(Tried { attempts, ..tried });
        }
        if !full {
            keep.extend(grown);
            continue;
        }
        let alone = HashSet::from([start]);
        let c = ctx.cut(runs, &alone, start)?;
        let Some(inputs) = ctx.target_values(target, original, &c.feeds)? else {
            return Ok(Tried { attempts, ..tried });
        };
        let mut last = attempt(ctx, target, (alone, c, inputs), &mut attempts, runs)?;
        last.from_target = true;
        if let Some(a) = attempts.last_mut() {
            a.fed = "target".into();
        }
        return Ok(Tried { attempts, ..last });
    }
}

/// Runs one cut on the target and judges it; the attempt is recorded.
fn attempt(
    ctx: &Ctx,
    target: &mut dyn Target,
    (keep, cut, inputs): (HashSet<usize>, Cut, Inputs),
    attempts: &mut Vec<Attempt>,
    runs: &Graph,
) -> Result<Tried> {
    let out = target.run_model(&cut.graph, &inputs)?;
    let checks = ctx.judge(&cut, &out.values)?;
    attempts.push(Attempt {
        nodes: model_nodes(runs, &keep),
        fed: "reference".into(),
        reproduced: checks.iter().any(|o| o.target_fails),
        tolerance_used: checks.iter().map(|o| o.tolerance_used).fold(0.0, f64::max),
    });
    Ok(Tried {
        facts: out
            .facts
            .clone()
            .unwrap_or_else(|| target.facts(&cut.graph)),
        keep,
        cut,
        inputs,
        checks,
        attempts: vec![],
        from_target: false,
    })
}

/// The cut that reproduced (or the largest tried), with what was measured on it.
struct Found {
    cut: Cut,
    inputs: Inputs,
    checks: Vec<OutputCheck>,
    attempts: Vec<Attempt>,
    facts: TargetFacts,
    from_target: bool,
}

fn finish(
    s: &ReduceSettings,
    (node, chosen): (String, String),
    runs: &Graph,
    keep: &HashSet<usize>,
    f: Found,
    expected: Vec<(String, Tensor)>,
    target: &dyn Target,
) -> (Reduced, Bundle) {
    let op_type = runs
        .nodes
        .iter()
        .find(|n| n.name == node)
        .map(|n| n.op_type.clone())
        .unwrap_or_default();
    let reduced = Reduced {
        schema: SCHEMA.into(),
        phantom_version: env!("CARGO_PKG_VERSION").into(),
        command: s.compare.command.clone(),
        model: s.compare.model.display().to_string(),
        target: s.compare.target().label(),
        facts: f.facts,
        node,
        op_type,
        chosen,
        nodes: runs
            .nodes
            .iter()
            .filter(|n| keep.contains(&n.index))
            .map(|n| n.name.clone())
            .collect(),
        inputs: f
            .cut
            .feeds
            .iter()
            .map(|x| (x.name.clone(), x.base.clone()))
            .collect(),
        reproduced: f.checks.iter().any(|o| o.target_fails),
        inputs_from: match f.from_target {
            true => "target".into(),
            false => "reference".into(),
        },
        reference_passes: f.checks.iter().all(|o| o.reference_passes),
        outputs: f.checks,
        attempts: f.attempts,
    };
    let bundle = Bundle {
        model: f.cut.graph.bytes.to_vec(),
        inputs: f.inputs.tensors,
        expected,
        runtime: match target.version() {
            v if v.starts_with(&target.name()) => v,
            v => format!("{} {v}", target.name()),
        },
    };
    (reduced, bundle)
}

/// The bundle's contents beyond the summary.
pub struct Bundle {
    pub model: Vec<u8>,
    pub inputs: Vec<(String, Tensor)>,
    /// Expected outputs: the full model's f64 reference values, by the cut's output names.
    pub expected: Vec<(String, Tensor)>,
    /// The target's engine version and provider settings for the script.
    pub runtime: String,
}

/// The node to cut out, and the value it failed on (absent with `--node`).
struct Picked {
    node: String,
    value: Option<String>,
    chosen: String,
}

/// The node asked for, or the full comparison's first culprit (else its first divergence).
fn pick(s: &ReduceSettings) -> Result<Picked> {
    if let Some(n) = &s.node {
        return Ok(Picked {
            node: n.clone(),
            value: None,
            chosen: "named with --node".into(),
        });
    }
    let (report, _) = pipeline::compare(&s.compare)?;
    culprit_of(&report).ok_or_else(|| {
        Error::Usage(format!(
            "{}: nothing fails on {} (no culprit where the target fails, no value out of tolerance; culprits of \
             basis `ideal` are where a correctly rounded run of its precision would fail): nothing to reduce; name \
             a node with --node to cut it out anyway",
            s.compare.model.display(),
            s.compare.target().label()
        ))
    })
}

/// The first culprit where the target itself fails (a culprit of basis `ideal` is where a correctly rounded run
/// of the target's precision would fail, which this target may pass), else the first divergence, else the first
/// failing value its precision explains.
fn culprit_of(r: &Report) -> Option<Picked> {
    let v = &r.verdict;
    if let Some(c) = (v.culprits.iter()).find(|c| !matches!(c.basis, Basis::Ideal | Basis::Origin))
    {
        let status = serde_json::to_value(v.status).ok();
        let chosen = format!(
            "the first culprit of the full comparison (node #{} {}, verdict {})",
            c.node_index,
            c.op_type,
            status.as_ref().and_then(|v| v.as_str()).unwrap_or_default()
        );
        return Some(Picked {
            node: c.node.clone(),
            value: Some(c.value.clone()),
            chosen,
        });
    }
    let (f, what) = match (&v.first_divergence, v.precision_limited.first()) {
        (Some(f), _) => (f, "the first divergence"),
        (None, Some(f)) => (f, "the first value out of tolerance (precision-limited)"),
        (None, None) => return None,
    };
    Some(Picked {
        node: f.node.clone(),
        value: Some(f.value.clone()),
        chosen: format!(
            "{what} of the full comparison (node #{} {}; no culprit where the target itself fails)",
            f.node_index, f.op_type
        ),
    })
}

/// The node of the model the target runs that computes the failing value: the node of the same name when it
/// computes that value (or a low-precision copy of it), else the value's producer (a `--target-model` may compute
/// it elsewhere).
fn start_node(runs: &Graph, p: &Picked) -> Result<usize> {
    let named = runs.nodes.iter().find(|n| n.name == p.node);
    let computes = |n: &crate::model::Node, v: &str| n.outputs.iter().any(|o| runner_base(o) == v);
    match (&p.value, named) {
        (None, Some(n)) => Ok(n.index),
        (Some(v), Some(n)) if computes(n, v) => Ok(n.index),
        (Some(v), _) => runs
            .nodes
            .iter()
            .find(|n| n.outputs.iter().any(|o| o == v))
            .map(|n| n.index)
            .ok_or_else(|| {
                Error::Usage(format!("the model the target runs does not compute `{v}`"))
            }),
        (None, None) => Err(Error::Usage(format!(
            "the model the target runs has no node `{}` (see `phantom info`)",
            p.node
        ))),
    }
}

fn runner_base(name: &str) -> &str {
    crate::model::surgery::base_name(name)
}

/// Nodes of the model in `set` (phantom's own casts not counted).
fn model_nodes(g: &Graph, set: &HashSet<usize>) -> usize {
    g.nodes
        .iter()
        .filter(|n| set.contains(&n.index) && !n.name.starts_with("phantom_cast"))
        .count()
}

/// The producers of the values `keep` reads from outside (one ring upstream).
fn grow(g: &Graph, keep: &HashSet<usize>) -> HashSet<usize> {
    let producers = g.producers();
    g.nodes
        .iter()
        .filter(|n| keep.contains(&n.index))
        .flat_map(|n| n.inputs.iter())
        .filter_map(|v| producers.get(v.as_str()).copied())
        .filter(|i| !keep.contains(i))
        .collect()
}
