//! The expected-noise stage: the reference rerun with every value rounded to the element type the target stores it
//! in, i.e. per value what correct rounding alone would give. With one target, the run goes beside the reference, on
//! a second thread, each value taken by the comparison as it arrives ([`beside`], [`run_reference`]): on the
//! reference's own plan where the rounding changes no weight (a model run in its own precision), else on a plan of
//! its own when twice the weights fit the memory budget. Otherwise it runs first, on its own ([`expected`]). Its
//! values wait in memory; when the run is bounded, on disk beyond a share of one chunk ([`store`]).

use std::sync::Arc;

use super::degrade::{self, Said};
use super::parts::stage;
use super::stream::Side;
use super::{CompareSettings, Lane, Prepared};
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::report::model::ValueStatus;
use crate::runner::reference::decide::Decisions;
use crate::runner::reference::paired::Beside;
use crate::runner::reference::{ReferenceRunner, Rounding, Sink};
use crate::runner::RunOutput;
use crate::spill::arrivals::Arrivals;
use crate::spill::{Held, Spill};
use crate::targets::TargetSpec;
use crate::tensor::{DType, Tensor};

/// The expected-noise run of one lane: its values, its time, and how it ran or why it did not.
#[derive(Default)]
pub struct Noise {
    /// The reference rerun with the target's rounding, by value (on disk when bounded).
    pub held: Held,
    /// Time of the run (and, where it measures them, of the decisions' noise).
    pub ms: f64,
    /// It runs beside the reference, on a second thread ([`beside`]): `Some(shared)`, whether it shares the
    /// reference's plan.
    pub beside: Option<bool>,
    /// The comparison's first pass runs without it ([`deferred`]); should a value fail, it runs again with it.
    pub deferred: bool,
    /// Why it did not run ([`skipped`]).
    pub skipped: Option<String>,
}

/// Element types and shapes of the values a target run computed, and its values of the nodes the reference may have
/// to stand in for ([`crate::runner::reference::contrib::standin`]); none in bounded mode (nothing held).
pub fn known_from(
    graph: &Graph,
    values: &std::collections::HashMap<String, Tensor>,
) -> Arc<crate::runner::reference::contrib::standin::Known> {
    use crate::runner::reference::contrib::standin::{may_stand_in, Known};
    let facts = values
        .iter()
        .map(|(n, v)| (n.clone(), (v.dtype(), v.shape().to_vec())));
    let seeds = (graph.nodes.iter())
        .filter(|n| may_stand_in(&n.domain, &n.op_type))
        .flat_map(|n| n.outputs.iter())
        .filter_map(|o| Some((o.clone(), values.get(o)?.clone())));
    Arc::new(Known {
        facts: facts.collect(),
        seeds: seeds.collect(),
    })
}

/// Whether the target computes `MatMulNBits` at `accuracy_level = 4` with int8 activations: ONNX Runtime's CPU
/// provider does (the rounding run then does too).
pub(super) fn int8_activations(spec: &TargetSpec) -> bool {
    spec.is_ort_on("cpu")
}

/// Where the expected-noise run's values wait: when the run is bounded in memory, in memory up to three quarters of
/// a chunk of reference values (a chunk's values in the target's type, taken as the chunk is compared), on disk
/// beyond.
fn store(s: &CompareSettings, graph: &Graph) -> Result<Held> {
    Ok(match s.budget() {
        Some(budget) => {
            let front = crate::bounded::chunk_bytes(budget, graph) / 4 * 3;
            Held::Disk(Spill::new("noise")?.with_memory(front))
        }
        None => Held::default(),
    })
}

/// The value the expected-noise run keeps of `name`: rounded to the element type the target stores it in (values
/// the target does not round are not kept).
fn kept(
    round: &Rounding,
    name: &str,
    value: std::result::Result<Tensor, String>,
) -> Option<Tensor> {
    let (v, &d) = (value.ok()?, round.get(name)?);
    Some(v.cast(d).unwrap_or(v))
}

/// The expected-noise run on its own, before the reference: every value kept.
pub(super) fn expected(s: &CompareSettings, p: &Prepared, lane: &Lane) -> Result<Held> {
    let Some(round) = lane.rounding.as_ref() else {
        return Ok(Held::default());
    };
    let mut emulated = store(s, &p.graph)?;
    let pb = stage(s.progress, "expected noise: reference with target rounding");
    let mut ideal = ReferenceRunner {
        round: Some(round.clone()),
        decisions: lane.adoption.fixed.clone(),
        known: Some(known_from(&p.graph, &lane.out.values)),
        int8_activations: int8_activations(&lane.spec),
        ..Default::default()
    };
    let inputs = p.noise_inputs.as_ref().unwrap_or(&p.inputs);
    let mut failed = None;
    ideal.run_streaming(&p.graph, inputs, &mut |name, value| {
        if let (Some(v), None) = (kept(round, name, value), &failed) {
            failed = emulated.insert(name, v).err();
        }
    })?;
    pb.finish_and_clear();
    match failed {
        Some(e) => Err(e),
        None => Ok(emulated),
    }
}

/// Whether the expected-noise run may be left out of the comparison's first pass where the verdict may not need it
/// (`--expected-noise auto`): one target storing every float value in float32 or wider, on the reference's own plan
/// (its rounding changes no weight), with no discrete decisions to widen and nothing written as values arrive
/// (`--dump`, `--steps`). Such a run rarely fails; if a value does, the comparison runs again with the noise
/// ([`needed_after`]). `defer`: the caller can run the comparison again (a segment's cannot).
pub(super) fn deferred(s: &CompareSettings, p: &Prepared, lane: &Lane, defer: bool) -> bool {
    match &lane.rounding {
        Some(round) => defer && lane.adoption.decisions.is_none() && deferrable(s, p, round),
        None => false,
    }
}

/// Whether [`deferred`] may leave the noise out of a run of `s` on `p` with one target, which rounds as `round`
/// (decisions aside: the callers check them and the number of targets).
pub(super) fn deferrable(s: &CompareSettings, p: &Prepared, round: &Rounding) -> bool {
    let wide = round.values().all(|d| matches!(d, DType::F32 | DType::F64));
    let plain = !s.noise_always && s.dump.is_none() && s.steps <= 1;
    plain
        && wide
        && p.noise_inputs.is_none()
        && ReferenceRunner::shares_plan(&p.graph, round, (&p.inputs, &p.inputs))
}

/// After a first pass without the expected noise ([`deferred`]): whether a value failed, so that the verdict needs
/// the noise (a failure it explains is precision, not drift) and the comparison runs again with it.
pub(super) fn needed_after(lanes: &[Lane]) -> bool {
    (lanes.iter())
        .any(|l| l.noise.deferred && (l.reports.values()).any(|v| v.status == ValueStatus::Fail))
}

/// Why the expected-noise run did not run: a first pass without it in which no value failed ([`deferred`]).
pub(super) fn skipped(noise: &Noise) -> Option<String> {
    noise.deferred.then(|| {
        "every value passed, so no failure needed telling apart from rounding (a target storing every value in \
         float32 or wider, and its weights as the model does); each value's error of correct rounding was measured \
         for the anomaly screen instead (--expected-noise always runs it)"
            .into()
    })
}

/// The expected-noise stage of one lane: beside the reference where it can ([`beside`]; `only`: the lane is the
/// only one), else run first on its own ([`expected`]); what could not be measured is said beside it.
pub(super) fn run(s: &CompareSettings, p: &Prepared, lane: &Lane, only: bool) -> (Noise, Said) {
    if let Some(noise) = only.then(|| beside(s, p, lane)).flatten() {
        return (noise, Said::default());
    }
    let t = std::time::Instant::now();
    let mut said = Said::default();
    let held = degrade::injected("noise").and_then(|_| expected(s, p, lane));
    let held = said.stage("expected noise", held).unwrap_or_default();
    let noise = Noise {
        held,
        ms: super::parts::ms(t),
        ..Default::default()
    };
    (noise, said)
}

/// The lane's expected noise set to run beside the reference, when it can: on the reference's plan (its rounding
/// changes no weight and its inputs have the reference's shapes) or on its own (twice the weights in f64 fit the
/// memory budget), unless `PHANTOM_NOISE_BESIDE` is `0`. Its values are then arriving ([`Held::Arriving`]) until
/// [`settle`].
fn beside(s: &CompareSettings, p: &Prepared, lane: &Lane) -> Option<Noise> {
    let round = lane.rounding.as_ref()?;
    let noise_inputs = p.noise_inputs.as_ref().unwrap_or(&p.inputs);
    let asked = std::env::var("PHANTOM_NOISE_BESIDE").map_or(true, |v| v != "0");
    let shared = ReferenceRunner::shares_plan(&p.graph, round, (&p.inputs, noise_inputs));
    // Two plans hold the weights twice while both run.
    let two_fit = 2 * p.graph.reference_weight_bytes() <= crate::fsutil::memory_budget() as u64;
    let can = asked && crate::error::injected("noise").is_ok() && (shared || two_fit);
    // A store that cannot be made fails the same way on its own: the stage says so there.
    let held = can.then(|| store(s, &p.graph).ok()).flatten()?;
    Some(Noise {
        held: Held::Arriving(Arc::new(Arrivals::new(held))),
        beside: Some(shared),
        ..Default::default()
    })
}

/// The expected-noise run beside which the reference of `lanes` runs, when it does: its values' destination and
/// its rounding.
pub(super) fn arriving(lanes: &[Side]) -> Option<Arriving> {
    match lanes {
        [lane] => match (&lane.noise.held, lane.rounding, lane.noise.beside) {
            (Held::Arriving(a), Some(r), Some(shared)) => Some(Arriving {
                arrivals: a.clone(),
                round: r.clone(),
                shared,
                decisions: lane.adoption.fixed.clone(),
                int8_activations: int8_activations(lane.spec),
            }),
            _ => None,
        },
        _ => None,
    }
}

/// The expected-noise run beside the reference: where it hands its values, its rounding, whether it shares the
/// reference's plan, and the target's decisions it adopts (with their fixed windows).
pub(super) struct Arriving {
    arrivals: Arc<Arrivals>,
    round: Rounding,
    shared: bool,
    decisions: Option<Arc<Decisions>>,
    int8_activations: bool,
}

/// The reference's run on a graph and its inputs (and the noise run's, where they differ), each value handed to
/// `sink`; with the expected-noise run beside it on a second thread
/// when one is `arriving` ([`ReferenceRunner::run_paired`]).
pub(super) fn run_reference(
    runner: &mut ReferenceRunner,
    (graph, inputs, noise_inputs): (&Graph, &Inputs, Option<&Inputs>),
    arriving: Option<&Arriving>,
    sink: &mut Sink<'_>,
) -> Result<RunOutput> {
    let Some(Arriving {
        arrivals,
        round,
        shared,
        decisions,
        int8_activations,
    }) = arriving
    else {
        return runner.run_streaming(graph, inputs, sink);
    };
    let mut put = |name: &str, v| arrivals.put(name, kept(round, name, v));
    // `PHANTOM_INJECT_FAILURE=noise-beside`: the run fails after handing over every value (tests the undoing).
    let ended = |e: Option<&Error>| match crate::error::injected("noise-beside") {
        Err(injected) => arrivals.end(Some(&injected)),
        Ok(()) => arrivals.end(e),
    };
    let beside = Beside {
        round,
        inputs: noise_inputs.unwrap_or(inputs),
        sink: &mut put,
        shared: *shared,
        ended: &ended,
        decisions: decisions.clone(),
        int8_activations: *int8_activations,
    };
    runner.run_paired(graph, inputs, sink, beside)
}

/// After the comparison: the noise that arrived beside the reference, as held noise with the run's time added;
/// and whether that run ended well. If it failed, no value may keep a figure from it (a value it excused fails
/// again) and the stage is not measured, as when it runs on its own ([`super::Lane::settle_noise`]).
pub(super) fn settle(noise: Noise) -> (Noise, Result<()>) {
    let Held::Arriving(a) = noise.held else {
        return (noise, Ok(()));
    };
    let mut noise = Noise {
        held: Held::default(),
        ..noise
    };
    let ended = match Arc::try_unwrap(a).ok().and_then(Arrivals::finished) {
        Some(d) => {
            (noise.ms, noise.held) = (noise.ms + d.ms, d.held);
            d.error.map_or(Ok(()), Err)
        }
        None => Err(Error::Usage("the run did not end".into())),
    };
    (noise, ended)
}
