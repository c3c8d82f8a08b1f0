//! The reference and its expected-noise run side by side: the noise run goes on a second thread while the
//! reference streams its values on this one (tract's element-wise ops run on one core; two runs fill two). Where
//! rounding to the target's element types changes no weight (a model run in its own precision), both runs are the
//! same plan with different rounding of the values they compute, so the model is parsed, typed and planned once;
//! otherwise the noise run plans its own model on its thread.

use super::{facts_of, named_panics, ReferenceRunner, Rounding};
use crate::error::{guard, Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::tensor::{DType, Tensor};
use crate::RunOutput;

/// Where the expected-noise run's values go, beside the reference.
pub type NoiseSink<'a> = dyn FnMut(&str, std::result::Result<Tensor, String>) + Send + 'a;

/// The expected-noise run beside the reference: its rounding, its inputs, where its values go, and what to call
/// once it has ended.
pub struct Beside<'a, 's> {
    pub round: &'a Rounding,
    pub inputs: &'a Inputs,
    pub sink: &'a mut NoiseSink<'s>,
    /// Whether it shares the reference's plan ([`ReferenceRunner::shares_plan`]); otherwise it plans its own model
    /// (weights rounded) on its thread.
    pub shared: bool,
    /// Called on the noise run's thread when it has ended, with its error if it failed: a consumer waiting for its
    /// values stops waiting.
    pub ended: &'a (dyn Fn(Option<&Error>) + Sync),
    /// The target's decisions it adopts (with their fixed windows: the reference's may widen to the noise this run
    /// measures).
    pub decisions: Option<std::sync::Arc<super::decide::Decisions>>,
    /// Whether it computes `accuracy_level = 4` as ONNX Runtime's CPU kernel does
    /// ([`ReferenceRunner::int8_activations`]).
    pub int8_activations: bool,
}

impl ReferenceRunner {
    /// Whether the expected-noise run with `round` on `noise_inputs` can share the reference's plan on `inputs`:
    /// rounding changes no weight or constant (each is already of the type it rounds to, or rounds to float32, which
    /// holds float16 and bfloat16 exactly), and the inputs have the same types and shapes.
    pub fn shares_plan(
        graph: &Graph,
        round: &Rounding,
        (inputs, noise): (&Inputs, &Inputs),
    ) -> bool {
        let unchanged = |name: &str, own: Option<DType>| match round.get(name) {
            None | Some(DType::F32 | DType::F64) => true,
            Some(d) => own == Some(*d),
        };
        let weights = (graph.initializers.iter())
            .all(|(n, i)| !i.dtype.is_float() || unchanged(n, Some(i.dtype)));
        let constants = (graph.nodes.iter())
            .filter(|n| n.op_type == "Constant")
            .all(|n| n.outputs.iter().all(|o| unchanged(o, None)));
        weights && constants && facts_of(graph, inputs) == facts_of(graph, noise)
    }

    /// Runs the reference on `inputs`, handing each value to `sink` on this thread, and beside it, on a second
    /// thread, the model with every value rounded as `beside.round` says (the expected noise): the same plan where
    /// [`Self::shares_plan`], else its own. Returns the reference's run; the noise run's outcome goes to
    /// `beside.ended`.
    pub fn run_paired(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        sink: &mut super::hook::Sink<'_>,
        beside: Beside<'_, '_>,
    ) -> Result<RunOutput> {
        let stage = "the f64 reference (tract)";
        let planned = guard(stage, || self.planned(graph, &facts_of(graph, inputs)));
        let planned = match named_panics(graph, planned) {
            Ok(p) => p,
            Err(e) => {
                (beside.ended)(Some(&e));
                return Err(e);
            }
        };
        let mut ideal = ReferenceRunner {
            round: Some(beside.round.clone()),
            decisions: beside.decisions.clone(),
            known: self.known.clone(),
            int8_activations: beside.int8_activations,
            ..Default::default()
        };
        let (ended, noise_inputs, noise_sink) = (beside.ended, beside.inputs, beside.sink);
        let (planned, shared) = (&planned, beside.shared);
        let this = &*self;
        std::thread::scope(|sc| {
            let noise = sc.spawn(move || {
                let run = guard("the expected-noise run (tract)", || match shared {
                    true => ideal.execute(graph, planned, noise_inputs, noise_sink),
                    false => {
                        let own = ideal.planned(graph, &facts_of(graph, noise_inputs))?;
                        ideal.execute(graph, &own, noise_inputs, noise_sink)
                    }
                });
                ended(named_panics(graph, run).err().as_ref());
            });
            let out = guard(stage, || this.execute(graph, planned, inputs, sink));
            if noise.join().is_err() {
                ended(Some(&Error::Usage(
                    "the expected-noise run's thread panicked".into(),
                )));
            }
            named_panics(graph, out)
        })
    }
}
