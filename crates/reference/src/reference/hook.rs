//! The per-node evaluation hook of the reference run: phantom's own f64 kernels, `If` bodies with those kernels,
//! ONNX-level f64 implementations of ops tract fuses into f32-only kernels (LSTM, GRU), the f32 fallback that marks a
//! node "reduced-precision", and the taint that marks everything downstream of an unavailable node.

use std::collections::HashMap;

use rayon::prelude::*;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::{EvalContext, OpState};
use tract_onnx::tract_core::ops::logic::IfThenElse;

use super::{decide, humanize, kernels};
use fallback::first_line;

pub(super) mod accuracy;
mod adopt;
mod fallback;
mod original;
mod rounded;
use crate::model::Graph;
use crate::RefPrecision;

/// Rank for merging precisions of one ONNX node (its tract nodes may differ).
pub fn rank(p: &RefPrecision) -> u8 {
    match p {
        RefPrecision::F64 => 0,
        RefPrecision::F64Phantom => 1,
        RefPrecision::Reduced { .. } => 2,
        RefPrecision::Seeded { .. } => 3,
        RefPrecision::Unavailable { .. } => 4,
    }
}

pub fn mark(map: &mut HashMap<usize, RefPrecision>, idx: Option<usize>, p: RefPrecision) {
    if let Some(i) = idx {
        let cur = map.entry(i).or_insert(RefPrecision::F64);
        if rank(&p) > rank(cur) {
            *cur = p;
        }
    }
}

/// Receives each reference value by ONNX name as soon as it is computed, or why it could not be.
pub type Sink<'s> = dyn FnMut(&str, Result<crate::tensor::Tensor, String>) + 's;

/// State of one reference run, consulted for every tract node.
pub struct Evaluator<'g, 's> {
    sink: &'s mut Sink<'s>,
    /// Names already handed to the sink.
    pub emitted: std::collections::HashSet<String>,
    /// Names whose values decisions and selections read again (kept in `values`).
    needed: std::collections::HashSet<String>,
    /// Values computed so far, by ONNX name (those `needed`).
    values: HashMap<String, TValue>,
    graph: &'g Graph,
    /// tract node id -> ONNX node index.
    onnx_of: HashMap<usize, usize>,
    /// tract node id -> (output slot, ONNX value name) for every captured value.
    labels: HashMap<usize, Vec<(usize, String)>>,
    /// How each ONNX node was computed, by index.
    pub precision: HashMap<usize, RefPrecision>,
    /// tract node id -> the ONNX node whose failure made it uncomputable.
    pub tainted: HashMap<usize, String>,
    /// Element type each labelled value is rounded to (emulated low-precision run).
    round: Option<&'g super::Rounding>,
    /// ONNX nodes tract imports unfaithfully, with the reason (computed as unavailable).
    unfaithful: HashMap<usize, String>,
    /// The symbols resolved so far in this run.
    symbols: SymbolValues,
    /// Constants naming symbols not resolved yet (see [`Self::finish`]).
    deferred: Vec<(usize, TValue)>,
    /// The target's discrete decisions the run may adopt ([`decide`]).
    decisions: Option<&'g decide::Decisions>,
    /// What it adopted, by value name.
    pub adopted: HashMap<String, decide::Adopted>,
    /// QDQ pairs: a DequantizeLinear's ONNX index → the QuantizeLinear's feeding it.
    pairs: HashMap<usize, usize>,
    /// Selections (ArgMax, TopK, comparisons) the target decided, by the decided value's name ([`super::select`]).
    selections: HashMap<String, super::select::Selection>,
    /// Near-ties of every quantization rounded the other way ([`decide::Ties`]), and how many elements moved.
    ties: Option<decide::Ties>,
    pub flipped: u64,
    /// `MatMulNBits` at `accuracy_level = 4` computed as ONNX Runtime's CPU kernel does ([`accuracy`]).
    int8_a: bool,
    /// The folded float nodes a rounding run computes again ([`super::folded`]), and the rounded constants fed in
    /// place of the folded ones, by tract outlet.
    folded: Option<&'g super::folded::Folded>,
    substitute: HashMap<OutletId, TValue>,
    /// Nodes whose own outputs are compared in place of those handed on ([`original`]), by tract node id.
    own: HashMap<usize, TVec<TValue>>,
}

impl<'g, 's> Evaluator<'g, 's> {
    pub fn new(
        graph: &'g Graph,
        onnx_of: HashMap<usize, usize>,
        labels: HashMap<usize, Vec<(usize, String)>>,
        precision: HashMap<usize, RefPrecision>,
        sink: &'s mut Sink<'s>,
    ) -> Evaluator<'g, 's> {
        Evaluator {
            sink,
            emitted: Default::default(),
            needed: Default::default(),
            values: HashMap::new(),
            graph,
            onnx_of,
            labels,
            precision,
            tainted: HashMap::new(),
            round: None,
            unfaithful: HashMap::new(),
            symbols: SymbolValues::default(),
            deferred: vec![],
            decisions: None,
            adopted: HashMap::new(),
            pairs: HashMap::new(),
            selections: HashMap::new(),
            ties: None,
            flipped: 0,
            int8_a: false,
            folded: None,
            substitute: HashMap::new(),
            own: HashMap::new(),
        }
    }

    /// Adopts the target's discrete decisions within the noise of their boundaries ([`decide`]).
    pub fn with_decisions(mut self, decisions: Option<&'g decide::Decisions>) -> Self {
        self.decisions = decisions.filter(|d| !d.is_empty());
        // A QDQ pair's decision is judged on the pair's float input: keep it.
        let (d, producers) = (self.decisions, self.graph.producers());
        for n in self.graph.nodes.iter() {
            let Some(q) = decide::paired_quantize(self.graph, &producers, n) else {
                continue;
            };
            self.pairs.insert(n.index, q.index);
            if n.outputs
                .first()
                .is_some_and(|o| d.is_some_and(|d| d.contains_key(o)))
            {
                self.needed.extend(q.inputs.first().cloned());
            }
        }
        self
    }

    /// ONNX nodes whose tract import departs from the ONNX definition: marked unavailable, never computed.
    pub fn with_unfaithful(mut self, unfaithful: HashMap<usize, String>) -> Self {
        self.unfaithful = unfaithful;
        self
    }

    /// Rounds every labelled value to the element type `round` names for it, before it is used downstream.
    pub fn with_rounding(mut self, round: Option<&'g super::Rounding>) -> Self {
        self.round = round;
        self
    }

    fn round_outputs(&self, id: usize, out: &mut TVec<TValue>) -> TractResult<()> {
        let (Some(round), Some(names)) = (self.round, self.labels.get(&id)) else {
            return Ok(());
        };
        for (slot, name) in names {
            let (Some(&d), Some(v)) = (round.get(name), out.get_mut(*slot)) else {
                continue;
            };
            if v.datum_type() != f64::datum_type() {
                continue;
            }
            // Taken out of the slot, the value is usually unshared and rounds in place, without a copy.
            let mut t = std::mem::replace(v, tensor0(0f64).into_tvalue()).into_tensor();
            let mut view = t.to_plain_array_view_mut::<f64>()?;
            match view.as_slice_mut() {
                Some(s) => s
                    .par_chunks_mut(1 << 14)
                    .for_each(|c| crate::tensor::narrow::round_slice(c, d)),
                None => view
                    .iter_mut()
                    .for_each(|x| *x = crate::tensor::narrow::round_one(*x, d)),
            }
            *v = t.into_tvalue();
        }
        Ok(())
    }

    /// Seeds the captured values with the constants of `model` (they never pass through the hook).
    pub fn with_constants(mut self, model: &TypedModel) -> Self {
        let mut consts: Vec<(usize, TValue)> = self
            .labels
            .keys()
            .filter_map(|&id| {
                let k = model
                    .node(id)
                    .op_as::<tract_onnx::tract_core::ops::konst::Const>()?;
                Some((id, k.val().clone().into_tvalue()))
            })
            .collect();
        // In the ONNX graph's order, as computed values arrive: a constant's operands are handed on before it (the
        // comparison scales a value's tolerance by its operands'), the same way in every run.
        consts.sort_by_key(|(id, _)| (self.onnx_of.get(id).copied().unwrap_or(usize::MAX), *id));
        self.round_constants(&mut consts);
        for (id, v) in consts {
            // A constant tract folded from a node it imports unfaithfully is not a value to hand on.
            let idx = self.onnx_of.get(&id).copied();
            if let Some(reason) = idx.and_then(|i| self.unfaithful.get(&i)).cloned() {
                let what = self
                    .graph
                    .nodes
                    .get(idx.unwrap_or(0))
                    .map(|n| format!("{} `{}`", n.op_type, n.name));
                self.tainted.insert(id, what.unwrap_or_default());
                mark(
                    &mut self.precision,
                    idx,
                    RefPrecision::Unavailable { reason },
                );
            }
            // A shape value naming a symbol the run decides is handed on once the run has resolved it.
            if super::symbols::names_symbols(&v) {
                self.deferred.push((id, v));
            } else {
                self.emit(id, &tvec!(v));
            }
        }
        self
    }

    /// Hands on the constants deferred until the run resolved their symbols.
    pub fn finish(&mut self) {
        for (id, v) in std::mem::take(&mut self.deferred) {
            let v = super::symbols::resolved(v.clone(), &self.symbols).unwrap_or(v);
            self.emit(id, &tvec!(v));
        }
    }

    /// Hands the labelled outputs of tract node `id` to the sink.
    fn emit(&mut self, id: usize, out: &TVec<TValue>) {
        let Some(names) = self.labels.get(&id) else {
            return;
        };
        for (slot, name) in names {
            if !self.emitted.insert(name.clone()) {
                continue;
            }
            let Some(v) = out.get(*slot) else { continue };
            if self.needed.contains(name) {
                self.values.insert(name.clone(), v.clone());
            }
            let v = self.own.get(&id).and_then(|o| o.get(*slot)).unwrap_or(v);
            let value = match self.tainted.get(&id) {
                Some(src) => Err(format!("not computable ({src})")),
                None => crate::model::tract::from_tract(v)
                    .ok_or_else(|| format!("element type {:?} is not compared", v.datum_type())),
            };
            (self.sink)(name, value);
        }
    }

    /// Evaluates one node (the `run_plan_with_eval` hook) and records its labelled outputs.
    pub fn eval(
        &mut self,
        ctx: &EvalContext,
        st: Option<&mut (dyn OpState + 'static)>,
        node: &TypedNode,
        ins: TVec<TValue>,
    ) -> TractResult<TVec<TValue>> {
        crate::error::at_node(&node.name);
        // Few entries: the placeholders of nodes not computed need them (see `zeros_for`).
        self.symbols = ctx.symbols.clone();
        let mut ins = ins
            .into_iter()
            .map(|v| super::symbols::resolved(v, ctx.symbols))
            .collect::<TractResult<TVec<_>>>()?;
        self.substituted(node, &mut ins);
        if self.int8_a {
            accuracy::quantize_a(node, &mut ins)?;
        }
        let decides = self.decides(node).then(|| ins.clone());
        let ties = self.ties_at(node).then(|| ins.clone());
        let mut out = self.eval_node(ctx, st, node, ins)?;
        self.round_outputs(node.id, &mut out)?;
        if let Some(ins) = decides {
            self.adopt(ctx, node, &ins, &mut out);
        }
        if let Some(ins) = ties {
            self.flip_ties(ctx, node, &ins, &mut out);
        }
        self.adopt_selections(node.id, &mut out);
        if node.inputs.is_empty() && self.needed.contains(&node.name) {
            if let Some(v) = out.first() {
                self.values.insert(node.name.clone(), v.clone());
            }
        }
        self.emit(node.id, &out);
        Ok(out)
    }

    fn eval_node(
        &mut self,
        ctx: &EvalContext,
        st: Option<&mut (dyn OpState + 'static)>,
        node: &TypedNode,
        mut ins: TVec<TValue>,
    ) -> TractResult<TVec<TValue>> {
        let idx = self.onnx_of.get(&node.id).copied();
        if let Some(src) = node
            .inputs
            .iter()
            .find_map(|i| self.tainted.get(&i.node).cloned())
        {
            return self.give_up(node, idx, src.clone(), format!("depends on {src}"));
        }
        if let Some(reason) = idx.and_then(|i| self.unfaithful.get(&i)).cloned() {
            return self.give_up(node, idx, self.describe(node, idx), reason);
        }
        if let Some(ite) = node.op_as::<IfThenElse>() {
            if let Ok(o) = kernels::eval_if(ite, &ins) {
                mark(&mut self.precision, idx, RefPrecision::F64Phantom);
                return Ok(o);
            }
        }
        if let Some(op) = node.op_as::<super::contrib::op::ContribOp>() {
            // A stand-in's own kernel on this run's inputs, where it gives outputs of the target's shapes.
            if let Some(o) = self.eval_original(node, idx, op, &ins) {
                return Ok(o);
            }
            return match op.run(&ins) {
                Ok(o) => {
                    let p = match super::contrib::standin::seeded(&op.node) {
                        Some(reason) => RefPrecision::Seeded { reason },
                        None => RefPrecision::F64Phantom,
                    };
                    mark(&mut self.precision, idx, p);
                    Ok(o)
                }
                Err(e) => {
                    let why = humanize(&first_line(&e), self.graph);
                    self.give_up(node, idx, self.describe(node, idx), why)
                }
            };
        }
        if let Some(r) = kernels::eval_own(node, &mut ins) {
            mark(&mut self.precision, idx, RefPrecision::F64Phantom);
            return r;
        }
        let op_name = node.op().name();
        if let Some((_, why)) = kernels::F32_INSIDE
            .iter()
            .find(|(k, _)| op_name.contains(k))
        {
            let reason = why.to_string();
            mark(&mut self.precision, idx, RefPrecision::Reduced { reason });
        }
        self.eval_tract(ctx, st, node, ins, idx)
    }
}
