//! `phantom reduce`: the smallest subgraph that reproduces a culprit, as a bundle an upstream project can run.
//!
//! The node is the first culprit of a full comparison (or `--node`). phantom cuts it out of the model the target
//! runs (the converted or `--target-model` one), feeds it the f64 reference's values stored as the target stores
//! them, and runs the cut on the same target. While the cut does not fail, it grows by one ring of producers (a
//! fused pattern needs its neighbours), up to `--max-nodes`. The f64 reference then runs the same cut (from the
//! original model) on the same inputs, so the bundle says both that the target fails and whether exact arithmetic
//! on those inputs passes. [`bundle`] writes the files.

pub mod bundle;
pub mod extract;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde::Serialize;

use crate::analysis::compare_pair;
use crate::bisect::{park, Parked};
use crate::compare::tolerance::Tolerance;
use crate::compare::Scales;
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::pipeline::{self, CompareSettings};
use crate::report::model::{Report, ValueStatus};
use crate::runner::facts::TargetFacts;
use crate::runner::reference::{ReferenceRunner, Rounding};
use crate::runner::Runner;
use crate::target::Target;
use crate::tensor::Tensor;
use extract::{cut, Boundary, Cut, Feed};

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
    pub reference_passes: bool,
}

/// Finds the node, grows the cut until it reproduces, checks it on the reference; the bundle is written by the
/// caller ([`bundle::write`]) from what this returns.
pub fn reduce(s: &ReduceSettings) -> Result<(Reduced, Bundle)> {
    let picked = pick(s)?;
    let mut p = pipeline::prepare(&s.compare)?;
    let target = p.targets[0].as_mut();
    let (parked, scales) = park(&s.compare, &p.graph, &p.inputs)?;
    let rounding = target.rounding(&p.graph)?;
    let runs = target
        .own_model()
        .cloned()
        .unwrap_or_else(|| p.graph.clone());
    let start = start_node(&runs, &picked)?;
    let node = picked.node.clone();
    let chosen = picked.chosen;
    let ctx = Ctx {
        inputs: &p.inputs,
        parked: &parked,
        scales: &scales,
        rounding: &rounding,
        settings: s,
    };
    let mut keep: HashSet<usize> = HashSet::from([start]);
    let mut attempts = vec![];
    loop {
        let c = ctx.cut(&runs, &keep, start)?;
        if let Some(more) = ctx.unfed(&runs, &c.feeds)? {
            keep.extend(more);
            continue;
        }
        let inputs = ctx.feed(&c.feeds)?;
        let out = target.run_model(&c.graph, &inputs)?;
        let checks = ctx.judge(&c, &out.values)?;
        let reproduced = checks.iter().any(|o| o.target_fails);
        attempts.push(Attempt {
            nodes: model_nodes(&runs, &keep),
            reproduced,
            tolerance_used: checks.iter().map(|o| o.tolerance_used).fold(0.0, f64::max),
        });
        let grown = grow(&runs, &keep);
        if reproduced
            || grown.is_empty()
            || model_nodes(&runs, &keep) + model_nodes(&runs, &grown) > s.max_nodes
        {
            let found = Found {
                facts: out.facts.clone().unwrap_or_else(|| target.facts(&c.graph)),
                checks: ctx.on_reference(&p.graph, &runs, &keep, &node, checks)?,
                cut: c,
                inputs,
                attempts,
            };
            let expected = found
                .cut
                .outputs
                .iter()
                .filter_map(|(n, b)| parked.get(b).map(|t| (n.clone(), t)))
                .collect();
            return Ok(finish(
                s,
                (node, chosen),
                &runs,
                &keep,
                found,
                expected,
                target,
            ));
        }
        keep.extend(grown);
    }
}

/// The cut that reproduced (or the largest tried), with what was measured on it.
struct Found {
    cut: Cut,
    inputs: Inputs,
    checks: Vec<OutputCheck>,
    attempts: Vec<Attempt>,
    facts: TargetFacts,
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
            "{}: the run is clean on {} (no culprit, no divergence): nothing to reduce; name a node with --node to \
             cut it out anyway",
            s.compare.model.display(),
            s.compare.target().label()
        ))
    })
}

fn culprit_of(r: &Report) -> Option<Picked> {
    if let Some(c) = r.verdict.culprits.first() {
        let status = serde_json::to_value(r.verdict.status).ok();
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
    r.verdict.first_divergence.as_ref().map(|f| Picked {
        node: f.node.clone(),
        value: Some(f.value.clone()),
        chosen: format!(
            "the first divergence of the full comparison (node #{} {}; no culprit was named)",
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
    crate::runner::isolate::base_name(name)
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

/// Values of `g` that the input shapes alone fix: computed from initializers, constants and `Shape`/`Size` of
/// the data, never from its values. A cut embeds them as initializers (tract needs a Resize's scales or a
/// Reshape's shape as constants); they are exact for the shapes this run used.
fn shape_fixed(g: &Graph) -> HashSet<String> {
    let mut data: HashSet<&str> = g.inputs.iter().map(|i| i.name.as_str()).collect();
    let mut fixed = HashSet::new();
    for n in &g.nodes {
        let reads_data = !matches!(n.op_type.as_str(), "Shape" | "Size")
            && n.inputs.iter().any(|i| data.contains(i.as_str()));
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            match reads_data {
                true => data.insert(o.as_str()),
                false => fixed.insert(o.clone()),
            };
        }
    }
    fixed
}

/// The reference's values and the target's storage types: what feeds and judges a cut.
struct Ctx<'a> {
    /// The model's inputs (the reference parks computed values only).
    inputs: &'a Inputs,
    parked: &'a Parked,
    scales: &'a Scales,
    rounding: &'a Rounding,
    settings: &'a ReduceSettings,
}

impl Ctx<'_> {
    /// Cuts `keep` out of `g`, exposing the outputs of node `expose`; a boundary value the reference lacks pulls
    /// its producer in.
    fn cut(&self, g: &Graph, keep: &HashSet<usize>, expose: usize) -> Result<Cut> {
        let fixed = shape_fixed(g);
        let shape_of = |base: &str| self.value(base).map(|t| t.shape().to_vec());
        let embed = |f: &Feed| match fixed.contains(&f.name) {
            true => self.stored(f).map(Some),
            false => Ok(None),
        };
        let boundary = Boundary {
            shape_of: &shape_of,
            embed: &embed,
        };
        let path = self.settings.out.join("model.onnx");
        cut(g, keep, &HashSet::from([expose]), &boundary, &path)
    }

    /// The producers of the cut's inputs the reference has no value for (a value only the target model has); an
    /// error when such an input has no producer.
    fn unfed(&self, g: &Graph, feeds: &[Feed]) -> Result<Option<HashSet<usize>>> {
        let producers = g.producers();
        let mut more = HashSet::new();
        for f in feeds.iter().filter(|f| self.value(&f.base).is_none()) {
            let p = producers.get(f.name.as_str()).ok_or_else(|| {
                Error::Usage(format!(
                    "the reference has no value for `{}`, which the cut reads, and nothing computes it",
                    f.base
                ))
            })?;
            more.insert(*p);
        }
        Ok((!more.is_empty()).then_some(more))
    }

    /// The reference's value of `name`: a model input, or a value it computed.
    fn value(&self, name: &str) -> Option<Tensor> {
        let input = self.inputs.tensors.iter().find(|(n, _)| n == name);
        input
            .map(|(_, t)| t.clone())
            .or_else(|| self.parked.get(name))
    }

    /// The cut's inputs: each reference value rounded to the type the target stores it in, then typed as read.
    fn feed(&self, feeds: &[Feed]) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        for f in feeds {
            inputs.tensors.push((f.name.clone(), self.stored(f)?));
        }
        Ok(inputs)
    }

    /// The reference's value of a boundary value, rounded to the type the target stores it in, typed as read.
    fn stored(&self, f: &Feed) -> Result<Tensor> {
        let r = self.value(&f.base).ok_or_else(|| {
            Error::Usage(format!(
                "the reference has no value for `{}`, which the cut reads; name a later node with --node",
                f.base
            ))
        })?;
        let stored = match self.rounding.get(&f.base) {
            Some(&d) if f.dtype.is_float() => r.cast(d).expect("float casts"),
            _ => r,
        };
        stored.cast(f.dtype).ok_or_else(|| Error::Target {
            reason: format!("reduce: cannot feed `{}` as {}", f.base, f.dtype),
        })
    }

    /// Each output of the cut against the full model's reference value.
    fn judge(&self, c: &Cut, got: &HashMap<String, Tensor>) -> Result<Vec<OutputCheckDraft>> {
        let mut out = vec![];
        for (name, base) in &c.outputs {
            let Some(r) = self.parked.get(base) else {
                continue;
            };
            let t = got.get(name).ok_or_else(|| Error::Target {
                reason: format!("reduce: the target did not produce `{name}` from the cut"),
            })?;
            let v = compare_pair(
                base,
                Ok(&r),
                Ok(t),
                &self.settings.compare.tolerance,
                self.scales.operands(base),
                false,
                false,
            );
            let m = v.metrics.clone().ok_or_else(|| Error::Target {
                reason: format!(
                    "reduce: `{name}` could not be compared: {}",
                    v.reason.clone().unwrap_or_default()
                ),
            })?;
            out.push(OutputCheckDraft {
                name: name.clone(),
                value: base.clone(),
                tolerance: v.tolerance.unwrap_or(Tolerance {
                    atol: 0.0,
                    rtol: 0.0,
                }),
                scale: m.scale,
                target_fails: v.status == ValueStatus::Fail,
                target_max_abs: m.max_abs,
                target_failing: m.failed,
                target_nonfinite: m.nonfinite_mismatch,
                elements: m.elements,
                tolerance_used: m.tolerance_used,
            });
        }
        Ok(out)
    }

    /// The same cut taken from the original model, run by the f64 reference on the same (rounded) inputs.
    fn on_reference(
        &self,
        original: &Graph,
        runs: &Graph,
        keep: &HashSet<usize>,
        node: &str,
        drafts: Vec<OutputCheckDraft>,
    ) -> Result<Vec<OutputCheck>> {
        let names: HashSet<&str> = runs
            .nodes
            .iter()
            .filter(|n| keep.contains(&n.index))
            .map(|n| n.name.as_str())
            .collect();
        let keep_o: HashSet<usize> = original
            .nodes
            .iter()
            .filter(|n| names.contains(n.name.as_str()))
            .map(|n| n.index)
            .collect();
        let expose = original
            .nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| n.index);
        let (Some(expose), false) = (expose, keep_o.is_empty()) else {
            return Err(Error::Usage(format!(
                "the original model has no node `{node}` to check on the reference"
            )));
        };
        let c = self.cut(original, &keep_o, expose)?;
        let inputs = self.feed(&c.feeds)?;
        let got = ReferenceRunner::default().run(&c.graph, &inputs)?.values;
        let by_value: HashMap<&str, &Tensor> = c
            .outputs
            .iter()
            .filter_map(|(n, b)| got.get(n).map(|t| (b.as_str(), t)))
            .collect();
        let mut out = vec![];
        for d in drafts {
            let (passes, max_abs) =
                match (by_value.get(d.value.as_str()), self.parked.get(&d.value)) {
                    (Some(t), Some(r)) => within(&d, &r, t),
                    _ => (false, f64::NAN),
                };
            out.push(d.finish(passes, max_abs));
        }
        Ok(out)
    }
}

/// Whether `t` is within the tolerance the target was judged by (same scale), and the largest |t − r|.
fn within(d: &OutputCheckDraft, r: &Tensor, t: &Tensor) -> (bool, f64) {
    let (r, t) = (r.to_f64_array(), t.to_f64_array());
    if r.shape() != t.shape() {
        return (false, f64::NAN);
    }
    let mut max_abs = 0.0f64;
    let mut ok = true;
    for (&a, &b) in r.iter().zip(t.iter()) {
        ok &= d.tolerance.accepts(a, b, d.scale);
        max_abs = max_abs.max((a - b).abs());
    }
    (ok, max_abs)
}

/// An output check before the reference has run the cut.
struct OutputCheckDraft {
    name: String,
    value: String,
    tolerance: Tolerance,
    scale: f64,
    target_fails: bool,
    target_max_abs: f64,
    target_failing: u64,
    target_nonfinite: u64,
    elements: u64,
    tolerance_used: f64,
}

impl OutputCheckDraft {
    fn finish(self, reference_passes: bool, reference_max_abs: f64) -> OutputCheck {
        OutputCheck {
            name: self.name,
            value: self.value,
            tolerance: self.tolerance,
            scale: self.scale,
            target_fails: self.target_fails,
            target_max_abs: self.target_max_abs,
            target_failing: self.target_failing,
            target_nonfinite: self.target_nonfinite,
            elements: self.elements,
            reference_passes,
            reference_max_abs,
        }
    }
}
