//! The `phantom onnx` pipeline as stages, each a function of a page:
//!
//! ```text
//! prepare ─► capture ─► expected noise ─► stream-compare ─► attribute ─► explain ─► assemble
//! (model,    (target,    (reference        (reference f64,    (each node   (culprits,   (Report)
//!  inputs,    per         rerun with        compared value     alone on     causes,
//!  target)    strategy)   target rounding)  by value)          the target)  fusion)
//! ```
//!
//! Every target asked for is a [`Lane`] through these stages: the reference runs once, each value is compared with
//! every target's as it arrives (and, with several targets, the targets with each other), then each lane is
//! attributed, explained and assembled into its own [`Report`]; [`compare_targets`] adds their agreement.
//!
//! A stage reads a lane and returns what it found, with what it says beside it ([`degrade::Said`]: notes, and the
//! figures it could not measure); the lane takes those results in `lane.rs`. Only the orchestration (this module,
//! the comparison's passes and the lane's own methods) holds a lane mutably, which a house test keeps true.
//!
//! Bounded memory is a capture strategy ([`Strategy::Bounded`]): the target runs chunk by chunk inside the
//! stream-compare stage. Bisection reuses [`prepare`].

mod ahead;
mod alone;
mod assemble;
mod chunked;
mod clock;
pub mod decisions;
pub mod degrade;
pub mod dump;
mod explain;
mod hold;
mod lane;
mod memory;
pub mod noise;
mod paired;
mod parts;
mod passes;
mod prepare;
mod reasons;
mod samples;
mod settings;
mod shapes;
mod steps;
mod stream;
mod variation;

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::analysis::agreement;
use crate::error::{Error, Result};
use crate::model::{self, inputs::Inputs, Graph};
use crate::report::model::multi::{MultiReport, PairValue};
use crate::report::model::{Report, ValueReport, ValueStatus};
use crate::runner::ort_lib::Located;
use crate::targets::{self, Target};
use crate::tensor::Tensor;

pub use assemble::summary as model_summary;
pub use lane::Lane;
pub use memory::weights_fit;
pub use parts::environment;
use parts::ms;
pub use prepare::{checked_inputs, logged, prepared_graph, prepared_inputs, prepared_model};
pub use samples::compare_samples;
pub use settings::{CompareSettings, RuntimeSpec, Strategy};
pub use steps::compare_steps;

/// Heatmaps kept per report: those of the values using most of their tolerance (a few kilobytes each).
pub const MAX_HEATMAPS: usize = 200;

/// The model, its inputs, ONNX Runtime and the opened targets (in the order of `CompareSettings::targets`).
pub struct Prepared {
    pub graph: Graph,
    pub inputs: Inputs,
    /// Inputs for the target where they differ from the reference's (`--steps`: each side's own KV cache).
    pub target_inputs: Option<Inputs>,
    /// Inputs for the expected-noise run where they differ from the reference's (a segment: the noise run's own
    /// boundary values).
    pub noise_inputs: Option<Inputs>,
    /// Values computed upstream of a segment and embedded in its cut as constants: recorded as operand scales, as
    /// a whole run records them when it computes them.
    pub upstream: Vec<(String, Tensor)>,
    pub lib: Located,
    pub targets: Vec<Box<dyn Target>>,
    pub import_ms: f64,
    /// Per target (in order), what pairing its own model by value found ([`paired`]).
    pub paired: Vec<Option<paired::Paired>>,
    /// Bytes in f64 of each value tract sized from the inputs' shapes (when the memory budget was decided from
    /// them): the bounded run's batches reuse them instead of typing the model again.
    pub sizes: Option<HashMap<String, u64>>,
}

/// Value reports by name.
pub type Reports = HashMap<String, ValueReport>;

/// Every lane's report, the target-vs-target comparisons, and the inputs they ran on.
struct Finished {
    reports: Vec<Report>,
    pairs: Vec<PairValue>,
    inputs: Inputs,
    /// The graph outputs of the reference and of the (first) target (`--steps` only).
    ref_outputs: HashMap<String, Tensor>,
    target_outputs: HashMap<String, Tensor>,
}

/// Runs the comparison of the one target and builds its report.
pub fn compare(s: &CompareSettings) -> Result<(Report, Inputs)> {
    if s.targets.len() != 1 {
        return Err(Error::Usage(format!(
            "this command compares one target; {} were asked for",
            s.targets.len()
        )));
    }
    let mut f = run(s)?;
    Ok((f.reports.remove(0), f.inputs))
}

/// Runs the comparison of every target against the one reference run and with each other.
pub fn compare_targets(s: &CompareSettings) -> Result<(MultiReport, Inputs)> {
    let f = run(s)?;
    let agreement = agreement::agreement(&f.reports, &f.pairs);
    Ok((
        MultiReport::new(s.command.clone(), f.reports, agreement),
        f.inputs,
    ))
}

/// The comparison of the one target on an already prepared model and inputs (a segment of a plan), with every
/// value held. A segment may compare nothing (it holds only values no runtime agrees on, such as a ZipMap's map):
/// `merge` judges the segments together.
pub fn compare_prepared(s: &CompareSettings, p: &mut Prepared) -> Result<Report> {
    let f = stages(s, p, Instant::now(), false)?;
    f.reports
        .into_iter()
        .next()
        .ok_or_else(|| Error::Usage("no target to compare".into()))
}

/// The stages, for every lane.
fn run(s: &CompareSettings) -> Result<Finished> {
    let t_all = Instant::now();
    let mut p = prepare(s)?;
    let t = Instant::now();
    let resolved = memory::resolve(s, &mut p);
    p.import_ms += ms(t);
    let s = &resolved;
    let summaries = p.inputs.summaries.clone();
    let f = stages(s, &mut p, t_all, true).map_err(|e| shapes::with_dims_hint(e, &summaries))?;
    compared_something(s, &f)?;
    Ok(f)
}

/// A comparison that compared no element is an error, not a clean verdict that would pass any CI gate; values that
/// are empty on both sides (a zero-length split, a crop to nothing) were compared all the same (their shapes agree),
/// and so were string values (compared by equality, without numeric metrics).
fn compared_something(s: &CompareSettings, f: &Finished) -> Result<()> {
    let values: Vec<_> = (f.reports.iter()).flat_map(|r| r.values()).collect();
    let elements: u64 = (values.iter())
        .filter_map(|(_, v)| v.metrics.as_ref())
        .map(|m| m.elements)
        .sum();
    let compared = (values.iter()).any(|(_, v)| v.status != ValueStatus::Unchecked);
    if elements > 0 || (s.slice.is_none() && compared) {
        return Ok(());
    }
    let why = match &s.slice {
        Some(sp) => format!("--slice {} selects no element of any value", sp.source()),
        None => format!(
            "no value could be compared on both sides ({})",
            leading_reasons(f)
        ),
    };
    Err(Error::Usage(format!(
        "nothing was compared: {why}; phantom gives no verdict on nothing"
    )))
}

/// The first few distinct reasons values were left unchecked, with the node that gave each.
fn leading_reasons(f: &Finished) -> String {
    let mut seen: Vec<String> = vec![];
    for (node, v) in f.reports.iter().flat_map(|r| r.values()) {
        let Some(why) = v.reason.as_deref() else {
            continue;
        };
        if seen.len() < 3 && !seen.iter().any(|s| s.ends_with(why)) {
            seen.push(format!("{} `{}`: {why}", node.op_type, node.name));
        }
    }
    match seen.is_empty() {
        true => "no value had both sides".into(),
        false => seen.join("; "),
    }
}

/// Plans which nodes each lane runs alone, and runs the reference again to hold the values those nodes read and
/// write (every value when a lane runs every node); nothing when no lane needs any. A failed run leaves them unheld:
/// the nodes are then marked not measured. Returns the time it took.
fn hold_what_is_needed(
    s: &CompareSettings,
    p: &Prepared,
    lanes: &mut [Lane],
    cmp: &mut stream::Compared,
) -> f64 {
    let t = Instant::now();
    let mut union: Option<HashSet<String>> = Some(HashSet::new());
    for lane in lanes.iter_mut().filter(|l| l.rounding.is_some()) {
        let (alone, scope) = alone::plan(s, p, cmp, lane);
        union = match (union, alone::reads(p, alone.as_ref())) {
            (Some(mut u), Some(r)) => {
                u.extend(r);
                Some(u)
            }
            _ => None,
        };
        (lane.attribution.alone, lane.attribution.scope) = (alone, Some(scope));
    }
    if union.as_ref().is_some_and(HashSet::is_empty) {
        return 0.0;
    }
    let held = degrade::injected("hold").and_then(|_| hold::hold(s, p, cmp, union.as_ref()));
    let note = match held {
        Ok(did) => did,
        Err(e) => {
            // Values kept from the comparison alone would measure some nodes and not others: none is.
            cmp.held = Default::default();
            format!("the reference's second run, for the values attribution reads, failed: {e}")
        }
    };
    for lane in lanes.iter_mut() {
        lane.said.notes.push(note.clone());
    }
    ms(t)
}

/// Capture, expected noise, stream-compare, then per lane attribute, explain and assemble.
/// The targets go back into `p` afterwards, so the stages can run again (`--steps`).
/// `defer`: the comparison may run a first pass without the expected noise ([`noise::deferred`]).
fn stages(s: &CompareSettings, p: &mut Prepared, t_all: Instant, defer: bool) -> Result<Finished> {
    let attribution = s.attribution;
    let mut lanes = lane::capture(s, p, attribution)?;
    let t = Instant::now();
    let adopt = match (lanes.as_mut_slice(), s.budget()) {
        ([lane], budget) => {
            if let Some(budget) = budget {
                lane.stand_ins(p, budget);
            }
            lane.gather(s, p)
        }
        _ => None,
    };
    if let Some(lane) = lanes.first_mut() {
        // Bounded runs fetch the target's decisions in runs of their own: the target's time.
        lane.ms += ms(t);
    }
    if let Some(g) = &adopt {
        for lane in lanes.iter_mut() {
            lane.adoption = decisions::Adoption::of(g);
        }
    }
    if let [lane] = lanes.as_mut_slice() {
        lane.noise.deferred = noise::deferred(s, p, lane, defer);
    }
    if !lanes.iter().any(|l| l.noise.deferred) {
        passes::expected_noise(s, p, &mut lanes);
    }
    let (mut cmp, again) = passes::compare_once_or_twice(s, p, &mut lanes)?;
    // A first pass that failed may have run again bounded: the stages after it follow.
    let s = again.as_ref().unwrap_or(s);
    for lane in lanes.iter_mut() {
        lane.settle_noise();
        lane.adopted(p, &cmp.reference.adopted);
        lane.judge_variation(s, p);
    }
    let held_ms = match attribution && !s.attribute_all {
        true => hold_what_is_needed(s, p, &mut lanes, &mut cmp),
        false => {
            for lane in lanes.iter_mut().filter(|l| l.rounding.is_some()) {
                lane.attribution.scope = Some(alone::plan(s, p, &cmp, lane).1);
            }
            0.0
        }
    };
    let mut reports = vec![];
    let mut target_outputs = HashMap::new();
    for (k, mut lane) in lanes.into_iter().enumerate() {
        // The reference's second run, when one was needed, counts as attribution (of the first target).
        lane.attribute(s, p, &cmp, if k == 0 { held_ms } else { 0.0 });
        let t_explain = Instant::now();
        let found = lane.explain(s, p, &cmp)?;
        reports.push(assemble::report(
            s,
            p,
            &lane,
            &cmp,
            found,
            (t_explain, t_all),
        ));
        if s.steps > 1 && target_outputs.is_empty() {
            for o in &p.graph.outputs {
                if let Some(v) = lane.out.values.remove(&o.name) {
                    target_outputs.insert(o.name.clone(), v);
                }
            }
        }
        p.targets.push(lane.target);
    }
    Ok(Finished {
        reports,
        pairs: std::mem::take(&mut cmp.pairs),
        inputs: p.inputs.clone(),
        ref_outputs: std::mem::take(&mut cmp.outputs),
        target_outputs,
    })
}

/// Loads the model, makes the inputs, finds ONNX Runtime and opens the targets (converting the model where asked).
pub fn prepare(s: &CompareSettings) -> Result<Prepared> {
    let t = Instant::now();
    crate::runner::ort_lib::probe_ahead(s.runtime.ort_lib.as_deref());
    let graph = model::load(&s.model)?;
    memory::weights_fit(&graph)?;
    let (inputs, lib) = prepared_inputs(&graph, s)?;
    let graph = prepared_graph(graph, &inputs, s.inputs.seed, s.keep_control_flow)?;
    logged("compare", &graph, &inputs);
    let mut targets = s
        .targets
        .iter()
        .map(|spec| {
            crate::watchdog::stage(&format!("opening the target {}", spec.label()));
            targets::open(spec, &graph, &lib)
        })
        .collect::<Result<Vec<_>>>()?;
    let paired = (targets.iter_mut())
        .map(|t| paired::pair(s, t.as_mut(), &graph, &inputs))
        .collect();
    if let Some(path) = &s.save_target_model {
        let own = targets[0].own_model().ok_or_else(|| {
            Error::Usage(
                "--save-target-model: this target runs MODEL itself; there is no converted model to save".into(),
            )
        })?;
        crate::model::external::save(&own.bytes, &own.path, path)?;
    }
    Ok(Prepared {
        graph,
        inputs,
        target_inputs: None,
        noise_inputs: None,
        upstream: vec![],
        lib,
        targets,
        paired,
        import_ms: ms(t),
        sizes: None,
    })
}
