//! The reference values the stages after the comparison read again (attribution, causes, the fusion check): kept
//! by the comparison from the first failing value on, the others computed in a second reference run that stops once
//! it has the last of them ([`hold`]); in memory, or on disk when the run is bounded.

use std::collections::{HashMap, HashSet};

use super::parts::stage;
use super::stream::Compared;
use super::{CompareSettings, Prepared};
use crate::error::Result;
use crate::runner::reference::ReferenceRunner;
use crate::spill::{Held, Spill, Values};
use crate::tensor::Tensor;

/// Holds the reference values named in `only` (every value when None) for the stages after the comparison: on disk
/// when the run is bounded in memory. The comparison kept those from the first failing value on; the reference runs
/// again for the others, stopping once it has computed the last of them, and not at all when none is missing. The
/// streamed comparison keeps none on a run where no value fails, so a run whose verdict needs none of them (none may
/// be anomalous either) pays neither the memory nor the disk. Returns what it did, for the run's notes.
pub fn hold(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &mut Compared,
    only: Option<&HashSet<String>>,
) -> Result<String> {
    let mut missing: HashSet<&str> = (p.graph.nodes.iter())
        .flat_map(|n| &n.outputs)
        .filter(|o| !o.is_empty() && only.is_none_or(|w| w.contains(*o)))
        .map(String::as_str)
        .collect();
    let wanted = missing.len();
    missing.retain(|o| !cmp.held.has(o));
    let kept = wanted - missing.len();
    if missing.is_empty() {
        return Ok(held_note(kept, 0, false));
    }
    let mut held = match std::mem::take(&mut cmp.held) {
        Held::Memory(m) if s.budget().is_some() => on_disk(p, m)?,
        h => h,
    };
    for (n, t) in &p.inputs.tensors {
        if !held.has(n) {
            held.keep(n, t)?;
        }
    }
    let again = missing.len();
    let pb = stage(
        s.progress,
        "reference: again, holding the values attribution and causes read",
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut failed = None;
    let mut runner = ReferenceRunner {
        decisions: cmp.runner.decisions.clone(),
        known: cmp.runner.known.clone(),
        stop: Some(stop.clone()),
        ..Default::default()
    };
    runner.run_streaming(&p.graph, &p.inputs, &mut |name, value| {
        if !missing.remove(name) {
            return;
        }
        if let (Ok(t), None) = (value, &failed) {
            failed = held.insert(name, t).err();
        }
        if missing.is_empty() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    })?;
    pb.finish_and_clear();
    if let Some(e) = failed {
        return Err(e);
    }
    cmp.held = held;
    Ok(held_note(
        kept,
        again,
        stop.load(std::sync::atomic::Ordering::Relaxed),
    ))
}

/// Where the reference values attribution reads came from: `kept` by the comparison, `again` from a second run
/// (`stopped` once it had them).
fn held_note(kept: usize, again: usize, stopped: bool) -> String {
    let second = match stopped {
        true => "a second reference run, stopped after the last of them",
        false => "a second reference run",
    };
    match (kept, again) {
        (k, 0) => format!(
            "attribution read {k} reference values kept by the comparison (from the first failing value on): no \
             second reference run"
        ),
        (0, a) => format!("attribution read {a} reference values computed again in {second}"),
        (k, a) => format!(
            "attribution read {} reference values: {k} kept by the comparison (from the first failing value on), \
             {a} computed again in {second}",
            k + a
        ),
    }
}

/// A bounded run's store on disk, holding `values` (the graph's inputs) first.
fn on_disk(p: &Prepared, values: HashMap<String, Tensor>) -> Result<Held> {
    let mut held = held_store(p, true, true)?;
    for (n, t) in values {
        held.insert(&n, t)?;
    }
    Ok(held)
}

/// Whether the comparison keeps the reference's values from the first failing one on ([`hold`] then computes only
/// the earlier ones again): with attribution, for lanes whose nodes may run alone (`rounds`: a lane does).
/// `PHANTOM_KEEP_FROM_DRIFT=0` turns it off (attribution's values then all come from a second reference run), to
/// rule it out when in doubt.
pub(super) fn keeps_from_drift(s: &CompareSettings, rounds: bool) -> bool {
    let asked = std::env::var("PHANTOM_KEEP_FROM_DRIFT").map_or(true, |v| v != "0");
    asked && s.attribution && rounds
}

/// Reference values kept for the later stages: none, in memory, or (bounded) spilled to disk; the inputs first.
pub(super) fn held_store(p: &Prepared, keep: bool, bounded: bool) -> Result<Held> {
    let mut held = match (keep, bounded) {
        (false, _) => return Ok(Held::default()),
        (true, false) => Held::default(),
        (true, true) => Held::Disk(Spill::new("reference")?),
    };
    for (n, t) in &p.inputs.tensors {
        held.keep(n, t)?;
    }
    Ok(held)
}
