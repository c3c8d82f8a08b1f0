//! The target's values a bounded run needs before the comparison streams (no captured values to read them from):
//! its decisions, and the values of the nodes the reference may take from it. Its cuts expose them, in batches that
//! fit a chunk of the budget.

use std::sync::Arc;

use super::held;
use crate::error::Result;
use crate::model::Node;
use crate::pipeline::degrade::Said;
use crate::pipeline::Prepared;
use crate::runner::reference::contrib::standin::may_stand_in;
use crate::runner::reference::ReferenceRunner;
use crate::spill::Spill;
use crate::targets::Target;
use crate::tensor::Tensor;

/// The decisions exposed by the target's cuts (bounded mode), kept on disk until their nodes run.
pub(super) fn fetch(
    p: &Prepared,
    target: &mut dyn Target,
    wanted: &[(&Node, &String)],
    budget: usize,
) -> Result<Arc<Spill>> {
    let names: Vec<&str> = wanted.iter().map(|(n, o)| held(n, o)).collect();
    // As the chunks run (cuts with every value exposed): exposing the decisions alone would let ONNX Runtime fuse
    // across the rest and round them differently from the runs they are compared with.
    // The comparison's chunks go on from these runs: what they computed is not computed again.
    target.keep_chunks();
    Ok(Arc::new(exposed(p, target, &names, budget, "decisions")?))
}

/// `names` exposed by the target's cuts, kept on disk. Each cut exposes every value it computes, so the names are
/// asked for in batches whose values fit a chunk of `budget`.
fn exposed(
    p: &Prepared,
    target: &mut dyn Target,
    names: &[&str],
    budget: usize,
    what: &str,
) -> Result<Spill> {
    let batches = batches(p, names, crate::bounded::chunk_bytes(budget, &p.graph));
    let mut chunks = target.chunks(&p.graph, &p.inputs)?;
    let mut kept = Spill::new(what)?;
    for batch in &batches {
        for (name, t) in chunks.next(batch)? {
            kept.put(&name, &t)?;
        }
    }
    Ok(kept)
}

/// The target's values of the nodes the reference may take from it (custom ops, `Unique`, `NonMaxSuppression`:
/// [`may_stand_in`]), exposed by its cuts before the reference types the model when the run is bounded in memory
/// (no captured values to read them from), so that such a node is stood in for as in a whole run; with the note
/// saying so, or saying why they could not be exposed.
pub fn stand_in_values(
    p: &Prepared,
    target: &mut dyn Target,
    budget: usize,
) -> (Vec<(String, Tensor)>, Said) {
    let names: Vec<&str> = (p.graph.nodes.iter())
        .filter(|n| may_stand_in(&n.domain, &n.op_type))
        .flat_map(|n| n.outputs.iter().filter(|o| !o.is_empty()))
        .map(String::as_str)
        .collect();
    if names.is_empty() {
        return (vec![], Said::default());
    }
    match exposed(p, target, &names, budget, "stand-ins") {
        Ok(kept) => {
            let values = (names.iter()).filter_map(|&n| Some((n.to_string(), kept.get(n)?)));
            let note = format!(
                "bounded memory: the target's values of {} output(s) of nodes the reference may take from it \
                 (custom ops, `Unique`, `NonMaxSuppression`) were exposed by a chunked run of their own before the \
                 comparison",
                names.len()
            );
            (values.collect(), Said::note(note))
        }
        Err(e) => {
            let note = format!(
                "bounded memory: the target's values of the nodes the reference may take from it could not be \
                 exposed ({e}); such nodes stop the reference"
            );
            (vec![], Said::note(note))
        }
    }
}

/// `names` (values the graph computes) in batches, in the graph's order, each closed once the values computed since
/// the previous one reach `limit` bytes (in the target's float32: half their f64 size; a value tract cannot size
/// counts as nothing). One batch when the sizes are unknown.
fn batches<'a>(p: &Prepared, names: &[&'a str], limit: usize) -> Vec<Vec<&'a str>> {
    let sizes = match &p.sizes {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(
            ReferenceRunner::default()
                .value_sizes(&p.graph, &p.inputs)
                .unwrap_or_default(),
        ),
    };
    let mut out: Vec<Vec<&str>> = vec![vec![]];
    let mut bytes = 0u64;
    for n in &p.graph.nodes {
        for o in &n.outputs {
            bytes += sizes.get(o).copied().unwrap_or(0) / 2;
            if let Some(&name) = names.iter().find(|&&w| w == o) {
                out.last_mut().expect("one batch").push(name);
            }
        }
        if bytes >= limit as u64 && out.last().is_some_and(|b| !b.is_empty()) {
            out.push(vec![]);
            bytes = 0;
        }
    }
    // Names no node writes (graph inputs) go with the first batch.
    let placed: std::collections::HashSet<&str> = out.iter().flatten().copied().collect();
    let rest: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !placed.contains(n))
        .collect();
    out[0].extend(rest);
    out.retain(|b| !b.is_empty());
    out
}
