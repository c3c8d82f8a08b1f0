//! The stream-compare stage: the f64 reference runs once and hands over each value as it is computed; it is
//! compared with the target's (held from the capture, or exposed chunk by chunk in bounded mode) and dropped, so
//! only one side is ever held whole.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use super::clock::OpClock;
use super::decisions::Adoption;
use super::hold::{held_store, keeps_from_drift};
use super::noise::Noise;
use super::paired::Paired;
use super::parts::stage;
use super::{CompareSettings, Prepared, Reports};
use crate::analysis::agreement;
use crate::analysis::{self, attribution, culprit};
use crate::compare::{Scales, Scaling};
use crate::error::{Error, Result};
use crate::report::model::multi::PairValue;
use crate::report::model::{OpTiming, ValueReport};
use crate::runner::reference::{ReferenceRunner, Rounding};
use crate::runner::RunOutput;
use crate::spill::Held;
use crate::targets::{Target, TargetSpec};
use crate::tensor::Tensor;

/// What the stage produced besides each lane's value reports.
pub struct Compared {
    /// Reference values kept for attribution and causes (with attribution on): in memory, or on disk when bounded.
    pub held: Held,
    /// The reference's run: precision per node, missing values, notes (values were streamed, not kept).
    pub reference: RunOutput,
    /// Time spent comparing (inside the reference's run).
    pub compare_time: Duration,
    /// The reference's time without the comparisons.
    pub reference_ms: f64,
    /// The reference ran on its own thread, ahead of the comparison ([`super::ahead`]).
    pub reference_ahead: bool,
    /// The reference and the comparisons by op type (streamed runs only).
    pub by_op: BTreeMap<String, OpTiming>,
    /// Target-vs-target comparisons of every value (several targets only).
    pub pairs: Vec<PairValue>,
    /// The reference's RMS per value, to scale the default atol of the values computed from them.
    pub scales: Scales,
    /// The reference's graph outputs (`--steps`: the next step's cache and token come from them).
    pub outputs: HashMap<String, Tensor>,
    /// What the reference ran with (the target's decisions it adopts, the facts it stands in with): a second run
    /// ([`super::hold::hold`]) must compute the same values.
    pub(super) runner: ReferenceRunner,
}

/// What the stream-compare stage reads of one lane, and what it drains: the target's captured values and its
/// expected noise are taken as each value is compared, and a bounded run's chunks run on the target
/// ([`super::Lane::side`]). `found`: what the stage found of it so far.
pub struct Side<'a> {
    pub spec: &'a TargetSpec,
    pub target: &'a mut dyn Target,
    pub out: &'a mut RunOutput,
    pub rounding: Option<&'a Rounding>,
    pub noise: &'a mut Noise,
    pub paired: &'a Paired,
    pub adoption: &'a Adoption,
    pub found: Streamed,
}

/// What the stage found of one lane: its value reports, and what it says of the run.
#[derive(Default)]
pub struct Streamed {
    pub reports: Reports,
    pub notes: Vec<String>,
}

/// Compares every reference value with each target's (and the targets' with each other) as the reference computes
/// it; bounded memory (one target) exposes the target's values chunk by chunk instead. Returns what it found of
/// each lane, in order.
pub fn compare(
    s: &CompareSettings,
    p: &mut Prepared,
    mut sides: Vec<Side<'_>>,
    keep: bool,
) -> Result<(Compared, Vec<Streamed>)> {
    let lanes = sides.as_mut_slice();
    refused(s, lanes)?;
    let t = Instant::now();
    let msg = format!(
        "reference: tract f64 on {} nodes, comparing as values arrive",
        p.graph.nodes.len()
    );
    let pb = stage(s.progress, &msg);
    // Every value kept as it arrives when every node is to run alone, else from the first that fails on.
    let from_drift = from_drift(s, lanes);
    let mut held = held_store(p, keep || from_drift, s.budget().is_some())?;
    let mut drifting = false;
    let mut pairs = vec![];
    let mut scales = input_scales(p);
    let mut compare_time = Duration::ZERO;
    let mut clock = OpClock::new(&p.graph);
    let mut kept_outputs: HashMap<String, Tensor> = HashMap::new();
    let mut dump = open_dump(s)?;
    let arriving = super::noise::arriving(lanes);
    let runner = reference_runner(&p.graph, lanes);
    let again = runner();
    let reference = match (s.budget(), lanes) {
        (Some(budget), [lane]) => {
            let keep = (keep || from_drift).then_some((&mut held, keep));
            let scales = &mut scales;
            let reference = (runner(), arriving.as_ref());
            super::chunked::bounded(
                s,
                p,
                lane,
                (budget, keep, scales),
                (reference, &mut compare_time, &mut clock),
            )?
        }
        (_, lanes) => {
            let outputs: HashSet<&str> = p.graph.outputs.iter().map(|o| o.name.as_str()).collect();
            let clock = &mut clock;
            let feedback = lanes.iter().any(|l| l.adoption.measured.is_some());
            let reference = (&mut runner(), arriving.as_ref());
            let mut abandoned = false;
            streamed(
                p,
                reference,
                (s.bounded_after_failure, feedback),
                &mut |name, value, spent| {
                    let c = clock.arrived(name, spent);
                    if abandoned {
                        return clock.compared(name, c, false);
                    }
                    measure(lanes, name, &value);
                    if let Some(d) = dump.as_mut() {
                        dump_value(d, name, &value, lanes);
                    }
                    let scaling = scales.scaling(name);
                    pairs.extend(pair_up(s, name, lanes, scaling));
                    abandoned =
                        judge_all(s, (name, &value), lanes, (&scales, outputs.contains(name)));
                    if let Ok(v) = &value {
                        rescale(s, name, v, lanes, &mut scales);
                        if s.steps > 1 && outputs.contains(name) {
                            kept_outputs.insert(name.to_string(), v.clone());
                        }
                    }
                    drifting |= from_drift && sought(lanes, name);
                    if let (true, Ok(r), Held::Memory(m)) = (keep || drifting, value, &mut held) {
                        m.insert(name.to_string(), r);
                    }
                    compare_time += c.elapsed();
                    clock.compared(name, c, true);
                },
            )?
        }
    };
    pb.finish_and_clear();
    if let Some(d) = dump {
        d.finish()?;
    }
    let compared = Compared {
        held,
        reference,
        compare_time,
        reference_ms: clock.reference_ms(t, compare_time),
        reference_ahead: clock.ahead,
        by_op: clock.by_op,
        pairs,
        scales,
        outputs: kept_outputs,
        runner: again,
    };
    Ok((compared, sides.into_iter().map(|l| l.found).collect()))
}

/// Whether the comparison keeps the reference's values from the first that fails on ([`keeps_from_drift`]); a
/// first pass without the expected noise keeps nothing: a failure runs the comparison again.
fn from_drift(s: &CompareSettings, lanes: &[Side]) -> bool {
    let rounds = lanes.iter().any(|l| l.rounding.is_some());
    keeps_from_drift(s, rounds) && !lanes.iter().any(|l| l.noise.deferred)
}

/// Whether a lane's value `name` is one culprits are sought from ([`culprit::sought`]).
fn sought(lanes: &[Side], name: &str) -> bool {
    (lanes.iter()).any(|l| l.found.reports.get(name).is_some_and(culprit::sought))
}

/// `--dump DIR`'s folder, made (or replaced with `--force`) before the run.
fn open_dump(s: &CompareSettings) -> Result<Option<super::dump::Dump>> {
    let dump = s.dump.as_ref();
    dump.map(|(dir, force)| super::dump::Dump::create(dir, *force))
        .transpose()
}

/// The scales of the model's inputs and of the values computed upstream of a segment, recorded before any value
/// arrives.
fn input_scales(p: &Prepared) -> Scales {
    let mut scales = Scales::new(&p.graph);
    for (n, t) in p.inputs.tensors.iter().chain(&p.upstream) {
        scales.record(n, t);
    }
    scales
}

/// The reference's run, each value handed to `sink` with the time the reference spent on it: on its own thread,
/// ahead of the comparison ([`super::ahead`]), unless the comparison feeds it back (`feedback`: the target's
/// decisions widen to the noise measured as values arrive) or `PHANTOM_REFERENCE_AHEAD` is `0`; `budget`: a
/// bounded run's (or the one a whole first pass keeps within), which caps the values ahead.
pub(super) fn streamed(
    p: &Prepared,
    (runner, arriving): (&mut ReferenceRunner, Option<&super::noise::Arriving>),
    (budget, feedback): (Option<usize>, bool),
    sink: &mut dyn FnMut(&str, super::ahead::Value, Option<Duration>),
) -> Result<RunOutput> {
    let parts = (&p.graph, &p.inputs, p.noise_inputs.as_ref());
    let asked = std::env::var("PHANTOM_REFERENCE_AHEAD").map_or(true, |v| v != "0");
    if feedback || !asked {
        let sink = &mut |name: &str, value| sink(name, value, None);
        return super::noise::run_reference(runner, parts, arriving, sink);
    }
    let reference = move |hand: &mut crate::runner::reference::Sink<'_>| {
        super::noise::run_reference(runner, parts, arriving, hand)
    };
    let cap = super::ahead::cap(budget);
    super::ahead::run(cap, reference, &mut |name, value, spent| {
        sink(name, value, Some(spent))
    })
}

/// Before any decision on `name` is taken: the noise it carries, for the one lane's decisions to widen to.
fn measure(lanes: &[Side], name: &str, value: &std::result::Result<Tensor, String>) {
    if let (Ok(v), [lane]) = (value, lanes) {
        if let Some(m) = &lane.adoption.measured {
            m.observe(name, v, &lane.noise.held);
        }
    }
}

/// A maker of the reference runner: with the one target's decisions to adopt, and the facts the targets measured.
fn reference_runner(graph: &crate::model::Graph, lanes: &[Side]) -> impl Fn() -> ReferenceRunner {
    let decisions = match lanes {
        [lane] => lane.adoption.decisions.clone(),
        _ => None,
    };
    let known = (lanes.first()).map(|l| super::noise::known_from(graph, &l.out.values));
    move || ReferenceRunner {
        decisions: decisions.clone(),
        known: known.clone(),
        ..Default::default()
    }
}

/// The reference's value `name` and each target's, into the dump.
fn dump_value(
    d: &mut super::dump::Dump,
    name: &str,
    value: &std::result::Result<Tensor, String>,
    lanes: &[Side],
) {
    let targets: Vec<_> = lanes
        .iter()
        .map(|l| (l.spec.label(), l.out.values.get(name)))
        .collect();
    d.value(name, value, &targets);
}

/// `name`'s scale: the reference's RMS the comparison measured already, unless it saw a slice; else measured here.
fn rescale(s: &CompareSettings, name: &str, v: &Tensor, lanes: &[Side], scales: &mut Scales) {
    let measured = lanes
        .first()
        .and_then(|l| l.found.reports.get(name))
        .and_then(|r| r.metrics.as_ref());
    match (measured, &s.slice) {
        (Some(m), None) if v.dtype().is_float() => scales.set(name, m.scale),
        _ => scales.record(name, v),
    }
}

/// The combinations of options a streamed comparison refuses, before anything is written.
fn refused(s: &CompareSettings, lanes: &[Side]) -> Result<()> {
    match (s.budget(), lanes.len()) {
        (Some(_), _) if s.dump.is_some() => Err(Error::Usage(
            "--dump holds every value of a run; with --max-memory values are exposed chunk by chunk: drop one".into(),
        )),
        (Some(_), n) if n != 1 => Err(Error::Usage(
            "--max-memory runs one target at a time: give one --ep".into(),
        )),
        _ => Ok(()),
    }
}

/// One value compared between every pair of targets (sliced when asked); nothing with one target.
fn pair_up(s: &CompareSettings, name: &str, lanes: &[Side], scaling: Scaling) -> Vec<PairValue> {
    if lanes.len() < 2 {
        return vec![];
    }
    let cut: Vec<(String, Option<Cow<Tensor>>)> = lanes
        .iter()
        .map(|l| {
            let v = l.out.values.get(name).map(|t| match &s.slice {
                Some(sp) => Cow::Owned(sp.apply(t)),
                None => Cow::Borrowed(t),
            });
            (l.spec.label(), v)
        })
        .collect();
    let values: Vec<(String, Option<&Tensor>)> =
        cut.iter().map(|(l, v)| (l.clone(), v.as_deref())).collect();
    agreement::pairs(name, &values, &s.tolerance, scaling)
}

/// Value `name` judged on every lane (its scale from `scales`, `is_output` when a graph output); true when a first
/// pass without the expected noise fails on it: the rest of that pass is abandoned, as the comparison runs again
/// with the noise ([`super::noise::needed_after`]).
fn judge_all(
    s: &CompareSettings,
    (name, value): (&str, &std::result::Result<Tensor, String>),
    lanes: &mut [Side],
    (scales, is_output): (&Scales, bool),
) -> bool {
    let mut abandoned = false;
    for lane in lanes.iter_mut() {
        let judged = |o: &str| {
            lane.found
                .reports
                .get(o)
                .and_then(ValueReport::judged_dtype)
        };
        let scaling = scales.scaling_from(name, judged);
        let report = judge(s, name, value, lane, (scaling, is_output));
        abandoned |=
            lane.noise.deferred && report.status == crate::report::model::ValueStatus::Fail;
        lane.found.reports.insert(name.to_string(), report);
    }
    abandoned
}

/// One value judged: the reference's against the target's (sliced when asked), with the expected noise.
fn judge(
    s: &CompareSettings,
    name: &str,
    value: &std::result::Result<Tensor, String>,
    lane: &mut Side,
    (scaling, is_output): (Scaling, bool),
) -> ValueReport {
    let (target, emulated) = (&mut *lane.out, &mut lane.noise.held);
    let cut = |t: Tensor| match &s.slice {
        Some(sp) => sp.apply(&t),
        None => t,
    };
    let why_not = (lane.paired.covered.get(name))
        .or_else(|| target.missing.get(name))
        .map(String::as_str)
        .unwrap_or("not produced");
    // `--steps` feeds the graph outputs (cache, logits) to the next step; the fused-kernel variation
    // ([`super::variation`]) judges a failing output again. Kept unless large.
    let small = |t: &Tensor| s.steps > 1 || t.len() <= crate::bounded::KEPT_OUTPUT_ELEMENTS;
    let kept = is_output && target.values.get(name).is_some_and(small);
    let tgt: Option<Cow<Tensor>> = match (kept, &s.slice) {
        (true, Some(sp)) => target.values.get(name).map(|t| Cow::Owned(sp.apply(t))),
        (true, None) => target.values.get(name).map(Cow::Borrowed),
        (false, _) => target.values.remove(name).map(|t| Cow::Owned(cut(t))),
    };
    let tgt = match (&tgt, value) {
        (Some(t), Ok(r)) if s.slice.is_none() => (lane
            .paired
            .as_model_holds(name, t, r.shape())
            .map(Cow::Owned))
        .or(tgt),
        _ => tgt,
    };
    let sliced = s
        .slice
        .as_ref()
        .map(|sp| value.as_ref().map(|t| sp.apply(t)).map_err(Clone::clone));
    let r = sliced.as_ref().unwrap_or(value);
    let mut report = analysis::compare_pair(
        name,
        r.as_ref().map_err(String::as_str),
        tgt.as_deref().ok_or(why_not),
        &s.tolerance,
        scaling,
        is_output,
        s.heatmaps,
    );
    if let Ok(r) = r {
        attribution::with_noise(&mut report, r, emulated.take(name).map(cut), &s.tolerance);
    }
    report
}
