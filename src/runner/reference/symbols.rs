//! Shapes decided at run time by data-dependent ops (`NonZero`, a `Range` over computed values) are named by tract
//! with symbols, resolved as the run produces them. Two places where tract's handling fails, patched here:
//! - **Ops that evaluate in a model of their own** (StridedSlice) do not see the run's resolved symbols: shape
//!   values (TDim) are handed to every op with the symbols resolved so far replaced by their values ([`resolved`]).
//! - **A `Range` computed from constants alone** (shape values tract folded, such as `arange(t)` with `t` the
//!   length of an earlier data-dependent `Range`) is sized by symbols other ops define, but tract counts every
//!   `Range` as defining the symbols of its length. When it picks such a `Range` as the definer, the run evaluates it
//!   before the op that really decides the symbol, and the length is undetermined or wrong. Those `Range`s are
//!   wrapped in [`SizedRange`], which defines nothing ([`unmint_sized_ranges`]).
//! - **A data-dependent op whose value no output needs** (a `NonZero` read only through its `Shape`, which tract
//!   folds into a constant) would be pruned from the run, and its symbol never resolved: [`definers`] lists their
//!   outputs, so the run keeps them.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::array::Range;
use tract_onnx::tract_core::ops::konst::Const;

/// Whether `v` is a shape value (TDim) that names a symbol.
pub fn names_symbols(v: &TValue) -> bool {
    v.datum_type() == TDim::datum_type()
        && v.try_as_plain_ram()
            .ok()
            .and_then(|r| {
                r.as_slice::<TDim>()
                    .ok()
                    .map(|d| d.iter().any(|d| !d.symbols().is_empty()))
            })
            .unwrap_or(false)
}

/// `v` with the symbols already resolved in this run replaced by their values, where it is a shape value (TDim)
/// that mentions any.
pub fn resolved(v: TValue, symbols: &SymbolValues) -> TractResult<TValue> {
    if !names_symbols(&v) {
        return Ok(v);
    }
    let dims = v.try_as_plain_ram()?.as_slice::<TDim>()?;
    let values: Vec<TDim> = dims.iter().map(|d| d.eval(symbols)).collect();
    Ok(tract_ndarray::ArrayD::from_shape_vec(v.shape(), values)?
        .into_tensor()
        .into_tvalue())
}

/// tract's `Range`, sized from constants: the same evaluation and facts, but it defines no symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizedRange(pub Range);

impl Op for SizedRange {
    fn name(&self) -> StaticName {
        "Range".into()
    }
    op_as_typed_op!();
}

impl EvalOp for SizedRange {
    op_out_of_plan!();

    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        self.0.eval(ctx, inputs)
    }
}

impl TypedOp for SizedRange {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.0.output_facts(inputs)
    }
    as_op!();
}

/// Whether node `id` is computed from constants alone: no model input and no data-dependent op above it.
fn from_constants(model: &TypedModel, id: usize) -> bool {
    let mut stack: Vec<usize> = model.node(id).inputs.iter().map(|i| i.node).collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        let node = model.node(n);
        if node.op_is::<Const>() {
            continue;
        }
        if node.inputs.is_empty() || node.op.mints_runtime_symbols() {
            return false;
        }
        stack.extend(node.inputs.iter().map(|i| i.node));
    }
    true
}

/// Wraps every `Range` of `model` computed from constants in [`SizedRange`]; returns how many.
pub fn unmint_sized_ranges(model: &mut TypedModel) -> usize {
    let sized: Vec<usize> = model
        .nodes
        .iter()
        .filter(|n| n.op_is::<Range>() && from_constants(model, n.id))
        .map(|n| n.id)
        .collect();
    for &id in &sized {
        let node = &mut model.nodes[id];
        if let Some(r) = node.op_as::<Range>() {
            node.op = Box::new(SizedRange(r.clone()));
        }
    }
    sized.len()
}

/// The outputs of every op of `model` that defines symbols at run time (model inputs aside).
pub fn definers(model: &TypedModel) -> Vec<OutletId> {
    model
        .nodes
        .iter()
        .filter(|n| !n.inputs.is_empty() && n.op.mints_runtime_symbols())
        .flat_map(|n| (0..n.outputs.len()).map(move |slot| OutletId::new(n.id, slot)))
        .collect()
}
