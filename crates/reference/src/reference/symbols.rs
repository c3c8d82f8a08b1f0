//! Shapes decided at run time by data-dependent ops (`NonZero`, a `Range` over computed values) are named by tract
//! with symbols, resolved as the run produces them. Two places where tract's handling fails, patched here:
//! - **Ops that evaluate in a model of their own** (StridedSlice) do not see the run's resolved symbols: shape
//!   values (TDim) are handed to every op with the symbols resolved so far replaced by their values ([`resolved`]).
//! - **A `Range` computed from constants alone** (shape values tract folded, such as `arange(t)` with `t` the
//!   length of an earlier data-dependent `Range`) is sized by symbols other ops define, but tract counts every
//!   `Range` as defining the symbols of its length. When it picks such a `Range` as the definer, the run evaluates it
//!   before the op that really decides the symbol, and the length is undetermined or wrong. Those `Range`s are
//!   wrapped in [`SizedRange`], which defines nothing ([`unmint_sized_ranges`]).
//! - **An op tract does not count as deciding a symbol** (a `StridedSlice` whose bounds are computed: its length
//!   is a symbol, which a `Shape` folded into a constant hands to an `Expand` that does not read the slice) is not
//!   ordered before the symbol's readers, which then fail with "Undetermined symbol": [`plan`] adds that order.
//! - **Symbols minted in a scope that is gone**: tract types a `StridedSlice` with computed bounds in a model of its
//!   own, so the lengths in its output facts name symbols of a scope dropped with that model, and the run stops
//!   ("points to an invalid (dead ?) SymbolScope"). [`revive_dead_symbols`] mints them again in the model's scope.
//! - **A data-dependent op whose value no output needs** (a `NonZero` read only through its `Shape`, which tract
//!   folds into a constant) would be pruned from the run, and its symbol never resolved: [`definers`] lists their
//!   outputs, so the run keeps them.

use std::collections::{HashMap, HashSet};

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

/// Whether `fact`'s shape names a symbol whose scope is gone.
fn names_dead(fact: &TypedFact) -> bool {
    fact.shape
        .iter()
        .any(|d| d.symbols().iter().any(|s| s.scope().is_none()))
}

/// `fact` with every symbol whose scope is gone replaced by a fresh one of `scope`.
fn revived(fact: &TypedFact, scope: &SymbolScope) -> TractResult<TypedFact> {
    let mut fresh: HashMap<Symbol, TDim> = HashMap::new();
    let mut dims = vec![];
    for d in fact.shape.iter() {
        let mut d = d.clone();
        for s in d.symbols().into_iter().filter(|s| s.scope().is_none()) {
            let to = fresh
                .entry(s.clone())
                .or_insert_with(|| scope.new_with_prefix("l").to_dim())
                .clone();
            d = d.substitute(&s, &to)?;
        }
        dims.push(d);
    }
    let mut out = fact.clone();
    out.shape = ShapeFact::from_dims(dims);
    Ok(out)
}

/// Re-mints the symbols of dead scopes in `model`'s outlet facts (see the module's notes): each such node's outputs
/// get fresh symbols of the model's scope, and the facts of the nodes after it are typed again from their inputs.
/// Returns how many nodes had dead symbols.
pub fn revive_dead_symbols(model: &mut TypedModel) -> usize {
    let dead = |m: &TypedModel, id: usize| m.node(id).outputs.iter().any(|o| names_dead(&o.fact));
    if !(0..model.nodes.len()).any(|id| dead(model, id)) {
        return 0;
    }
    let Ok(order) = model.eval_order() else {
        return 0;
    };
    let scope = model.symbols.clone();
    let mut revived_nodes = 0;
    let mut touched: HashSet<usize> = HashSet::new();
    for id in order {
        let fed = model
            .node(id)
            .inputs
            .iter()
            .any(|i| touched.contains(&i.node));
        if fed {
            let facts = model
                .node_input_facts(id)
                .and_then(|f| model.node(id).op.output_facts(&f));
            if let Ok(facts) = facts {
                for (slot, f) in facts.into_iter().enumerate() {
                    model.nodes[id].outputs[slot].fact = f;
                }
            }
        }
        let is_dead = dead(model, id);
        if is_dead {
            revived_nodes += 1;
            for o in model.nodes[id].outputs.iter_mut() {
                if let Ok(f) = revived(&o.fact, &scope) {
                    o.fact = f;
                }
            }
        }
        if fed || is_dead {
            touched.insert(id);
        }
    }
    revived_nodes
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

/// Symbols named by the shape of `o`.
fn shape_symbols(model: &TypedModel, o: OutletId) -> Vec<Symbol> {
    model
        .outlet_fact(o)
        .map(|f| f.shape.iter().flat_map(|d| d.symbols()).collect())
        .unwrap_or_default()
}

/// Whether `node` decides the length of its output from the data: the ops tract counts, and `StridedSlice` (a
/// `Slice` whose bounds are computed). Other ops that name a new symbol (an `Expand` to a shape folded from one)
/// only repeat it.
fn decides(node: &TypedNode) -> bool {
    node.op.mints_runtime_symbols() || node.op.name() == "StridedSlice"
}

/// Symbol → the node that decides it: a model input naming it, else the first deciding node (in evaluation order)
/// whose output shape names it while none of its inputs' shapes does.
fn deciders(model: &TypedModel, order: &[usize]) -> TractResult<HashMap<Symbol, usize>> {
    let mut by = HashMap::new();
    for &i in model.input_outlets()? {
        for s in shape_symbols(model, i) {
            by.entry(s).or_insert(i.node);
        }
    }
    for &id in order {
        let node = model.node(id);
        if !decides(node) {
            continue;
        }
        let read: HashSet<Symbol> = node
            .inputs
            .iter()
            .flat_map(|&i| shape_symbols(model, i))
            .collect();
        for k in 0..node.outputs.len() {
            for s in shape_symbols(model, OutletId::new(id, k)) {
                if !read.contains(&s) {
                    by.entry(s).or_insert(id);
                }
            }
        }
    }
    Ok(by)
}

/// Symbols node `id`'s outputs name, in their shapes or as constant shape values.
fn mentioned(model: &TypedModel, id: usize) -> HashSet<Symbol> {
    let mut out = HashSet::new();
    for o in &model.node(id).outputs {
        out.extend(o.fact.shape.iter().flat_map(|d| d.symbols()));
        if let Some(k) = o.fact.konst.as_deref() {
            if let Ok(d) = k
                .try_as_plain_ram()
                .and_then(|r| r.as_slice::<TDim>().map(|d| d.to_vec()))
            {
                out.extend(d.iter().flat_map(|d| d.symbols()));
            }
        }
    }
    out
}

fn ancestors(model: &TypedModel, id: usize) -> HashSet<usize> {
    let mut stack: Vec<usize> = model.node(id).inputs.iter().map(|i| i.node).collect();
    let mut seen = HashSet::new();
    while let Some(n) = stack.pop() {
        if seen.insert(n) {
            stack.extend(model.node(n).inputs.iter().map(|i| i.node));
        }
    }
    seen
}

/// (reader, decider) pairs: every node naming a symbol runs after the node that decides it (unless it is one of
/// that node's ancestors, or reads it directly).
fn decider_order(model: &TypedModel) -> TractResult<Vec<(usize, usize)>> {
    let order = model.eval_order()?;
    let by = deciders(model, &order)?;
    let inputs: HashSet<usize> = model.input_outlets()?.iter().map(|o| o.node).collect();
    let mut memo: HashMap<usize, HashSet<usize>> = HashMap::new();
    let mut pairs = vec![];
    for &id in &order {
        for s in mentioned(model, id) {
            let Some(&d) = by.get(&s) else { continue };
            let direct = model.node(id).inputs.iter().any(|i| i.node == d);
            if d == id || inputs.contains(&d) || direct || pairs.contains(&(id, d)) {
                continue;
            }
            if !memo
                .entry(d)
                .or_insert_with(|| ancestors(model, d))
                .contains(&id)
            {
                pairs.push((id, d));
            }
        }
    }
    Ok(pairs)
}

/// The plan of `model`, with every symbol's readers ordered after the node that decides it (tract's own order
/// alone where that order cannot be built).
pub fn plan(model: TypedModel) -> TractResult<std::sync::Arc<TypedSimplePlan>> {
    let pairs = decider_order(&model).unwrap_or_default();
    if pairs.is_empty() {
        return SimplePlan::new(model);
    }
    let outputs = model.outputs.clone();
    #[allow(deprecated)]
    let ordered = SimplePlan::build_with_outputs_and_deps(
        model.clone(),
        &outputs,
        &pairs,
        &RunOptions::default(),
    );
    match ordered {
        Ok(p) => Ok(std::sync::Arc::new(p)),
        Err(_) => SimplePlan::new(model),
    }
}
