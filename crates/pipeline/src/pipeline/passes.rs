//! The comparison's passes: each lane's expected noise set to run (beside the reference, or first on its own), and
//! the stream-compare stage run once, or twice where a first pass without the noise found a failing value
//! ([`super::noise::deferred`]).

use std::time::Instant;

use super::parts::ms;
use super::{noise, stream, CompareSettings, Lane, Prepared, Strategy};
use crate::error::Result;
use crate::runner::RunOutput;
use crate::targets::Target;

/// Each lane's expected noise: beside the reference where it can, else run first on its own ([`noise::run`]).
pub(super) fn expected_noise(s: &CompareSettings, p: &Prepared, lanes: &mut [Lane]) {
    let only = lanes.len() == 1;
    for lane in lanes.iter_mut() {
        lane.expect_noise(s, p, only);
    }
}

/// The stream-compare stage; when its first pass went without the expected noise and a value failed, again with
/// it (the first pass's time counts as the noise's), bounded where the settings say so
/// ([`CompareSettings::bounded_after_failure`]: the settings it ran with are returned). Every node alone reads every
/// value: they are held as they stream. Otherwise what the verdict needs decides.
pub(super) fn compare_once_or_twice(
    s: &CompareSettings,
    p: &mut Prepared,
    lanes: &mut [Lane],
) -> Result<(stream::Compared, Option<CompareSettings>)> {
    let keep = s.attribution && s.attribute_all;
    let notes: Vec<usize> = lanes.iter().map(|l| l.said.notes.len()).collect();
    let t = Instant::now();
    let cmp = super::lane::compare(s, p, lanes, keep)?;
    if !noise::needed_after(lanes) {
        for lane in lanes.iter_mut() {
            lane.noise.skipped = noise::skipped(&lane.noise);
        }
        return Ok((cmp, None));
    }
    drop(cmp);
    let first = ms(t);
    let bounded = s.bounded_after_failure.map(|budget| {
        p.graph.notes.push(super::memory::bounded_again(budget));
        let mut b = s.clone();
        (b.strategy, b.bounded_after_failure) = (Strategy::Bounded { budget }, None);
        b
    });
    let s = bounded.as_ref().unwrap_or(s);
    for (lane, n) in lanes.iter_mut().zip(notes) {
        let out = recaptured(s, p, lane.target.as_mut())?;
        lane.again(n, out);
    }
    expected_noise(s, p, lanes);
    for lane in lanes.iter_mut() {
        lane.noise.ms += first;
        lane.said.notes.push(
            "a value failed in a first pass without the expected noise: the comparison ran again with it (the first \
             pass's time counts as the noise's)"
                .into(),
        );
    }
    Ok((super::lane::compare(s, p, lanes, keep)?, bounded))
}

/// The target's values for the second pass, and the time it took: the comparison took the first pass's as it
/// went, so a whole run captures them again (its time counts as the target's); a bounded one exposes them chunk by
/// chunk.
fn recaptured(
    s: &CompareSettings,
    p: &Prepared,
    target: &mut dyn Target,
) -> Result<(RunOutput, f64)> {
    if s.budget().is_some() {
        return Ok(Default::default());
    }
    let t = Instant::now();
    let inputs = p.target_inputs.as_ref().unwrap_or(&p.inputs);
    let out = target.run(&p.graph, inputs, crate::targets::Capture::All)?;
    Ok((out, ms(t)))
}
