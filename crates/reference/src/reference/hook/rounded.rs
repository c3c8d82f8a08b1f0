//! The evaluator's side of [`super::super::folded`]: in a run that rounds, the float constants tract folded are
//! rounded as the target stores them, the folded nodes reading a rounded operand are computed again from it, and
//! the nodes that read those constants are fed the rounded values.

use std::collections::HashMap;

use tract_onnx::prelude::*;

use super::Evaluator;
use crate::tensor::DType;

impl<'g> Evaluator<'g, '_> {
    /// Recomputes the folded float nodes (`folded`) from their operands as this run rounds them.
    pub fn with_folded(mut self, folded: &'g super::super::folded::Folded) -> Self {
        self.folded = Some(folded);
        self
    }

    /// The folded constants `consts` (tract node id, value; in the ONNX graph's order) as a rounding run sees
    /// them: rounded to the type the target stores each in, a folded node computed again where an operand moved.
    /// The values that changed are fed to the nodes that read them ([`Self::substituted`]).
    pub(super) fn round_constants(&mut self, consts: &mut [(usize, TValue)]) {
        let Some(round) = self.round else { return };
        let by_name: HashMap<String, TValue> = (consts.iter())
            .filter_map(|(id, v)| Some((self.labels.get(id)?.first()?.1.clone(), v.clone())))
            .collect();
        let mut moved: HashMap<String, TValue> = HashMap::new();
        for (id, v) in consts.iter_mut() {
            let Some((_, name)) = self.labels.get(id).and_then(|l| l.first()).cloned() else {
                continue;
            };
            if !self.rounds_folded(*id, &moved) {
                continue;
            }
            let again = self.computed_again(*id, &name, &by_name, &moved);
            let Some(d) = round.get(&name).copied().filter(|d| d.is_float()) else {
                continue;
            };
            let Some(r) = rounded(again.as_ref().unwrap_or(v), d) else {
                continue;
            };
            if &r != v {
                moved.insert(name, r.clone());
                self.substitute.insert(OutletId::new(*id, 0), r.clone());
                *v = r;
            }
        }
    }

    /// Whether constant `id` is a folded float node this run must round: one that computes, or one that copies
    /// elements of an operand that moved (a copy of values the target holds as they are needs no rounding, and a
    /// large folded weight is not copied to find that out).
    fn rounds_folded(&self, id: usize, moved: &HashMap<String, TValue>) -> bool {
        let (Some(folded), Some(&idx)) = (self.folded, self.onnx_of.get(&id)) else {
            return false;
        };
        let (Some(node), Some(onnx)) = (folded.node(idx), self.graph.nodes.get(idx)) else {
            return false;
        };
        !onnx.copies_elements() || node.input.iter().any(|i| moved.contains_key(i))
    }

    /// The value of constant `id` (ONNX value `name`) computed again by its folded node from the operands as this
    /// run has them (`moved` where they moved, else `exact`), when an operand moved.
    fn computed_again(
        &self,
        id: usize,
        name: &str,
        exact: &HashMap<String, TValue>,
        moved: &HashMap<String, TValue>,
    ) -> Option<TValue> {
        let folded = self.folded?;
        let node = folded.node(*self.onnx_of.get(&id)?)?;
        if !node.input.iter().any(|i| moved.contains_key(i)) {
            return None;
        }
        let inputs: Option<Vec<Tensor>> = (node.input.iter())
            .map(|i| match moved.get(i).or_else(|| exact.get(i)) {
                Some(v) => Some(v.clone().into_tensor()),
                None => folded.operand(i).cloned(),
            })
            .collect();
        let out = folded.eval(node, &inputs?);
        let out = out.ok()?;
        out.into_iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// `ins` of `node` with the rounded constants in place of the folded ones.
    pub(super) fn substituted(&self, node: &TypedNode, ins: &mut TVec<TValue>) {
        if self.substitute.is_empty() {
            return;
        }
        for (k, i) in node.inputs.iter().enumerate() {
            if let (Some(v), Some(slot)) = (self.substitute.get(i), ins.get_mut(k)) {
                *slot = v.clone();
            }
        }
    }
}

/// An f64 constant rounded to `d` (still held in f64); `None` for other types.
fn rounded(v: &TValue, d: DType) -> Option<TValue> {
    let mut t = v.clone().into_tensor();
    if t.datum_type() != f64::datum_type() {
        return None;
    }
    let mut view = t.to_plain_array_view_mut::<f64>().ok()?;
    view.iter_mut()
        .for_each(|x| *x = crate::tensor::narrow::round_one(*x, d));
    Some(t.into_tvalue())
}
