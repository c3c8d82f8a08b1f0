//! The target's decisions exposed by its cuts when the run is bounded in memory (no captured values to read them
//! from), in batches that fit a chunk of the budget.

use std::sync::Arc;

use super::held;
use crate::model::Node;
use crate::pipeline::{Lane, Prepared};
use crate::runner::reference::ReferenceRunner;
use crate::spill::Spill;

/// The decisions exposed by the target's cuts (bounded mode), kept on disk until their nodes run; `None` with a
/// note when they cannot be.
pub(super) fn fetch(
    p: &Prepared,
    lane: &mut Lane,
    wanted: &[(&Node, &String)],
    budget: usize,
) -> Option<Arc<Spill>> {
    let names: Vec<&str> = wanted.iter().map(|(n, o)| held(n, o)).collect();
    // As the chunks run (cuts with every value exposed): exposing the decisions alone would let ONNX Runtime fuse
    // across the rest and round them differently from the runs they are compared with. Each cut exposes every value
    // it computes, so the decisions are asked for in batches whose values fit a chunk of the budget.
    let batches = batches(p, &names, crate::bounded::chunk_bytes(budget, &p.graph));
    // The comparison's chunks go on from these runs: what they computed is not computed again.
    lane.target.keep_chunks();
    let run = (lane.target.chunks(&p.graph, &p.inputs)).and_then(|mut c| {
        let mut kept = Spill::new("decisions")?;
        for batch in &batches {
            for (name, t) in c.next(batch)? {
                kept.put(&name, &t)?;
            }
        }
        Ok(kept)
    });
    match run {
        Ok(kept) => Some(Arc::new(kept)),
        Err(e) => {
            lane.notes.push(format!(
                "discrete decisions: the target's could not be exposed on their own ({e}); none adopted"
            ));
            None
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
