//! Memory by default: `phantom onnx` without `--max-memory` sizes the run's values from tract's shapes before the
//! target runs, and when holding them would exceed phantom's default budget (on ONNX Runtime 1/32 of the machine's
//! memory, on wgpu half of it; or `PHANTOM_VALUES_BUDGET`, `PHANTOM_MEMORY_BUDGET`), exposes the target's values
//! chunk by chunk within that budget instead of running out of memory, with the values attribution reads again
//! spilled to disk ([`crate::spill`]), so the verdict is the whole run's. The report says so.

use super::{CompareSettings, Prepared, Strategy};
use crate::runner::reference::ReferenceRunner;
use crate::units::fmt_size;

/// The settings the run goes on with: `s` itself unless its strategy is [`Strategy::Auto`], which becomes whole or
/// bounded here (with a note on the model when bounded).
pub fn resolve(s: &CompareSettings, p: &mut Prepared) -> CompareSettings {
    let mut s = s.clone();
    if s.strategy != Strategy::Auto {
        return s;
    }
    s.strategy = Strategy::Whole;
    // Bounded mode runs one target, one step, without a dump: anything else stays whole, as asked.
    if s.targets.len() != 1 || s.steps > 1 || s.dump.is_some() {
        return s;
    }
    // A model tract cannot size is left to the run, which reports why.
    let Ok(sizes) = ReferenceRunner::default().value_sizes(&p.graph, &p.inputs) else {
        return s;
    };
    let f64_bytes = sizes.values().sum();
    p.sizes = Some(sizes);
    let need = held_at_once(f64_bytes, s.attribution);
    let (budget, source) = default_budget(&s.target().engine);
    if need <= budget as u64 {
        return s;
    }
    let spill = spill_room(f64_bytes);
    if spill.is_ok() && first_pass_fits(&s, p, (f64_bytes, budget)) {
        s.bounded_after_failure = Some(budget);
        return s;
    }
    let half = crate::fsutil::memory_budget();
    match spill {
        // Without a spill directory a run that fits half the machine is held whole rather than bounded without
        // attribution (chunks on ONNX Runtime keep the target's values there too).
        Err(why) if need <= half as u64 => p.graph.notes.push(format!(
            "memory: this run's values (about {}) exceed phantom's default budget of {} but were held whole, within \
             half this machine's memory: {why}",
            fmt_size(need as usize),
            fmt_size(budget)
        )),
        spill => {
            s.strategy = Strategy::Bounded { budget };
            s.attribution &= spill.is_ok();
            p.graph.notes.push(note(need, (budget, &source), spill.err()));
        }
    }
    s
}

/// Whether a whole first pass without the expected noise ([`super::noise::deferred`]) fits `budget`: it holds the
/// target's values and the reference's few ahead of the comparison, nothing else (unless every node is to run alone:
/// then it holds every reference value as well). Where a value fails, the
/// comparison runs again bounded ([`CompareSettings::bounded_after_failure`]).
fn first_pass_fits(s: &CompareSettings, p: &Prepared, (f64_bytes, budget): (u64, usize)) -> bool {
    let held = held_at_once(f64_bytes, false) + super::ahead::cap(Some(budget));
    // With --attribute-all the first pass holds every reference value too.
    let Some(Ok(round)) = (s.attribution && !s.attribute_all && held <= budget as u64)
        .then(|| p.targets.first().map(|t| t.rounding(&p.graph)))
        .flatten()
    else {
        return false;
    };
    super::noise::deferrable(s, p, &round) && !super::decisions::any(s, &p.graph)
}

/// The note of a whole run that had to run again bounded: a value failed in its first pass.
pub(super) fn bounded_again(budget: usize) -> String {
    format!(
        "memory: the first pass held the target's values whole (without the expected noise, within phantom's \
         default budget of {}); a value failed, and holding what attribution needs would exceed that budget, so the \
         comparison ran again with the target's values exposed chunk by chunk within it",
        fmt_size(budget)
    )
}

/// The budget a run's values may take before the run is chunked, on `engine`, and where it comes from. Chunks on
/// ONNX Runtime run each node once (cuts); on wgpu each chunk reruns the model, so only a run that would not fit
/// the machine's budget is chunked there.
fn default_budget(engine: &crate::targets::Engine) -> (usize, String) {
    let set = |var: &str| std::env::var_os(var).is_some();
    let rerun = engine.chunks_rerun();
    let source = match () {
        _ if rerun && set("PHANTOM_MEMORY_BUDGET") => "PHANTOM_MEMORY_BUDGET".into(),
        _ if rerun => format!("{}; PHANTOM_MEMORY_BUDGET or --max-memory set another", budget_source()),
        _ if set("PHANTOM_VALUES_BUDGET") => "PHANTOM_VALUES_BUDGET".into(),
        _ if set("PHANTOM_MEMORY_BUDGET") => "PHANTOM_MEMORY_BUDGET".into(),
        _ => format!(
            "1/{} of this machine's {}, at least 256 MiB; PHANTOM_VALUES_BUDGET or --max-memory set another",
            crate::fsutil::VALUES_SHARE,
            fmt_size(crate::fsutil::machine_memory())
        ),
    };
    let budget = match rerun {
        true => crate::fsutil::memory_budget(),
        false => crate::fsutil::values_budget(),
    };
    (budget, source)
}

/// Whether the spill directory has room for a bounded run's spilled values (the reference's in f64, and the
/// expected-noise run's, at most half that): `Err` says what is missing.
fn spill_room(f64_bytes: u64) -> Result<(), String> {
    let need = f64_bytes + f64_bytes / 2;
    let root = crate::spill::root();
    if let Err(e) = crate::spill::Spill::new("check") {
        return Err(format!("{e}"));
    }
    match crate::spill::free_bytes(&root) {
        Some(free) if free < need => Err(format!(
            "they spill about {} of values to disk and {} has {} free; set PHANTOM_SPILL_DIR to a disk with room to \
             measure them",
            fmt_size(need.min(usize::MAX as u64) as usize),
            root.display(),
            fmt_size(free.min(usize::MAX as u64) as usize)
        )),
        _ => Ok(()),
    }
}

use crate::model::budget::budget_source;
pub use crate::model::budget::weights_fit;

/// Bytes a whole run holds at once for values of `f64_bytes` in f64: the target's copy (f32: half), and with
/// attribution the reference values kept in f64, the expected-noise run's (half) and the per-node run's feeds and
/// outputs (half each).
fn held_at_once(f64_bytes: u64, attribution: bool) -> u64 {
    match attribution {
        true => f64_bytes / 2 + f64_bytes + f64_bytes / 2 + f64_bytes,
        false => f64_bytes / 2,
    }
}

fn note(need: u64, (budget, source): (usize, &str), no_spill: Option<String>) -> String {
    let attribution = match no_spill {
        None => "the values read again waited in memory up to a share of it and on disk beyond (the expected-noise \
                 run's, where it ran, and the reference's where attribution or causes needed them)"
            .to_string(),
        Some(why) => format!(
            "expected noise and introduced error were not measured ({why}), so culprits rest on the first divergence"
        ),
    };
    format!(
        "memory: holding this run's values at once would take about {} (target, f64 reference, expected noise and \
         per-node runs), above phantom's default budget of {} ({source}): the target's values were exposed chunk by \
         chunk within it, and {attribution}",
        fmt_size(need as usize),
        fmt_size(budget)
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn attribution_holds_three_times_the_f64_values() {
        assert_eq!(super::held_at_once(1000, true), 3000);
        assert_eq!(super::held_at_once(1000, false), 500);
    }
}
