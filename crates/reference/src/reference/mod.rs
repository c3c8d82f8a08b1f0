//! The f64 reference: tract at the typed level (never decluttered or optimized), f32 and f16 translated to f64,
//! every value captured by ONNX name. Ops tract lacks in f64 run on phantom's own kernels ([`kernels`]), the heavy
//! ones (convolutions, matrix products, attention) on phantom's parallel f64 GEMM ([`fast`]); a node
//! tract can only run in f32 is evaluated in f32 and marked "reduced-precision reference"; a node it cannot run
//! at all is marked unavailable, with everything downstream of it, and the comparison goes on.

pub mod contrib;

mod capture;
pub mod decide;
mod extrema;
mod faithful;
pub mod fast;
mod files;
mod folded;
mod formats;
mod fused_conv;
mod hook;
pub mod kernels;
mod lazy;
mod messages;
pub mod nchwc;
pub mod paired;
mod parsed;
mod pins;
mod planned;
pub use hook::Sink;
use messages::{humanize, onnx_name, ref_err};
pub mod qop;
mod resize;
mod resize_int;
mod rewrite;
mod rnn;
mod rnn_act;
pub mod select;
mod shape_inputs;
mod sizing;
mod stored;
pub use shape_inputs::InputFact;
use shape_inputs::{facts_of, input_fact};
mod symbols;
pub mod thresholds;
mod widen;
mod windows;

use std::collections::HashMap;

use tract_onnx::model::ParseResult;
use tract_onnx::pb::ModelProto;
use tract_onnx::prelude::*;

use super::RunOutput;
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;

/// The tract version phantom is built with.
pub const TRACT_VERSION: &str = "0.23.9";

/// Prefix of the names phantom gives ONNX nodes inside tract (tract expansions append `.suffix`).
const PREFIX: &str = "phantom";

pub use phantom_engine::computed::Rounding;

/// tract in f64.
#[derive(Default)]
pub struct ReferenceRunner {
    /// The target's discrete decisions to adopt where they lie within the noise of a boundary ([`decide`]).
    pub decisions: Option<std::sync::Arc<decide::Decisions>>,
    /// Decisions tract folds at import, pinned to what the reference adopted of the target's ([`pins`]).
    pub pins: pins::Pins,
    /// Emulate a target that stores values in lower precision: every value named here (graph inputs, constants,
    /// node outputs) is rounded to its element type and computation goes on in f64 from the rounded value.
    pub round: Option<Rounding>,
    /// Element types and shapes of the values the target computed: a node tract cannot type is stood in for with
    /// them ([`contrib::standin`]), so the rest of the model is still compared.
    pub known: Option<std::sync::Arc<contrib::standin::Known>>,
    /// Set (by the sink) once the caller has every value it wants: the run then ends before its next node,
    /// successfully, the rest of its values not computed.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Round every quantization's near-ties to the other neighbour ([`decide::Ties`]; counted in the details).
    pub ties: Option<decide::Ties>,
    /// In a rounding run, compute `MatMulNBits` with `accuracy_level = 4` as ONNX Runtime's CPU kernel does, its A
    /// quantized to int8 per block ([`hook::accuracy`]): the precision the model chose, for a target that honours it.
    pub int8_activations: bool,
}

/// How the widened model's large weights reach tract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Weights {
    /// Kept as the model stores them, widened each time they are used ([`stored`]).
    Stored,
    /// Widened up front and handed to tract one at a time ([`lazy`]).
    Lazy,
    /// Widened up front in the model.
    Inline,
}

/// Nodes stood in for at most (each is one more parse of the model).
const MAX_STAND_INS: usize = 32;

/// Where tract's typing error `e` is a `Range` refusing an input of rank 1, that node's inputs reshaped to scalars
/// ([`rewrite::scalar_range_inputs`]); whether it was.
fn scalar_range(proto: &mut ModelProto, e: &TractError) -> bool {
    let text = format!("{e:#}");
    if !text.contains("Range") || !text.contains("rank == 0") {
        return false;
    }
    let Some(g) = proto.graph.as_mut() else {
        return false;
    };
    let Some(name) = contrib::standin::failing(g, &text, PREFIX)
        .filter(|n| n.op_type == "Range")
        .map(|n| n.name.clone())
    else {
        return false;
    };
    rewrite::scalar_range_inputs(g, &name)
}

impl ReferenceRunner {
    /// Parses the model into a typed tract model whose outputs are every value, in the order of the returned names.
    /// With `wide`, the model is first rewritten as float64 ([`widen`]) and patched where tract's expansions are not
    /// faithful ([`rewrite`]).
    fn parse(
        &self,
        graph: &Graph,
        facts: &[InputFact],
        wide: bool,
    ) -> Result<(TypedModel, Vec<String>, ModelProto)> {
        if wide && self.parse_is_plain() {
            if let Some(p) = parsed::take(graph, facts) {
                return Ok(p);
            }
        }
        self.parse_with(graph, facts, wide, Weights::Stored)
    }

    /// The large float weights of `proto` (not yet widened) kept as stored ([`stored`]), unless
    /// `PHANTOM_STORED_WEIGHTS` is `0`.
    fn store(&self, graph: &Graph, proto: &mut ModelProto) -> Option<stored::Held> {
        if std::env::var("PHANTOM_STORED_WEIGHTS").is_ok_and(|v| v == "0") {
            return None;
        }
        let g = proto.graph.as_mut()?;
        let keep = widen::kept_f32(g);
        stored::take(g, &keep, graph.path.parent(), self.round.as_ref())
    }

    /// The large weights of the widened `proto` moved to a store tract reads them from ([`lazy`]), unless
    /// `PHANTOM_LAZY_WEIGHTS` is `0`.
    fn lazy(&self, graph: &Graph, proto: &mut ModelProto) -> Option<std::sync::Arc<lazy::Lazy>> {
        if std::env::var("PHANTOM_LAZY_WEIGHTS").is_ok_and(|v| v == "0") {
            return None;
        }
        let g = proto.graph.as_mut()?;
        lazy::move_out(g, &Default::default(), model_dir(graph))
    }

    /// [`Self::parse`], the widened model's large weights held as `weights` says; a parse that fails with weights
    /// stored is redone with them lazy, and one that fails lazy with them inline.
    fn parse_with(
        &self,
        graph: &Graph,
        facts: &[InputFact],
        wide: bool,
        weights: Weights,
    ) -> Result<(TypedModel, Vec<String>, ModelProto)> {
        let proto = decoded(graph)?;
        self.parse_proto(graph, facts, (wide, weights), proto)
    }

    /// [`Self::parse_with`] of `proto`, the model as [`decoded`].
    fn parse_proto(
        &self,
        graph: &Graph,
        facts: &[InputFact],
        (wide, weights): (bool, Weights),
        mut proto: ModelProto,
    ) -> Result<(TypedModel, Vec<String>, ModelProto)> {
        // Held until the model is typed: its ops then keep the weights they read.
        let held = match (wide, weights) {
            (true, Weights::Stored) => self.store(graph, &mut proto),
            _ => None,
        };
        if weights == Weights::Stored && held.is_none() {
            // No weight was stored: the model is as decoded.
            return self.parse_proto(graph, facts, (wide, Weights::Lazy), proto);
        }
        if wide {
            widen::widen(&mut proto, graph.path.parent(), self.round.as_ref())
                .map_err(|e| ref_err(graph, "widening to f64", e))?;
            rewrite::rewrite(proto.graph.as_mut().expect("checked above"));
            qop::rewrite(proto.graph.as_mut().expect("checked above"));
            pins::pin(proto.graph.as_mut().expect("checked above"), &self.pins);
        }
        let opsets = proto.opset_import.clone();
        contrib::claim(proto.graph.as_mut().expect("checked above"), &opsets);
        contrib::drop_zipmaps(proto.graph.as_mut().expect("checked above"));
        if held.is_some() {
            // With the weights as stored; anything else is redone with them widened up front.
            if let Ok(Ok((typed, names))) = self.type_model(graph, facts, (wide, None), &proto) {
                return self.typed(graph, facts, (typed, names), proto);
            }
            drop(held);
            crate::model::budget::widened_weights_fit(graph)?;
            return self.parse_with(graph, facts, wide, Weights::Lazy);
        }
        let lazy = (wide && weights == Weights::Lazy)
            .then(|| self.lazy(graph, &mut proto))
            .flatten();
        if let Some(lazy) = lazy {
            // With the weights handed over one by one; anything else is redone with them in the model.
            if let Ok(Ok((typed, names))) =
                self.type_model(graph, facts, (wide, Some(lazy)), &proto)
            {
                return self.typed(graph, facts, (typed, names), proto);
            }
            return self.parse_with(graph, facts, wide, Weights::Inline);
        }
        let mut stood = 0;
        let (typed, names) = loop {
            match self.type_model(graph, facts, (wide, None), &proto)? {
                Ok(t) => break t,
                Err(e) if stood < MAX_STAND_INS && scalar_range(&mut proto, &e) => stood += 1,
                Err(e)
                    if stood < MAX_STAND_INS
                        && contrib::standin::for_error(
                            self.known.as_deref(),
                            graph,
                            &mut proto,
                            &e,
                            wide,
                        ) =>
                {
                    stood += 1
                }
                Err(e) => return Err(ref_err(graph, "typing", e)),
            }
        };
        self.typed(graph, facts, (typed, names), proto)
    }

    /// The typed model checked to fit memory and its pools' windows, with its value names and the model it was
    /// parsed from.
    fn typed(
        &self,
        graph: &Graph,
        facts: &[InputFact],
        (typed, names): (TypedModel, Vec<String>),
        proto: ModelProto,
    ) -> Result<(TypedModel, Vec<String>, ModelProto)> {
        sizing::within_memory(graph, &typed)?;
        let known = windows::shapes(
            &typed,
            &names,
            facts.iter().map(|f| (f.name.as_str(), f.shape.clone())),
        );
        windows::pools_fit(graph, proto.graph.as_ref().expect("checked above"), &known).map_err(
            |reason| Error::MalformedModel {
                path: graph.path.clone(),
                reason,
            },
        )?;
        Ok((typed, names, proto))
    }
}

/// `graph`'s model decoded ([`crate::model::import::decoded`]), its nodes named by index, narrow number formats
/// carried.
fn decoded(graph: &Graph) -> Result<ModelProto> {
    let mut proto =
        crate::model::import::decoded(graph).map_err(|e| ref_err(graph, "decoding", e))?;
    let g = proto
        .graph
        .as_mut()
        .ok_or_else(|| ref_err(graph, "reading", "no graph"))?;
    for n in &graph.nodes {
        g.node[n.source_index].name = format!("{PREFIX}{}", n.index);
    }
    formats::carry(&mut proto, graph.path.parent())
        .map_err(|e| ref_err(graph, "decoding narrow number formats", e))?;
    Ok(proto)
}

/// The directory tract resolves the model's external data in.
fn model_dir(graph: &Graph) -> &str {
    graph
        .path
        .parent()
        .and_then(|p| p.to_str())
        .filter(|p| !p.is_empty())
        .unwrap_or(".")
}

/// A panic's node and reason in ONNX terms (tract names nodes by phantom's prefix and index).
fn named_panics<T>(graph: &Graph, r: Result<T>) -> Result<T> {
    r.map_err(|e| match e {
        Error::Panic {
            stage,
            node,
            reason,
        } => Error::Panic {
            stage,
            node: node.map(|n| onnx_name(&n, graph)),
            reason: humanize(&reason, graph),
        },
        other => other,
    })
}

/// The engine's name and version, and one run capturing every value it can.
impl ReferenceRunner {
    /// Short name used in reports (`tract-f64`, `onnxruntime`, `wgpu`).
    pub fn name(&self) -> String {
        "tract-f64".into()
    }

    /// Version string of the underlying engine.
    pub fn version(&self) -> String {
        TRACT_VERSION.into()
    }

    /// Evaluates `graph` on `inputs`, capturing every value it can.
    pub fn run(&mut self, graph: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        let mut values = HashMap::new();
        let mut missing = HashMap::new();
        let mut out = self.run_streaming(graph, inputs, &mut |name, v| match v {
            Ok(t) => {
                values.insert(name.to_string(), t);
            }
            Err(why) => {
                missing.insert(name.to_string(), why);
            }
        })?;
        out.values = values;
        out.missing.extend(missing);
        Ok(out)
    }
}

impl ReferenceRunner {
    /// Runs the reference and hands every value to `sink` as soon as it is computed (or could not be), so a
    /// caller can compare and drop it: tract frees intermediates after their last use. The returned
    /// [`RunOutput`] holds no values, only precision, notes, details and the values tract never produced.
    pub fn run_streaming(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        sink: &mut hook::Sink<'_>,
    ) -> Result<RunOutput> {
        named_panics(
            graph,
            crate::error::guard("the f64 reference (tract)", || {
                self.run_guarded(graph, inputs, sink)
            }),
        )
    }

    /// [`Self::run_streaming`] without the panic guard.
    fn run_guarded(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        sink: &mut hook::Sink<'_>,
    ) -> Result<RunOutput> {
        let planned = self.planned(graph, &facts_of(graph, inputs))?;
        self.execute(graph, &planned, inputs, sink)
    }

    /// `proto` parsed by tract with the graph inputs' facts, and typed: `Err` where it cannot be parsed, `Ok(Err)`
    /// where it cannot be typed (a node may then be stood in for, see [`Self::stand_in`]).
    #[allow(clippy::type_complexity)]
    fn type_model(
        &self,
        graph: &Graph,
        facts: &[InputFact],
        (wide, lazy): (bool, Option<std::sync::Arc<lazy::Lazy>>),
        proto: &ModelProto,
    ) -> Result<TractResult<(TypedModel, Vec<String>)>> {
        let dir = model_dir(graph);
        let mut onnx = tract_onnx::onnx().with_ignore_value_info(true);
        onnx.provider = match lazy {
            Some(lazy) => lazy,
            None => std::sync::Arc::new(files::Files),
        };
        contrib::register(&mut onnx);
        onnx.op_register.0.insert(stored::OP.into(), stored::build);
        let ParseResult {
            mut model,
            unresolved_inputs,
            outlets_by_name,
        } = onnx
            .parse(proto, Some(dir))
            .map_err(|e| ref_err(graph, "parsing", e))?;
        crate::work::count(crate::work::Work::Parse);
        if !unresolved_inputs.is_empty() {
            return Err(ref_err(
                graph,
                "parsing",
                format!("values defined nowhere (sparse initializers?): {unresolved_inputs:?}"),
            ));
        }
        for (ix, outlet) in model.inputs.clone().iter().enumerate() {
            let name = model.node(outlet.node).name.clone();
            let f = facts
                .iter()
                .find(|f| f.name == name)
                .ok_or_else(|| Error::Input {
                    name: name.clone(),
                    reason: "the reference model expects this input but none was prepared".into(),
                })?;
            let fact = input_fact(f, wide);
            model
                .set_input_fact(ix, fact)
                .map_err(|e| ref_err(graph, "setting input facts of", e))?;
        }
        let names: Vec<String> = graph
            .computed_values()
            .into_iter()
            .filter(|n| outlets_by_name.contains_key(*n))
            .map(String::from)
            .collect();
        let outlets: Vec<OutletId> = names.iter().map(|n| outlets_by_name[n]).collect();
        model
            .select_output_outlets(&outlets)
            .map_err(|e| ref_err(graph, "selecting outputs of", e))?;
        crate::work::count(crate::work::Work::Typing);
        Ok(model.into_typed().map(|typed| (typed, names)))
    }

    /// The model parsed as float64 ([`Self::parse`] with `wide`), or, where that fails, as it is (with a note
    /// in `notes`: constants tract folds at import are then float32-rounded).
    fn parse_wide_or_narrow(
        &self,
        graph: &Graph,
        facts: &[InputFact],
        notes: &mut Vec<String>,
    ) -> Result<(TypedModel, Vec<String>, ModelProto)> {
        match self.parse(graph, facts, true) {
            Ok(p) => Ok(p),
            // Weights beyond the memory budget: the float32 model would widen them all the same.
            Err(e @ Error::Usage(_)) => Err(e),
            Err(wide_err) => match self.parse(graph, facts, false) {
                Ok(p) => {
                    notes.push(format!(
                        "the reference could not load the model rewritten as float64 ({wide_err}); it translated the \
                         float32 model instead, so constants tract folds at import are float32-rounded"
                    ));
                    Ok(p)
                }
                Err(_) => Err(wide_err),
            },
        }
    }

    /// The graph inputs to feed the plan of `model`, as f64 (rounded first where the run emulates low precision).
    fn feeds(&self, model: &TypedModel, inputs: &Inputs) -> TVec<TValue> {
        model
            .inputs
            .iter()
            .map(|o| {
                let name = &model.node(o.node).name;
                let t = &inputs
                    .tensors
                    .iter()
                    .find(|(n, _)| n == name)
                    .expect("checked in parse")
                    .1;
                match self.round.as_ref().and_then(|r| r.get(name)) {
                    Some(&d) if t.dtype().is_float() => {
                        crate::model::tract::to_tract_f64(&t.cast(d).expect("float casts"))
                    }
                    _ => crate::model::tract::to_tract_f64(t),
                }
            })
            .collect()
    }
}
