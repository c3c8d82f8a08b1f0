//! The f64 reference: tract at the typed level (never decluttered or optimized), f32 and f16 translated to f64,
//! every value captured by ONNX name. Ops tract lacks in f64 run on phantom's own kernels ([`kernels`]); a node
//! tract can only run in f32 is evaluated in f32 and marked "reduced-precision reference"; a node it cannot run
//! at all is marked unavailable, with everything downstream of it, and the comparison goes on.

mod convert;
pub mod kernels;
mod rewrite;
mod widen;

use std::collections::{HashMap, HashSet};

use prost::Message;
use tract_onnx::model::ParseResult;
use tract_onnx::pb::ModelProto;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::floats::FloatPrecisionTranslator;
use tract_onnx::tract_core::internal::{EvalContext, OpState, SimplePlan, SimpleState};
use tract_onnx::tract_core::model::translator::Translate;
use tract_onnx::tract_core::ops::konst::Const;

use super::{RunOutput, Runner};
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::report::model::RefPrecision;

/// The tract version phantom is built with.
pub const TRACT_VERSION: &str = "0.23.9";

/// Prefix of the names phantom gives ONNX nodes inside tract (tract expansions append `.suffix`).
const PREFIX: &str = "phantom";

/// tract in f64.
#[derive(Default)]
pub struct ReferenceRunner;

fn onnx_index(tract_name: &str) -> Option<usize> {
    let rest = tract_name.strip_prefix(PREFIX)?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Rewrites tract's internal node names in a message back to ONNX node names and ops.
fn humanize(msg: &str, graph: &Graph) -> String {
    let mut out = String::new();
    let mut rest = msg;
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + PREFIX.len()..];
        let end = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        match tail[..end]
            .parse::<usize>()
            .ok()
            .and_then(|i| graph.nodes.get(i))
        {
            Some(n) => out.push_str(&format!("{} node `{}`", n.op_type, n.name)),
            None => out.push_str(PREFIX),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

fn ref_err(graph: &Graph, stage: &str, e: impl std::fmt::Display) -> Error {
    Error::Reference {
        reason: format!(
            "{stage} {}: {}\n  hint: if an op is unsupported, compare a model without it or report the op to phantom",
            graph.path.display(),
            humanize(&format!("{e:#}"), graph)
        ),
    }
}

/// Rank for merging precisions of one ONNX node (its tract nodes may differ).
fn rank(p: &RefPrecision) -> u8 {
    match p {
        RefPrecision::F64 => 0,
        RefPrecision::F64Phantom => 1,
        RefPrecision::Reduced { .. } => 2,
        RefPrecision::Unavailable { .. } => 3,
    }
}

fn mark(map: &mut HashMap<usize, RefPrecision>, idx: Option<usize>, p: RefPrecision) {
    if let Some(i) = idx {
        let cur = map.entry(i).or_insert(RefPrecision::F64);
        if rank(&p) > rank(cur) {
            *cur = p;
        }
    }
}

fn first_line(e: &impl std::fmt::Display) -> String {
    let s = format!("{e:#}");
    let s = s.lines().next().unwrap_or("").to_string();
    if s.len() > 160 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(160).map(|(i, _)| i).unwrap_or(s.len())]
        )
    } else {
        s
    }
}

fn zeros_for(node: &TypedNode) -> TractResult<TVec<TValue>> {
    node.outputs
        .iter()
        .map(|o| {
            let shape =
                o.fact.shape.as_concrete().ok_or_else(|| {
                    anyhow::anyhow!("output shape of {} is not concrete", node.name)
                })?;
            Ok(Tensor::zero_dt(o.fact.datum_type, shape)?.into_tvalue())
        })
        .collect()
}

fn cast_all(values: &TVec<TValue>, from: DatumType, to: DatumType) -> TractResult<TVec<TValue>> {
    values
        .iter()
        .map(|v| {
            if v.datum_type() == from {
                Ok(v.cast_to_dt(to)?.into_owned().into_tvalue())
            } else {
                Ok(v.clone())
            }
        })
        .collect()
}

impl ReferenceRunner {
    /// Parses the model into a typed tract model whose outputs are every value, in the order of the returned names.
    /// With `wide`, the model is first rewritten as float64 ([`widen`]) and patched where tract's expansions are not
    /// faithful ([`rewrite`]).
    fn parse(
        &self,
        graph: &Graph,
        inputs: &Inputs,
        wide: bool,
    ) -> Result<(TypedModel, Vec<String>)> {
        let mut proto = ModelProto::decode(graph.bytes.as_slice())
            .map_err(|e| ref_err(graph, "decoding", e))?;
        let g = proto
            .graph
            .as_mut()
            .ok_or_else(|| ref_err(graph, "reading", "no graph"))?;
        for n in &graph.nodes {
            g.node[n.source_index].name = format!("{PREFIX}{}", n.index);
        }
        if wide {
            widen::widen(&mut proto, graph.path.parent())
                .map_err(|e| ref_err(graph, "widening to f64", e))?;
            rewrite::rewrite(proto.graph.as_mut().expect("checked above"));
        }
        let dir = graph
            .path
            .parent()
            .and_then(|p| p.to_str())
            .filter(|p| !p.is_empty())
            .unwrap_or(".");
        let onnx = tract_onnx::onnx().with_ignore_value_info(true);
        let ParseResult {
            mut model,
            unresolved_inputs,
            outlets_by_name,
        } = onnx
            .parse(&proto, Some(dir))
            .map_err(|e| ref_err(graph, "parsing", e))?;
        if !unresolved_inputs.is_empty() {
            return Err(ref_err(
                graph,
                "parsing",
                format!("values defined nowhere (sparse initializers?): {unresolved_inputs:?}"),
            ));
        }
        for (ix, outlet) in model.inputs.clone().iter().enumerate() {
            let name = model.node(outlet.node).name.clone();
            let (_, t) = inputs
                .tensors
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| Error::Input {
                    name: name.clone(),
                    reason: "the reference model expects this input but none was prepared".into(),
                })?;
            let dt = if wide && t.dtype().is_float() {
                f64::datum_type()
            } else {
                convert::datum_type(t.dtype())
            };
            let fact = InferenceFact::dt_shape(dt, t.shape().iter().copied().collect::<TVec<_>>());
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
        let typed = model
            .into_typed()
            .map_err(|e| ref_err(graph, "typing", e))?;
        Ok((typed, names))
    }
}

impl Runner for ReferenceRunner {
    fn name(&self) -> String {
        "tract-f64".into()
    }

    fn version(&self) -> String {
        TRACT_VERSION.into()
    }

    fn run(&mut self, graph: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        let mut notes = Vec::new();
        let (typed, names) = match self.parse(graph, inputs, true) {
            Ok(p) => p,
            Err(wide_err) => match self.parse(graph, inputs, false) {
                Ok(p) => {
                    notes.push(format!(
                        "the reference could not load the model rewritten as float64 ({wide_err}); it translated the \
                         float32 model instead, so constants tract folds at import are float32-rounded"
                    ));
                    p
                }
                Err(_) => return Err(wide_err),
            },
        };
        let producers = graph.producers();
        let mut precision: HashMap<usize, RefPrecision> = HashMap::new();
        // Values tract folded into constants while importing were computed in the model's own precision.
        for (i, o) in typed.outputs.iter().enumerate() {
            let node = typed.node(o.node);
            if let (Some(k), Some(&p)) = (node.op_as::<Const>(), producers.get(names[i].as_str())) {
                let is_constant_op = graph.nodes[p].op_type == "Constant";
                let narrow = matches!(k.val().datum_type(), DatumType::F32 | DatumType::F16);
                if !is_constant_op && narrow {
                    let reason = format!(
                        "constant-folded by tract in {:?} at import",
                        k.val().datum_type()
                    )
                    .to_lowercase();
                    mark(&mut precision, Some(p), RefPrecision::Reduced { reason });
                }
            }
        }
        let to64 = |m: &TypedModel, from: DatumType| {
            FloatPrecisionTranslator::new(from, f64::datum_type()).translate_model(m)
        };
        let t64 = to64(&typed, f32::datum_type())
            .and_then(|m| to64(&m, f16::datum_type()))
            .map_err(|e| ref_err(graph, "translating to f64", e))?;
        let out_nodes: Vec<usize> = t64.outputs.iter().map(|o| o.node).collect();
        let plan = SimplePlan::new(t64).map_err(|e| ref_err(graph, "planning", e))?;
        let mut state = SimpleState::new(&plan).map_err(|e| ref_err(graph, "planning", e))?;
        let feeds: TVec<TValue> = plan
            .model()
            .inputs
            .iter()
            .map(|o| {
                let name = &plan.model().node(o.node).name;
                let t = &inputs
                    .tensors
                    .iter()
                    .find(|(n, _)| n == name)
                    .expect("checked in parse")
                    .1;
                convert::to_tract_f64(t)
            })
            .collect();
        let mut tainted: HashMap<usize, String> = HashMap::new();
        let hook = |ctx: &EvalContext,
                    st: Option<&mut (dyn OpState + 'static)>,
                    node: &TypedNode,
                    ins: TVec<TValue>|
         -> TractResult<TVec<TValue>> {
            let idx = onnx_index(&node.name);
            if let Some(src) = node
                .inputs
                .iter()
                .find_map(|i| tainted.get(&i.node).cloned())
            {
                tainted.insert(node.id, src.clone());
                mark(
                    &mut precision,
                    idx,
                    RefPrecision::Unavailable {
                        reason: format!("depends on {src}"),
                    },
                );
                return zeros_for(node);
            }
            if let Some(r) = kernels::eval_own(node, &ins) {
                mark(&mut precision, idx, RefPrecision::F64Phantom);
                return r;
            }
            let op_name = node.op().name();
            if let Some((_, why)) = kernels::F32_INSIDE
                .iter()
                .find(|(k, _)| op_name.contains(k))
            {
                mark(
                    &mut precision,
                    idx,
                    RefPrecision::Reduced {
                        reason: why.to_string(),
                    },
                );
            }
            let mut st = st;
            let first =
                tract_onnx::tract_core::plan::eval(ctx, st.as_deref_mut(), node, ins.clone());
            let err = match first {
                Ok(o) => return Ok(o),
                Err(e) => first_line(&e),
            };
            let retry = cast_all(&ins, f64::datum_type(), f32::datum_type())
                .and_then(|ins32| tract_onnx::tract_core::plan::eval(ctx, st, node, ins32));
            match retry.and_then(|outs| {
                outs.iter()
                    .zip(&node.outputs)
                    .map(|(v, o)| Ok(v.cast_to_dt(o.fact.datum_type)?.into_owned().into_tvalue()))
                    .collect::<TractResult<TVec<TValue>>>()
            }) {
                Ok(o) => {
                    let reason = format!(
                        "no f64 kernel in tract ({}), evaluated in f32",
                        humanize(&err, graph)
                    );
                    mark(&mut precision, idx, RefPrecision::Reduced { reason });
                    Ok(o)
                }
                Err(_) => {
                    let what = idx
                        .and_then(|i| graph.nodes.get(i))
                        .map(|n| format!("{} `{}`", n.op_type, n.name))
                        .unwrap_or(node.name.clone());
                    tainted.insert(node.id, what);
                    mark(
                        &mut precision,
                        idx,
                        RefPrecision::Unavailable {
                            reason: humanize(&err, graph),
                        },
                    );
                    zeros_for(node)
                }
            }
        };
        let outs = state
            .run_plan_with_eval(feeds, hook)
            .map_err(|e| ref_err(graph, "running", format!("{e:#}")))?;
        let mut out = RunOutput {
            notes,
            ..Default::default()
        };
        for ((name, v), node) in names.iter().zip(outs.iter()).zip(&out_nodes) {
            if let Some(src) = tainted.get(node) {
                out.missing
                    .insert(name.clone(), format!("not computable ({src})"));
                continue;
            }
            match convert::from_tract(v) {
                Some(t) => {
                    out.values.insert(name.clone(), t);
                }
                None => {
                    out.missing.insert(
                        name.clone(),
                        format!("element type {:?} is not compared", v.datum_type()),
                    );
                }
            }
        }
        for (i, p) in precision {
            if p != RefPrecision::F64 {
                if let Some(n) = graph.nodes.get(i) {
                    out.precision.insert(n.name.clone(), p);
                }
            }
        }
        let unexposed: HashSet<&str> = names.iter().map(|s| s.as_str()).collect();
        for v in graph.computed_values() {
            if !unexposed.contains(v) {
                out.missing
                    .insert(v.to_string(), "tract does not expose this value".into());
            }
        }
        out.details.insert(
            "precision".into(),
            "f64 (typed model, f32/f16 translated)".into(),
        );
        out.details.insert("tract".into(), TRACT_VERSION.into());
        Ok(out)
    }
}
