//! One target through the stages: the [`Lane`] record, opened by the capture stage ([`capture`]). The stages read
//! a lane and return what they found with what they say ([`Said`]); the lane's methods here are where it takes
//! their results, so that each field is written in one place.

use std::collections::HashMap;
use std::time::Instant;

use super::degrade::{self, Said};
use super::explain::{self, Found};
use super::parts::{ms, stage};
use super::stream::{self, Compared};
use super::{alone, decisions, noise, paired, variation};
use super::{CompareSettings, Prepared, Reports, Strategy};
use crate::analysis::attribution;
use crate::error::Result;
use crate::runner::reference::decide::Adopted;
use crate::runner::reference::Rounding;
use crate::runner::RunOutput;
use crate::targets::{Capture, Target, TargetSpec};

/// One target through the stages: what it is, what it produced, and its comparison with the reference so far.
pub struct Lane {
    pub spec: TargetSpec,
    pub target: Box<dyn Target>,
    /// The captured run (every value at once; empty in bounded mode, where chunks run as the reference streams).
    pub out: RunOutput,
    /// Capture time, and the runs fetching the target's decisions (bounded runs).
    pub ms: f64,
    /// The element type the target stores each value in (with attribution on).
    pub rounding: Option<Rounding>,
    /// The expected-noise stage's run and how it ran ([`noise`]).
    pub noise: noise::Noise,
    /// Value reports by name.
    pub reports: Reports,
    /// What the stages said: notes for this target's report, and the figures they could not measure, per node.
    pub said: Said,
    /// What pairing the target model's values with the reference's by value found ([`paired`]).
    pub paired: paired::Paired,
    /// What the attribution stage measured, and of which nodes ([`alone`]).
    pub attribution: alone::Attribution,
    /// The target's discrete decisions the reference runs adopt ([`decisions`]).
    pub adoption: decisions::Adoption,
}

/// Each target's run: every value at once, or (bounded memory) nothing yet — chunks run as the reference streams;
/// with attribution, the element type it stores each value in.
pub(super) fn capture(
    s: &CompareSettings,
    p: &mut Prepared,
    attribution: bool,
) -> Result<Vec<Lane>> {
    let mut lanes = vec![];
    let mut paired = std::mem::take(&mut p.paired).into_iter();
    for (spec, mut target) in s.targets.iter().zip(std::mem::take(&mut p.targets)) {
        let mut pairing = paired.next().flatten().unwrap_or_default();
        let t = Instant::now();
        let pb = stage(s.progress, &format!("target: {}", spec.label()));
        if crate::error::injected("crash").is_err() {
            // `PHANTOM_INJECT_FAILURE=crash`: a crash inside the target's engine (tests the crash handler).
            #[cfg(unix)]
            // SAFETY: raises a signal in this process, as a crashing engine would.
            unsafe {
                libc::raise(libc::SIGSEGV);
            }
        }
        let out = match s.strategy {
            Strategy::Whole | Strategy::Auto => {
                let inputs = p.target_inputs.as_ref().unwrap_or(&p.inputs);
                target.run(&p.graph, inputs, Capture::All)?
            }
            Strategy::Bounded { .. } => RunOutput::default(),
        };
        pb.finish_and_clear();
        let ms = ms(t);
        let rounding = attribution.then(|| target.rounding(&p.graph)).transpose()?;
        lanes.push(Lane {
            spec: spec.clone(),
            target,
            out,
            ms,
            rounding,
            noise: Default::default(),
            reports: HashMap::new(),
            said: Said {
                notes: std::mem::take(&mut pairing.notes),
                ..Default::default()
            },
            paired: pairing,
            attribution: Default::default(),
            adoption: Default::default(),
        });
    }
    Ok(lanes)
}

/// The stream-compare stage on every lane ([`stream::compare`]); each lane takes its value reports and what the
/// stage says of it.
pub(super) fn compare(
    s: &CompareSettings,
    p: &mut Prepared,
    lanes: &mut [Lane],
    keep: bool,
) -> Result<Compared> {
    let sides = lanes.iter_mut().map(Lane::side).collect();
    let (cmp, found) = stream::compare(s, p, sides, keep)?;
    for (lane, f) in lanes.iter_mut().zip(found) {
        lane.reports = f.reports;
        lane.said.notes.extend(f.notes);
    }
    Ok(cmp)
}

impl Lane {
    /// What the stream-compare stage reads of the lane and drains ([`stream::Side`]).
    fn side(&mut self) -> stream::Side<'_> {
        stream::Side {
            spec: &self.spec,
            target: self.target.as_mut(),
            out: &mut self.out,
            rounding: self.rounding.as_ref(),
            noise: &mut self.noise,
            paired: &self.paired,
            adoption: &self.adoption,
            found: Default::default(),
        }
    }

    /// Takes what a stage said: its notes after the earlier stages', and the figures it could not measure.
    pub(super) fn hear(&mut self, said: Said) {
        self.said.absorb(said);
    }

    /// The one lane's target values of the nodes the reference may take from it, exposed before a bounded run
    /// ([`decisions::stand_in_values`]).
    pub(super) fn stand_ins(&mut self, p: &Prepared, budget: usize) {
        let (values, said) = decisions::stand_in_values(p, self.target.as_mut(), budget);
        self.out.values.extend(values);
        self.hear(said);
    }

    /// The one lane's discrete decisions, for the reference runs to adopt ([`decisions::gather`]).
    pub(super) fn gather(
        &mut self,
        s: &CompareSettings,
        p: &Prepared,
    ) -> Option<decisions::Gathered> {
        let source = decisions::Source {
            target: self.target.as_mut(),
            out: &self.out,
            rounding: self.rounding.as_ref(),
        };
        let (gathered, said) = decisions::gather(s, p, source);
        self.hear(said);
        gathered
    }

    /// The expected-noise stage ([`noise::run`]); `only`: this is the only lane.
    pub(super) fn expect_noise(&mut self, s: &CompareSettings, p: &Prepared, only: bool) {
        let (noise, said) = noise::run(s, p, self, only);
        self.noise = noise;
        self.hear(said);
    }

    /// After the comparison, the expected noise that ran beside it ([`noise::settle`]); if that run failed, no value
    /// keeps a figure from it (a value it excused fails again) and the stage is marked not measured.
    pub(super) fn settle_noise(&mut self) {
        let (noise, ended) = noise::settle(std::mem::take(&mut self.noise));
        self.noise = noise;
        if ended.is_err() {
            self.reports
                .values_mut()
                .for_each(attribution::without_noise);
        }
        self.said.stage("expected noise", ended);
    }

    /// What the reference adopted of the target's decisions, on the value reports ([`decisions::record`]); the
    /// decisions adopted in a widened window, and the expected noise taken off the values computed from them
    /// ([`decisions::without_noise_after`]).
    pub(super) fn adopted(&mut self, p: &Prepared, adopted: &HashMap<String, Adopted>) {
        let note = decisions::record(&mut self.reports, adopted);
        self.said.notes.extend(note);
        self.adoption.widened = decisions::widened(self, adopted);
        let widened = &self.adoption.widened;
        let note = decisions::without_noise_after(&p.graph, widened, &mut self.reports);
        self.said.notes.extend(note);
    }

    /// The failing outputs of a fused quantized run judged against faithful kernels' variation ([`variation`]).
    pub(super) fn judge_variation(&mut self, s: &CompareSettings, p: &Prepared) {
        let (ms, said) = variation::settle(s, p, self).onto(&mut self.reports);
        self.noise.ms += ms;
        self.hear(said);
    }

    /// The attribution stage, when the lane rounds: each node's introduced error on its value report
    /// ([`explain::attribute`]), but for the nodes computing widened decisions ([`decisions::unmeasured_alone`]).
    /// `held_ms`: the reference's second run for it, counted as this lane's attribution.
    pub(super) fn attribute(
        &mut self,
        s: &CompareSettings,
        p: &Prepared,
        cmp: &Compared,
        held_ms: f64,
    ) {
        let Some(round) = self.rounding.clone() else {
            return;
        };
        let t = Instant::now();
        let alone = explain::Alone {
            target: self.target.as_mut(),
            label: self.spec.label(),
            nodes: self.attribution.alone.as_ref(),
            reports: &self.reports,
        };
        let done = degrade::injected("attribution")
            .and_then(|_| explain::attribute(s, p, cmp, alone, &round));
        if let Some((found, said)) = self.said.stage("introduced error", done) {
            for (name, introduced) in found {
                if let Some(v) = self.reports.get_mut(&name) {
                    v.introduced = introduced;
                }
            }
            self.hear(said);
        }
        let widened = &self.adoption.widened;
        let said = decisions::unmeasured_alone(&p.graph, widened, &mut self.reports);
        self.hear(said);
        self.attribution.ms = ms(t) + held_ms;
    }

    /// The explain stage on the lane's value reports ([`explain::explain`]); the figures no stage could measure
    /// marked on the node reports.
    pub(super) fn explain(
        &mut self,
        s: &CompareSettings,
        p: &Prepared,
        cmp: &Compared,
    ) -> Result<Found> {
        let reports = std::mem::take(&mut self.reports);
        let (mut found, said) = explain::explain(s, p, cmp, (self, reports))?;
        self.hear(said);
        self.said.unmeasured.mark(&mut found.nodes);
        Ok(found)
    }

    /// Back to before the comparison, for its second pass: no value reports, the notes said since `notes` were
    /// said dropped, and the target's values `out` captured again (in `ms`).
    pub(super) fn again(&mut self, notes: usize, (out, ms): (RunOutput, f64)) {
        (self.noise.deferred, self.reports) = (false, HashMap::new());
        self.said.notes.truncate(notes);
        self.out = out;
        self.ms += ms;
    }
}
