//! The stream-compare stage bounded in memory: the reference streams into a chunker, which runs the target once per
//! chunk of values that fit the budget, compares them and drops them.

use std::collections::HashMap;
use std::time::Duration;

use super::clock::OpClock;
use super::stream::{streamed, Side, Streamed};
use super::{CompareSettings, Prepared};
use crate::bounded::Chunker;
use crate::compare::Scales;
use crate::error::Result;
use crate::report::model::ValueReport;
use crate::runner::reference::ReferenceRunner;
use crate::runner::RunOutput;
use crate::spill::{Held, Kept};
use crate::units::fmt_size;

/// The reference's runner, and the expected-noise run to go beside it.
pub(super) type Reference<'a> = (ReferenceRunner, Option<&'a super::noise::Arriving>);

/// Bounded memory: the reference streams into the chunker, which runs the target once per chunk; with attribution
/// each reference value is spilled to `keep` and the expected noise applied from the lane's spilled run.
pub(super) fn bounded(
    s: &CompareSettings,
    p: &Prepared,
    lane: &mut Side,
    (budget, keep, scales): (usize, Option<(&mut Held, bool)>, &mut Scales),
    ((mut runner, arriving), compare_time, clock): (Reference, &mut Duration, &mut OpClock),
) -> Result<RunOutput> {
    // The expected noise applies whenever attribution is on; the reference values are spilled only when kept.
    let attributed = s.attribution;
    let c = Chunker::new(
        &mut *lane.target,
        &p.graph,
        &p.inputs,
        &s.tolerance,
        budget,
        (s.heatmaps, scales),
    );
    let mut ch = c.with_slice(s.slice.clone());
    if attributed {
        ch = ch.with_noise(&mut lane.noise.held);
    }
    // Every value as it arrives (every node runs alone), or the chunker's from the first that fails.
    let (mut keep, mut drift) = match keep {
        Some((held, true)) => (Some(held), None),
        Some((held, false)) => (None, Some(held)),
        None => (None, None),
    };
    if let Some(held) = drift.as_deref_mut() {
        ch = ch.keeping(std::mem::take(held));
    }
    let mut failed = None;
    let (measured, lane_deferred) = (lane.adoption.measured.clone(), lane.noise.deferred);
    let feedback = (Some(budget), measured.is_some());
    let reference = streamed(
        p,
        (&mut runner, arriving),
        feedback,
        &mut |name, value, spent| {
            let c = clock.arrived(name, spent);
            if let (Some(m), Some(noise), Ok(v)) = (&measured, ch.noise(), &value) {
                m.observe(name, v, noise);
            }
            if let (Some(k), Ok(t), None) = (keep.as_deref_mut(), &value, &failed) {
                failed = k.keep(name, t).err();
            }
            // A first pass without the expected noise that fails is abandoned: the comparison runs again.
            if !(lane_deferred && ch.drifting()) {
                ch.push(name, value);
            }
            *compare_time += c.elapsed();
            clock.compared(name, c, false);
        },
    )?;
    if let Some(e) = failed {
        return Err(e);
    }
    let (reports, chunks) = finish_chunks(&mut ch)?;
    lane.out
        .values
        .extend(std::mem::take(&mut ch.target_outputs));
    if let (Some(held), Some(kept)) = (drift.as_deref_mut(), ch.kept()) {
        *held = kept;
    }
    let notes = ch.notes();
    let ran = ch.ran();
    drop(ch);
    lane.found = Streamed { reports, notes };
    let spilled =
        (keep.or(drift)).and_then(|k| k.spilled().map(|sp| (sp.bytes, sp.dir().to_path_buf())));
    lane.found.notes.push(bounded_note(
        budget,
        (chunks, ran),
        (attributed, spilled),
        (!lane.noise.deferred).then(|| lane.noise.held.spilled_bytes().unwrap_or_default()),
    ));
    Ok(reference)
}

/// Compares the last chunk; the value reports and how many chunks there were.
fn finish_chunks(ch: &mut Chunker<'_>) -> Result<(HashMap<String, ValueReport>, usize)> {
    ch.finish();
    if let Some(e) = ch.error.take() {
        return Err(e);
    }
    Ok((std::mem::take(&mut ch.reports), ch.chunks_asked))
}

/// The note on a bounded run: the budget, the chunks and how the target ran for them, and what was spilled to
/// disk for attribution (`noise`: none when the expected-noise run was left for a failure, [`super::noise::deferred`]).
fn bounded_note(
    budget: usize,
    (chunks, ran): (usize, String),
    (attributed, reference): (bool, Option<(u64, std::path::PathBuf)>),
    noise: Option<Kept>,
) -> String {
    let head = format!(
        "bounded memory ({}): values compared in {chunks} chunk(s); {ran}",
        fmt_size(budget)
    );
    if !attributed {
        return format!(
            "{head}; introduced error and expected noise are not measured (--attribution off)"
        );
    }
    let noise = match noise {
        Some(kept) => noise_waited(kept),
        None => "(none: it runs only once a value fails)".to_string(),
    };
    let Some((bytes, dir)) = reference else {
        return format!(
            "{head}; the expected-noise run's values {noise}; the reference's are held again only if attribution or \
             causes need them"
        );
    };
    format!(
        "{head}; for expected noise and introduced error, the reference values ({}) waited on disk under {} \
         (PHANTOM_SPILL_DIR), removed after the run, and the expected-noise run's {noise}",
        fmt_size(bytes as usize),
        dir.parent().unwrap_or(&dir).display(),
    )
}

/// Where the expected-noise run's values waited until compared: in memory up to a share of the budget, on disk
/// beyond it.
fn noise_waited(k: Kept) -> String {
    let total = fmt_size((k.memory + k.disk) as usize);
    let root = crate::spill::root();
    match (k.memory, k.disk) {
        (_, 0) => format!("({total}) waited in memory until compared"),
        (0, _) => format!(
            "({total}) waited on disk under {} (PHANTOM_SPILL_DIR), removed after the run",
            root.display()
        ),
        (_, d) => format!(
            "({total}) waited in memory until compared, {} of them on disk under {} (PHANTOM_SPILL_DIR), removed \
             after the run",
            fmt_size(d as usize),
            root.display()
        ),
    }
}
