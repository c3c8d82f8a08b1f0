//! The tract side of a stored weight: the op its node is built as, which widens the weight each time the plan runs
//! it and is never evaluated while typing.

use std::sync::Arc;

use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_hir::internal::*;

use super::{Source, OP, SOURCES};

/// How `model` holds its weights, in words: how many are kept as stored and their bytes, or that all are widened.
pub fn held(model: &TypedModel) -> String {
    let stored: Vec<&Source> = (model.nodes.iter())
        .filter_map(|n| n.op_as::<StoredOp>())
        .map(|op| &*op.source)
        .collect();
    match stored.len() {
        0 => "every weight widened to f64 up front".into(),
        n => format!(
            "{n} weight(s) kept as stored ({}), widened to f64 as each is used",
            crate::units::fmt_size(stored.iter().map(|s| s.stored_bytes()).sum())
        ),
    }
}

/// Builds the tract op of a stored weight's node (registered under [`OP`]).
pub fn build(
    _ctx: &ParsingContext,
    proto: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let key = (proto.attribute.iter())
        .find(|a| a.name == "key")
        .map(|a| a.i as u64)
        .context("a stored weight without its key")?;
    let source = (SOURCES
        .lock()
        .map_err(|_| anyhow!("the stored weights were poisoned"))?)
    .get(&key)
    .cloned()
    .with_context(|| format!("stored weight {key} is not registered"))?;
    Ok((expand(StoredOp { source }), vec![]))
}

/// A weight kept as stored, widened to f64 each time it runs.
#[derive(Debug, Clone)]
pub struct StoredOp {
    source: Arc<Source>,
}

impl PartialEq for StoredOp {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.source, &other.source)
    }
}
impl Eq for StoredOp {}

impl Op for StoredOp {
    fn name(&self) -> StaticName {
        OP.into()
    }
    op_as_typed_op!();
}

impl EvalOp for StoredOp {
    // Never evaluated while typing or folded: that would hold the weight in f64 for the whole run.
    not_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, _inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        Ok(tvec!(self.source.widen()?.into_tvalue()))
    }
}

impl TypedOp for StoredOp {
    fn output_facts(&self, _inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        Ok(tvec!(f64::datum_type().fact(&self.source.dims)))
    }

    as_op!();
}

impl Expansion for StoredOp {
    fn name(&self) -> StaticName {
        OP.into()
    }

    fn runs_out_of_plan(&self) -> bool {
        false
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        check_input_arity(inputs, 0)?;
        check_output_arity(outputs, 1)?;
        s.equals(&outputs[0].datum_type, f64::datum_type())?;
        let dims: TVec<TDim> = self.source.dims.iter().map(|&d| d.to_dim()).collect();
        s.equals(&outputs[0].shape, ShapeFactoid::from(dims))?;
        Ok(())
    }

    fn wire(
        &self,
        prefix: &str,
        model: &mut TypedModel,
        _inputs: &[OutletId],
    ) -> TractResult<TVec<OutletId>> {
        model.wire_node(prefix, self.clone(), &[])
    }
}
