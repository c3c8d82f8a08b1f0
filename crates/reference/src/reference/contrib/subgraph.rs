//! Graph attributes run as models of their own: a `Loop`'s body ([`super::looping`]), FlexAttention's `score_mod`
//! and `prob_mod` ([`super::flex_attention`]). tract cannot evaluate a graph attribute of a node it does not know,
//! so the kernel parses the graph with tract (phantom's kernels registered), types it for the values it is fed,
//! widens it to f64 like the whole model, and runs it.
//!
//! Before parsing, [`explicit`] appends every value the graphs read from the outer scope to the node's inputs, so
//! tract wires them like any input, and records the node's own input count and the model's opset imports (the
//! graphs are parsed with them) as attributes.

use tract_onnx::pb::{AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto};
use tract_onnx::tract_hir::internal::*;

use super::node::Node;

/// Attribute holding the node's ONNX input count (inputs past it are outer-scope reads).
pub const ARITY: &str = "phantom_arity";
/// Attribute holding the model's opset imports, `domain=version` each, to parse the graphs with.
const OPSETS: &str = "phantom_opsets";

/// The graph attribute `name` of `n`.
pub fn graph<'a>(n: &'a NodeProto, name: &str) -> Option<&'a GraphProto> {
    n.attribute
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.g.as_ref())
}

/// Makes the outer-scope reads of `n`'s graph attributes `graphs` explicit inputs of `n` (once each), and records
/// its input count and the model's `opsets`.
pub fn explicit(n: &mut NodeProto, graphs: &[&str], opsets: &[OperatorSetIdProto]) {
    let mut outer: Vec<String> = vec![];
    for g in graphs.iter().filter_map(|name| graph(n, name)) {
        for name in crate::model::surgery::outer_reads(g) {
            if !outer.contains(&name) {
                outer.push(name);
            }
        }
    }
    n.attribute.push(AttributeProto {
        name: ARITY.into(),
        r#type: 2,
        i: n.input.len() as i64,
        ..Default::default()
    });
    n.attribute.push(AttributeProto {
        name: OPSETS.into(),
        r#type: 8,
        strings: opsets
            .iter()
            .map(|o| format!("{}={}", o.domain, o.version).into_bytes())
            .collect(),
        ..Default::default()
    });
    n.input.extend(outer);
}

/// A graph attribute typed for one set of inputs, and its f64 plan.
pub struct Plan {
    /// Kept alive beside the plan: the symbols typing names live in their scopes.
    _models: (InferenceModel, TypedModel),
    pub plan: Arc<TypedSimplePlan>,
    /// Whether every value's shape is known (no symbol left for the run to decide).
    pub concrete: bool,
}

/// Whether input `t` is given to typing as a value when `pin`: a small non-float tensor.
fn pinned(t: &Tensor) -> bool {
    !t.datum_type().is_float() && t.len() <= 64
}

/// `t` as a graph feeds it: a shape value tract holds as `TDim` (an outer count computed from shapes) as i64.
pub fn plain(t: &Tensor) -> TractResult<Tensor> {
    match t.datum_type() {
        DatumType::TDim => Ok(t.cast_to::<i64>()?.into_owned()),
        _ => Ok(t.clone()),
    }
}

/// Graph attribute `name` of `n` as a runnable tract model, typed for `feed`: the graph's own inputs, then the
/// outer-scope values [`explicit`] made inputs of `n`. Typing reads their types and shapes, and with `pin` the
/// values of the small integer ones.
pub fn plan(n: &Node, name: &str, feed: &[Tensor], pin: bool) -> TractResult<Plan> {
    let what = format!("the `{name}` graph of {} `{}`", n.op(), n.proto.name);
    let mut g = graph(&n.proto, name)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("{} `{}` has no `{name}` graph", n.op(), n.proto.name))?;
    let arity = n.req_int(ARITY)? as usize;
    for outer in n.proto.input.get(arity..).unwrap_or_default() {
        g.input.push(crate::model::surgery::untyped_value(outer));
    }
    ensure!(
        g.input.len() == feed.len(),
        "{what} takes {} inputs, is given {}",
        g.input.len(),
        feed.len()
    );
    // tract's parser wants a type on every graph input: the outer reads have none, a body may omit them.
    for (input, t) in g.input.iter_mut().zip(feed) {
        if input.r#type.is_none() {
            let code = elem_code(t.datum_type()).ok_or_else(|| {
                anyhow::anyhow!(
                    "{what}: input `{}` of type {:?}",
                    input.name,
                    t.datum_type()
                )
            })?;
            *input = crate::model::surgery::value_info(&input.name, code, Some(t.shape().to_vec()));
        }
    }
    let opset_import = n
        .proto
        .attribute
        .iter()
        .find(|a| a.name == OPSETS)
        .map(|a| a.strings.iter().filter_map(|s| opset(s)).collect())
        .unwrap_or_default();
    let proto = crate::model::surgery::Header::with_opsets(opset_import).model("phantom", g);
    plan_model(&proto, feed, pin).with_context(|| what.clone())
}

/// A one-graph model (its inputs typed or not) as a runnable tract model, typed for `feed` (with `pin`, the small
/// integer inputs as values) and widened to f64, phantom's kernels registered.
pub fn plan_model(proto: &ModelProto, feed: &[Tensor], pin: bool) -> TractResult<Plan> {
    let mut onnx = tract_onnx::onnx().with_ignore_value_info(true);
    onnx.provider = std::sync::Arc::new(super::super::files::Files);
    super::register(&mut onnx);
    let mut model = onnx.parse(proto, None).context("parsing")?.model;
    for (ix, t) in feed.iter().enumerate() {
        let f = match pin && pinned(t) {
            true => InferenceFact::from(t.clone()),
            false => InferenceFact::dt_shape(
                t.datum_type(),
                t.shape().iter().copied().collect::<TVec<_>>(),
            ),
        };
        model.set_input_fact(ix, f)?;
    }
    typed(model).context("typing")
}

/// `model` typed and widened to f64, every value an output (after the graph's own): as in the whole run, tract
/// would drop an op whose value only a `Shape` reads, and with it the run-time symbol that op decides.
fn typed(mut model: InferenceModel) -> TractResult<Plan> {
    let mut outs = model.output_outlets()?.to_vec();
    let every: Vec<OutletId> = model
        .nodes()
        .iter()
        .flat_map(|n| (0..n.outputs.len()).map(move |k| OutletId::new(n.id, k)))
        .filter(|o| !outs.contains(o))
        .collect();
    outs.extend(every);
    model.select_output_outlets(&outs)?;
    let typed = model.clone().into_typed()?;
    let mut wide = super::super::widen::to_f64(&typed)?;
    super::super::symbols::unmint_sized_ranges(&mut wide);
    let concrete = wide
        .nodes()
        .iter()
        .all(|n| n.outputs.iter().all(|o| o.fact.shape.is_concrete()));
    let plan = super::super::symbols::plan(wide)?;
    Ok(Plan {
        _models: (model, typed),
        plan,
        concrete,
    })
}

/// Runs `plan` on `feed` with phantom's own kernels; returns the graph's outputs (and every other value after them).
pub fn run(plan: &Plan, feed: Vec<Tensor>) -> TractResult<TVec<TValue>> {
    let feed = feed.into_iter().map(|t| t.into_tvalue()).collect();
    super::super::kernels::run_with_own(&plan.plan, feed)
}

/// ONNX's element type code for `dt`.
pub fn elem_code(dt: DatumType) -> Option<i32> {
    Some(match dt {
        DatumType::F32 => 1,
        DatumType::U8 => 2,
        DatumType::I8 => 3,
        DatumType::U16 => 4,
        DatumType::I16 => 5,
        DatumType::I32 => 6,
        DatumType::I64 => 7,
        DatumType::Bool => 9,
        DatumType::F16 => 10,
        DatumType::F64 => 11,
        DatumType::U32 => 12,
        DatumType::U64 => 13,
        _ => return None,
    })
}

fn opset(s: &[u8]) -> Option<OperatorSetIdProto> {
    let s = std::str::from_utf8(s).ok()?;
    let (domain, version) = s.rsplit_once('=')?;
    Some(OperatorSetIdProto {
        domain: domain.into(),
        version: version.parse().ok()?,
    })
}
