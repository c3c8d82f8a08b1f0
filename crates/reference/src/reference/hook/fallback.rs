//! What the hook does where tract has no f64 kernel for a node: tract's evaluation retried in f32 and marked
//! reduced-precision, and where that fails too, the node marked unavailable, with placeholder outputs and everything
//! downstream tainted.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::{EvalContext, OpState};

use super::super::humanize;
use super::{mark, Evaluator};
use crate::RefPrecision;

pub(super) fn first_line(e: &impl std::fmt::Display) -> String {
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

/// Placeholder outputs of a node that is not computed: zeros (empty strings), and a dim the data decides (unknown here) empty.
/// They only ever reach nodes that are not computed either (the taint), never a kernel or the report. Dims of
/// symbols already resolved in this run take their value: tract checks every output against its resolved symbols.
pub(super) fn zeros_for(node: &TypedNode, symbols: &SymbolValues) -> TractResult<TVec<TValue>> {
    node.outputs
        .iter()
        .map(|o| {
            let shape: Vec<usize> = o
                .fact
                .shape
                .iter()
                .map(|d| d.eval(symbols).as_i64().map_or(0, |v| v.max(0) as usize))
                .collect();
            // Strings have no zero: empty ones.
            if o.fact.datum_type == DatumType::String {
                let empty = tract_ndarray::ArrayD::from_elem(shape, String::new());
                return Ok(empty.into_tensor().into_tvalue());
            }
            Ok(Tensor::zero_dt(o.fact.datum_type, &shape)?.into_tvalue())
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

/// Ops tract evaluates for every numeric type, so an f64 failure would not pass in f32 either: binary
/// arithmetic and comparisons, and axis changes (reshape, transpose, added or removed axes).
fn never_narrower(node: &TypedNode) -> bool {
    use tract_onnx::tract_core::ops::{binary::TypedBinOp, change_axes::AxisOp};
    node.op_is::<TypedBinOp>() || node.op_is::<AxisOp>()
}

impl Evaluator<'_, '_> {
    /// tract's own evaluation; where it has no f64 kernel, retried in f32 and marked reduced-precision, and where
    /// that fails too, marked unavailable with everything downstream.
    pub(super) fn eval_tract(
        &mut self,
        ctx: &EvalContext,
        mut st: Option<&mut (dyn OpState + 'static)>,
        node: &TypedNode,
        ins: TVec<TValue>,
        idx: Option<usize>,
    ) -> TractResult<TVec<TValue>> {
        if never_narrower(node) {
            // Without a kept copy the op may reuse its inputs' buffers in place (a clone would force a deep copy).
            return tract_onnx::tract_core::plan::eval(ctx, st, node, ins);
        }
        let first = tract_onnx::tract_core::plan::eval(ctx, st.as_deref_mut(), node, ins.clone());
        let err = match first {
            Ok(o) => return Ok(o),
            Err(e) => humanize(&first_line(&e), self.graph),
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
                let reason = format!("no f64 kernel in tract ({err}), evaluated in f32");
                mark(&mut self.precision, idx, RefPrecision::Reduced { reason });
                Ok(o)
            }
            Err(_) => self.give_up(node, idx, self.describe(node, idx), err),
        }
    }

    /// "Op `name`" of the ONNX node behind tract node `node`.
    pub(super) fn describe(&self, node: &TypedNode, idx: Option<usize>) -> String {
        idx.and_then(|i| self.graph.nodes.get(i))
            .map(|n| format!("{} `{}`", n.op_type, n.name))
            .unwrap_or(node.name.clone())
    }

    /// Marks `node` unavailable for `reason`, taints what depends on it (naming `source`), and hands on zeros
    /// that nothing downstream will report as values.
    pub(super) fn give_up(
        &mut self,
        node: &TypedNode,
        idx: Option<usize>,
        source: String,
        reason: String,
    ) -> TractResult<TVec<TValue>> {
        self.tainted.insert(node.id, source);
        mark(
            &mut self.precision,
            idx,
            RefPrecision::Unavailable { reason },
        );
        zeros_for(node, &self.symbols)
    }
}
