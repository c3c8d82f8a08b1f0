//! A stand-in's own kernel run on the run's concrete inputs ([`ContribOp::run_original`]), where phantom has one:
//! its outputs are the reference's when they have the shapes the target's run gave. A `NonMaxSuppression` whose
//! selection differs from the target's (boxes tied in float32 visited in another order) is reconciled with it
//! ([`nms_settle`]): the target's selection is taken and counted where the noise explains every choice. Where it
//! does not, the node's value is compared as the reference selects (a difference of this node's own), and what
//! follows computes on from the target's selection.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::TypedNode;

use super::{mark, Evaluator};
use crate::reference::contrib::nms_settle::{self, Window};
use crate::reference::contrib::op::ContribOp;
use crate::reference::contrib::standin;
use crate::RefPrecision;

impl Evaluator<'_, '_> {
    /// The outputs of stand-in `op` computed in f64 (None: it stands in as it is).
    pub(super) fn eval_original(
        &mut self,
        node: &TypedNode,
        idx: Option<usize>,
        op: &ContribOp,
        ins: &[TValue],
    ) -> Option<TVec<TValue>> {
        if let Some(o) = self.settle_nms(node, idx, op, ins) {
            return Some(o);
        }
        let o = op.run_original(ins)?;
        mark(&mut self.precision, idx, RefPrecision::F64Phantom);
        Some(o)
    }

    /// A stand-in `NonMaxSuppression` whose target's selection is at hand, reconciled with its f64 selection.
    fn settle_nms(
        &mut self,
        node: &TypedNode,
        idx: Option<usize>,
        op: &ContribOp,
        ins: &[TValue],
    ) -> Option<TVec<TValue>> {
        let (orig, _) =
            standin::original(&op.node).filter(|(n, _)| n.op() == "NonMaxSuppression")?;
        let labels = self.labels.get(&node.id)?;
        let name = labels.iter().find(|(slot, _)| *slot == 0)?.1.clone();
        let dec = self.decisions?.get(&name)?;
        let theirs = op.run(ins).ok()?;
        let rows = selection(theirs.first()?)?;
        let tensors: Vec<&Tensor> = ins.iter().map(|v| &**v).collect();
        let by_slot: Vec<Option<&Tensor>> = (orig.by_slot(&tensors).into_iter())
            .map(|t| t.copied())
            .collect();
        let w = Window {
            atol: dec.atol,
            rtol: dec.rtol,
            box_atol: dec.noise_atol(),
        };
        let (a, ours) = nms_settle::settle(&orig, &by_slot, &rows, w).ok()?;
        mark(&mut self.precision, idx, RefPrecision::F64Phantom);
        if a.beyond > 0 {
            // Compared as the reference selects; what follows computes on from the target's selection, so the
            // difference is this node's own.
            let flat: Vec<i64> = ours.iter().flatten().copied().collect();
            let own = tract_ndarray::Array2::from_shape_vec((ours.len(), 3), flat).ok()?;
            let own = own
                .into_tensor()
                .cast_to_dt(theirs[0].datum_type())
                .ok()?
                .into_owned();
            self.own.insert(node.id, tvec!(own.into_tvalue()));
        }
        if a.flips + a.beyond > 0 {
            self.adopted.insert(name, a);
        }
        Some(theirs)
    }
}

/// A selection's (batch, class, box) rows.
fn selection(v: &TValue) -> Option<Vec<[i64; 3]>> {
    let t = v.cast_to::<i64>().ok()?;
    let flat: Vec<i64> = t
        .to_plain_array_view::<i64>()
        .ok()?
        .iter()
        .copied()
        .collect();
    (v.rank() == 2 && flat.len().is_multiple_of(3))
        .then(|| flat.chunks(3).map(|r| [r[0], r[1], r[2]]).collect())
}
