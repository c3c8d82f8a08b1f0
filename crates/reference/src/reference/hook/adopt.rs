//! The evaluator's side of discrete decisions ([`decide`]): which tract nodes compute a decision the target made
//! too, from that decision's own input, and taking the target's decisions there.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::EvalContext;

use super::super::{decide, kernels, qop, select, thresholds};
use super::Evaluator;
use crate::tensor::formats::Format;

/// `node` evaluated again on other inputs (a decision's input moved by its tolerance): phantom's kernel where it
/// has one, else tract's (decisions are stateless).
fn reeval(ctx: &EvalContext, node: &TypedNode, mut ins: TVec<TValue>) -> TractResult<TVec<TValue>> {
    if let Some(op) = node.op_as::<super::super::contrib::op::ContribOp>() {
        return op.run(&ins);
    }
    if let Some(r) = kernels::eval_own(node, &mut ins) {
        return r;
    }
    tract_onnx::tract_core::plan::eval(ctx, None, node, ins)
}

/// The narrow format a decision of `node` rounds onto: a `Cast`'s `to`, or the format the model-format pass gave a
/// `QuantizeLinear` ([`super::super::formats`]); `None` for a decision onto integers of tract's own types.
fn grid(node: &TypedNode) -> Option<Format> {
    let c = node.op_as::<super::super::contrib::op::ContribOp>()?;
    let code = match c.node.op() {
        "Cast" => c.node.int("to", 0),
        "QuantizeLinear" => c.node.int(super::super::formats::FORMAT_ATTR, 0),
        _ => return None,
    };
    Format::from_onnx(code as i32)
}

impl Evaluator<'_, '_> {
    /// Rounds near-ties to the other way on `node`'s quantization when asked to ([`decide::Ties`]).
    pub fn with_ties(mut self, ties: Option<decide::Ties>) -> Self {
        self.ties = ties;
        self
    }

    /// Whether `node` is a quantization whose near-ties this run rounds the other way.
    pub(super) fn ties_at(&self, node: &TypedNode) -> bool {
        self.ties.is_some()
            && (node.op_as::<super::super::contrib::op::ContribOp>())
                .is_some_and(|c| c.node.op() == "QuantizeLinear")
    }

    /// Rounds the near-ties of quantization `node` to the other neighbour.
    pub(super) fn flip_ties(
        &mut self,
        ctx: &EvalContext,
        node: &TypedNode,
        ins: &TVec<TValue>,
        out: &mut TVec<TValue>,
    ) {
        if let Some(t) = self.ties {
            self.flipped += decide::flip_ties(t, ins, out, |xs| reeval(ctx, node, xs));
        }
    }

    /// Whether tract node `node` computes an ONNX decision the target made too, from that decision's own input.
    pub(super) fn decides(&self, node: &TypedNode) -> bool {
        let (Some(d), Some(onnx)) = (
            self.decisions,
            (self.onnx_of.get(&node.id)).and_then(|&i| self.graph.nodes.get(i)),
        ) else {
            return false;
        };
        let named = self.labels.get(&node.id);
        let decided = named.is_some_and(|ls| ls.iter().any(|(_, n)| d.contains_key(n)));
        if !decided || self.tainted.contains_key(&node.id) {
            return false;
        }
        let op = onnx.op_type.as_str();
        // A QOperator node is rewritten to dequantize → op → quantize: its decision is the final QuantizeLinear's,
        // on the float the op computed.
        if qop::OPS.contains(&op) {
            return (node.op_as::<super::super::contrib::op::ContribOp>())
                .is_some_and(|c| c.node.op() == "QuantizeLinear");
        }
        let paired = op != "DequantizeLinear" || self.pairs.contains_key(&onnx.index);
        paired
            && (decide::OPS.contains(&op) || thresholds::OPS.contains(&op) || op == "Resize")
            && self.reads_first_input(node, onnx.inputs.first())
    }

    /// Whether tract's first input of `node` is the ONNX value `want` (a labelled value or a graph input).
    fn reads_first_input(&self, node: &TypedNode, want: Option<&String>) -> bool {
        let (Some(i), Some(want)) = (node.inputs.first(), want) else {
            return false;
        };
        match self.labels.get(&i.node) {
            Some(ls) => ls.iter().any(|(s, n)| *s == i.slot && n == want),
            None => self.graph.inputs.iter().any(|v| &v.name == want),
        }
    }

    /// Takes the target's decisions on `node`'s outputs where they lie within the noise of a boundary.
    pub(super) fn adopt(
        &mut self,
        ctx: &EvalContext,
        node: &TypedNode,
        ins: &TVec<TValue>,
        out: &mut TVec<TValue>,
    ) {
        let (Some(d), Some(&idx)) = (self.decisions, self.onnx_of.get(&node.id)) else {
            return;
        };
        let onnx = &self.graph.nodes[idx];
        let names = self.labels.get(&node.id).cloned().unwrap_or_default();
        let found = match onnx.op_type.as_str() {
            "DynamicQuantizeLinear" => decide::adopt_dynamic(d, (&names, &onnx.outputs), ins, out),
            "DequantizeLinear" => self.adopt_pair(onnx, &names, ins, out),
            "QuantizeLinear" if self.pairs.values().any(|&q| q == idx) => {
                let paired = self.adopt_paired_quantize(&names, ins, out);
                match paired.is_empty() {
                    true => {
                        decide::adopt_monotone(d, &names, (ins, false, grid(node)), out, |xs| {
                            reeval(ctx, node, xs)
                        })
                    }
                    false => paired,
                }
            }
            "Resize" => super::super::resize_int::adopt(d, &names, node, ins, out),
            op if qop::OPS.contains(&op) => {
                let mut found = decide::adopt_monotone(d, &names, (ins, false, None), out, |xs| {
                    reeval(ctx, node, xs)
                });
                decide::faithful_levels(d, &names, ins, out, &mut found);
                found
            }
            op if thresholds::OPS.contains(&op) => {
                thresholds::adopt(d, &names, ins, out, |xs| reeval(ctx, node, xs))
            }
            op => decide::adopt_monotone(d, &names, (ins, op == "Cast", grid(node)), out, |xs| {
                reeval(ctx, node, xs)
            }),
        };
        self.adopted.extend(found);
    }

    /// A QDQ pair's `QuantizeLinear` reconciled as its pair is ([`decide::adopt_paired_quantize`]); nothing when it
    /// has scales per axis or block, or levels of another width.
    fn adopt_paired_quantize(
        &self,
        names: &[(usize, String)],
        ins: &TVec<TValue>,
        out: &mut TVec<TValue>,
    ) -> Vec<(String, decide::Adopted)> {
        let Some(d) = self.decisions else {
            return vec![];
        };
        let mut found = vec![];
        for (slot, name) in names {
            let (Some(dec), Some(o)) = (d.get(name), out.get_mut(*slot)) else {
                continue;
            };
            if let Some(a) = decide::adopt_paired_quantize(dec, ins, o) {
                found.push((name.clone(), a));
            }
        }
        found
    }

    /// A QDQ pair's `DequantizeLinear` reconciled on the pair's float input ([`decide::adopt_pair`]).
    fn adopt_pair(
        &self,
        onnx: &crate::model::Node,
        names: &[(usize, String)],
        ins: &TVec<TValue>,
        out: &mut TVec<TValue>,
    ) -> Vec<(String, decide::Adopted)> {
        let q = (self.pairs.get(&onnx.index)).and_then(|&q| self.graph.nodes.get(q));
        let x = q
            .and_then(|q| q.inputs.first())
            .and_then(|i| self.values.get(i));
        let (Some(d), Some(x)) = (self.decisions, x) else {
            return vec![];
        };
        let mut found = vec![];
        for (slot, name) in names {
            let (Some(dec), Some(o)) = (d.get(name), out.get_mut(*slot)) else {
                continue;
            };
            if let Some(a) = decide::adopt_pair(dec, x, ins, o) {
                found.push((name.clone(), a));
            }
        }
        found
    }
}

impl<'g, 's> Evaluator<'g, 's> {
    /// Reconciles the selections named in `s` with the target's ([`super::select`]); their inputs are kept.
    pub fn with_selections(
        mut self,
        s: std::collections::HashMap<String, select::Selection>,
    ) -> Self {
        for sel in s.values() {
            self.needed
                .extend(sel.inputs.iter().filter(|i| !i.is_empty()).cloned());
        }
        self.selections = s;
        self
    }

    /// Takes the target's selections (ArgMax, TopK indices, comparison masks) on `id`'s outputs where the values
    /// chosen between lie within their noise ([`select`]).
    pub(super) fn adopt_selections(&mut self, id: usize, out: &mut TVec<TValue>) {
        let Some(d) = self.decisions.filter(|_| !self.selections.is_empty()) else {
            return;
        };
        if self.tainted.contains_key(&id) {
            return;
        }
        let names = self.labels.get(&id).cloned().unwrap_or_default();
        for (slot, name) in &names {
            let (Some(sel), Some(dec)) = (self.selections.get(name), d.get(name)) else {
                continue;
            };
            if let Some(a) = self.reconcile(sel, dec, (&names, *slot), out) {
                self.adopted.insert(name.clone(), a);
            }
        }
    }

    /// One selection reconciled: its decision at output `slot` (and TopK's values beside it) replaced.
    fn reconcile(
        &self,
        sel: &select::Selection,
        dec: &decide::Decision,
        (names, slot): (&[(usize, String)], usize),
        out: &mut TVec<TValue>,
    ) -> Option<decide::Adopted> {
        let input = |k: usize| {
            let v = self.values.get(sel.inputs.get(k)?)?;
            select::array(v)
        };
        let x = input(0)?;
        let ours = select::array(out.get(slot)?)?;
        let flat: Vec<f64> = ours.iter().copied().collect();
        let (taken, a) = match sel.op.as_str() {
            "ArgMax" | "ArgMin" => {
                select::indices(dec, &x, select::axis_of(sel.axis, x.ndim())?, &flat)?
            }
            "TopK" => {
                let axis = select::axis_of(sel.axis, x.ndim())?;
                let want = sel.outputs.first()?;
                let vs = names.iter().find(|(_, n)| n == want).map(|(s, _)| *s)?;
                let mut values = select::array(out.get(vs)?)?;
                let (taken, a) = select::top_k(dec, &x, axis, &mut values, &ours)?;
                out[vs] = decide::shaped_like(&out[vs], values.iter().copied().collect()).ok()?;
                (taken.iter().copied().collect(), a)
            }
            _ => select::compare(dec, &x, &input(1)?, &flat, ours.shape())?,
        };
        out[slot] = decide::shaped_like(&out[slot], taken).ok()?;
        Some(a)
    }
}
