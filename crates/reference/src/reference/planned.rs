//! One parse, many runs: the model parsed as float64, typed and planned ([`ReferenceRunner::planned`]), with what
//! each run of the plan starts from, and one run of a plan ([`ReferenceRunner::execute`]). The reference's run and
//! the expected-noise run beside it share a plan where rounding changes no weight ([`super::paired`]).

use std::collections::HashMap;

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::SimpleState;

use super::widen::to_f64;
use super::{
    capture, decide, faithful, folded, hook, pins, ref_err, select, stored, symbols, InputFact,
    ReferenceRunner,
};
use crate::error::Result;
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::RunOutput;

/// The model parsed, typed and planned once, with what every run of the plan starts from: the reference's run, and
/// the expected-noise run beside it where rounding leaves every weight as it is ([`super::paired`]).
pub(super) struct Planned {
    pub(super) plan: std::sync::Arc<TypedSimplePlan>,
    /// Every value the plan outputs, in order.
    pub(super) names: Vec<String>,
    pub(super) labels: HashMap<usize, Vec<(usize, String)>>,
    pub(super) onnx_of: HashMap<usize, usize>,
    pub(super) precision: HashMap<usize, crate::RefPrecision>,
    pub(super) unfaithful: HashMap<usize, String>,
    pub(super) selections: HashMap<String, select::Selection>,
    pub(super) notes: Vec<String>,
    /// Decisions tract folded at import, adopted by pinning them.
    pub(super) adopted_folded: Vec<(String, decide::Adopted)>,
    /// How the plan holds the model's weights, for the report's reference details ([`stored::held`]).
    pub(super) weights: String,
    /// The float nodes tract folded, for a run that rounds ([`folded`]).
    pub(super) folded: folded::Folded,
}

impl ReferenceRunner {
    /// The model parsed as float64, typed and planned, with what each run of the plan starts from.
    pub(super) fn planned(&mut self, graph: &Graph, facts: &[InputFact]) -> Result<Planned> {
        let mut notes = Vec::new();
        self.pins.clear();
        let (mut typed, mut names, mut proto) =
            self.parse_wide_or_narrow(graph, facts, &mut notes)?;
        let mut adopted_folded = vec![];
        if let Some(d) = self.decisions.clone() {
            let (pins, found) = pins::folded(graph, &typed, &names, &d);
            if !pins.is_empty() {
                self.pins = pins;
                (typed, names, proto) = self.parse_wide_or_narrow(graph, facts, &mut notes)?;
                adopted_folded = found;
            }
        }
        let producers = graph.producers();
        let precision = capture::folded_at_import(graph, &typed, &names, &producers);
        let mut t64 = to_f64(&typed).map_err(|e| ref_err(graph, "translating to f64", e))?;
        symbols::revive_dead_symbols(&mut t64);
        symbols::unmint_sized_ranges(&mut t64);
        let labels = capture::labels_of(&t64, &names);
        capture::keep_graph_outputs(graph, &mut t64, &names)?;
        let plan = symbols::plan(t64).map_err(|e| ref_err(graph, "planning", e))?;
        let weights = stored::held(plan.model());
        let onnx_of = capture::onnx_nodes(plan.model(), &producers);
        // The rewritten model holds every weight in f64 again: not kept through the run.
        let folded = folded::Folded::collect(graph, plan.model(), &onnx_of, &proto);
        let planned = Planned {
            folded,
            names,
            labels,
            onnx_of,
            precision,
            unfaithful: faithful::unfaithful(graph, &proto),
            selections: match self.decisions.as_deref() {
                Some(d) => select::selections(&proto, d),
                None => HashMap::new(),
            },
            notes,
            adopted_folded,
            weights,
            plan,
        };
        drop(proto);
        crate::heap::release();
        Ok(planned)
    }

    /// One run of `planned` on `inputs` (rounded first where this run emulates low precision), each value handed
    /// to `sink`.
    pub(super) fn execute(
        &self,
        graph: &Graph,
        planned: &Planned,
        inputs: &Inputs,
        sink: &mut hook::Sink<'_>,
    ) -> Result<RunOutput> {
        let plan = &planned.plan;
        let mut state = SimpleState::new(plan).map_err(|e| ref_err(graph, "planning", e))?;
        let feeds = self.feeds(plan.model(), inputs);
        let (labels, onnx_of) = (planned.labels.clone(), planned.onnx_of.clone());
        let precision = planned.precision.clone();
        let mut ev = hook::Evaluator::new(graph, onnx_of, labels, precision, sink)
            .with_rounding(self.round.as_ref())
            .with_unfaithful(planned.unfaithful.clone())
            .with_decisions(self.decisions.as_deref())
            .with_ties(self.ties)
            .with_int8_activations(self.int8_activations && self.round.is_some())
            .with_folded(&planned.folded)
            .with_selections(planned.selections.clone())
            .with_constants(plan.model());
        let stopped =
            || (self.stop.as_ref()).is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
        let ran = state.run_plan_with_eval(feeds, |ctx, st, node, ins| {
            if stopped() {
                return Err(anyhow::anyhow!(
                    "stopped: the caller has every value it wants"
                ));
            }
            ev.eval(ctx, st, node, ins)
        });
        if !stopped() {
            ran.map_err(|e| ref_err(graph, "running", format!("{e:#}")))?;
        }
        ev.finish();
        let mut adopted = std::mem::take(&mut ev.adopted);
        adopted.extend(planned.adopted_folded.iter().cloned());
        let notes = planned.notes.clone();
        let mut out = capture::run_output(graph, &planned.names, &ev.emitted, ev.precision, notes);
        out.details
            .insert("weights".into(), planned.weights.clone());
        out.adopted = adopted;
        if self.ties.is_some() {
            out.details
                .insert(decide::TIES_FLIPPED.into(), ev.flipped.to_string());
        }
        Ok(out)
    }
}
