//! The graph outputs of a quantized model judged against the variation of faithful integer kernels. Exposing every
//! value stops ONNX Runtime's QDQ fusions (a fused QLinearConv's float input is never materialized), so the
//! reference follows the levels of an unfused run while the verdict reads the outputs of the plain, fused one. The
//! two runs land on other levels where a level's input lies within a few roundings of a boundary, and those moves
//! carry downstream: on a QDQ ResNet-18, by one to two quanta of the logits. A failing output of such a run is
//! judged once more against a second reference run that rounds every quantization's near-ties the other way
//! ([`crate::runner::reference::decide::Ties`]): where the output lies within [`FACTOR`] times that run's distance
//! from the reference, it is a faithful execution's variation, passed with its reason; beyond, it stays a failure.

use std::collections::{HashMap, HashSet};

use super::degrade::Said;
use super::{CompareSettings, Lane, Prepared};
use crate::analysis::causes::fused_pairs;
use crate::report::model::{FusedSaturation, ValueReport, ValueStatus, Variation};
use crate::runner::reference::decide::{Ties, TIES_FLIPPED};
use crate::runner::reference::{qop, ReferenceRunner};
use crate::tensor::{DType, Tensor};

/// How many times the near-ties run's distance from the reference an output of the fused run may lie from it: the
/// fused run rounds other near-ties than that run does, and their moves may add where that run's cancel. Measured on
/// QDQ ResNet-18s from `quantize_static` (four configurations), the fused run's distance was 0.5 to 1.0 times it.
pub const FACTOR: f64 = 2.0;

/// The failing graph outputs judged against the variation of faithful integer kernels: each one's [`Variation`],
/// the runs' time (a second estimate of the noise: counted with the expected-noise stage), and what the stage says.
#[derive(Default)]
pub struct Judged {
    pub variations: Vec<(String, Variation)>,
    pub ms: f64,
    pub said: Said,
}

impl Judged {
    /// Puts each variation on its value report, passing the outputs it excuses with their reason.
    pub fn onto(self, reports: &mut HashMap<String, ValueReport>) -> (f64, Said) {
        for (name, var) in self.variations {
            let Some(report) = reports.get_mut(&name) else {
                continue;
            };
            if var.excused {
                report.status = ValueStatus::Pass;
                report.reason = Some(format!(
                    "beyond the tolerance but within {FACTOR}× the variation of faithful integer kernels ({} \
                     near-tie level(s) rounded the other way move it by up to {:.4})",
                    var.flips, var.max_abs
                ));
            }
            report.variation = Some(var);
        }
        (self.ms, self.said)
    }
}

/// Judges the failing graph outputs of `lane` (read from ONNX Runtime's plain run, which exposing the values moved)
/// against the variation of faithful integer kernels, when the model quantizes.
pub(super) fn settle(s: &CompareSettings, p: &Prepared, lane: &Lane) -> Judged {
    let moved = (lane.target.instrumentation()).is_some_and(|i| i.outputs_moved);
    let quantizes = p
        .graph
        .nodes
        .iter()
        .any(|n| n.op_type == "QuantizeLinear" || qop::OPS.contains(&n.op_type.as_str()));
    if !moved || !quantizes || !s.tolerance.is_default() {
        return Judged::default();
    }
    let failing: HashSet<&str> = (p.graph.outputs.iter())
        .map(|o| o.name.as_str())
        .filter(|n| (lane.reports.get(*n)).is_some_and(|v| v.status == ValueStatus::Fail))
        .collect();
    if failing.is_empty() {
        return Judged::default();
    }
    // Without VNNI, the fused convolutions' activation levels too, to count their pairs.
    let without_vnni = lane.spec.is_ort_on("cpu") && !vnni();
    let convs = match without_vnni {
        true => fused_pairs::fused_convs(&p.graph),
        false => vec![],
    };
    let mut read = failing.clone();
    read.extend(convs.iter().map(|c| c.levels.as_str()));
    let t = std::time::Instant::now();
    let done = ties_run(p, lane, &failing, true)
        .and_then(|(ties, flipped)| Ok((ties, ties_run(p, lane, &read, false)?.0, flipped)));
    let mut judged = Judged::default();
    let Some((ties, own, flipped)) = judged.said.stage("fused-kernel variation", done) else {
        return judged;
    };
    judged.ms = super::parts::ms(t);
    let mut saturation: Option<(String, Option<FusedSaturation>)> = None;
    for name in failing {
        let (Some(r), Some(t), Some(v)) =
            (own.get(name), lane.out.values.get(name), ties.get(name))
        else {
            continue;
        };
        let mut var = judged_output(r, t, v, flipped);
        let mut text = note(name, &var);
        if !var.excused && without_vnni {
            let (said, counted) = saturation.get_or_insert_with(|| saturates(p, &convs, &own));
            text.push_str(said);
            var.saturation = counted.clone();
        }
        judged.said.notes.push(text);
        judged.variations.push((name.to_string(), var));
    }
    judged
}

/// What a failing fused output may owe to an x86 CPU without VNNI: the pairs over int16 of the convolutions and
/// matrix products ONNX Runtime fuses, counted on the reference's levels (`own`), and how to tell saturation from a fault.
fn saturates(
    p: &Prepared,
    convs: &[fused_pairs::FusedConv],
    own: &HashMap<String, Tensor>,
) -> (String, Option<FusedSaturation>) {
    const HOW: &str = "its fused kernels do, its unfused run does not. To tell that from a fused kernel's fault, \
                       compare with --ort-opt-level disable (the unfused run), or quantize with reduce_range=True";
    let head = "; this CPU has no VNNI, where ONNX Runtime's x86 integer kernels add u8×s8 products in pairs in \
                saturating int16 arithmetic";
    if convs.is_empty() {
        return (format!("{head}: {HOW}"), None);
    }
    let s = fused_pairs::saturation(&p.graph, convs, own);
    let said = match &s.most {
        Some((name, most)) => format!(
            "{head}: on the reference's levels, pairs beyond int16 in {} of the {} convolutions and matrix products \
             it fuses ({} of \
             {} pairs checked, up to {}; most in `{name}`, {most}). {HOW}",
            s.saturating,
            s.convs,
            s.over,
            s.checked,
            crate::units::num(s.worst)
        ),
        None => format!(
            "{head}, but none of the {} convolutions and matrix products it fuses has a pair beyond int16 on the reference's levels: \
             saturation does not explain it",
            s.convs
        ),
    };
    (said, s.reported())
}

/// Whether this CPU multiplies bytes with VNNI (AVX512-VNNI or AVX-VNNI): ONNX Runtime's x86 integer kernels then
/// accumulate u8×s8 products in int32 without saturating. Other architectures do not saturate either.
fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512vnni")
            || std::arch::is_x86_feature_detected!("avxvnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true
    }
}

/// The note on one output judged against the variation.
fn note(name: &str, v: &Variation) -> String {
    let verdict = match v.excused {
        true => "passed as the variation of faithful integer kernels",
        false => "beyond it: failed",
    };
    format!(
        "fused kernels: `{name}`, read from ONNX Runtime's fused run, lies {} from the f64 reference; rounding {} \
         near-tie level(s) the other way (another faithful execution) moves it by up to {}, allowed {FACTOR}×: {verdict}",
        crate::units::num(v.error),
        v.flips,
        crate::units::num(v.max_abs)
    )
}

/// The reference run on its own decisions (no target's adopted), rounding every quantization's near-ties the other
/// way when `flip` says, in the window the target's decisions are adopted in: its values of `wanted`, and how many
/// elements it moved.
fn ties_run(
    p: &Prepared,
    lane: &Lane,
    wanted: &HashSet<&str>,
    flip: bool,
) -> crate::error::Result<(HashMap<String, Tensor>, u64)> {
    let ties = Ties {
        atol: 0.0,
        rtol: super::decisions::NOISE_ULPS * crate::analysis::anomaly::epsilon(DType::F32),
    };
    let mut runner = ReferenceRunner {
        ties: flip.then_some(ties),
        known: Some(super::noise::known_from(&p.graph, &lane.out.values)),
        ..Default::default()
    };
    let mut got = HashMap::new();
    let out = runner.run_streaming(&p.graph, &p.inputs, &mut |name, value| {
        if let (true, Ok(v)) = (wanted.contains(name), value) {
            got.insert(name.to_string(), v);
        }
    })?;
    let flipped = (out.details.get(TIES_FLIPPED)).and_then(|n| n.parse().ok());
    Ok((got, flipped.unwrap_or(0)))
}

/// The fused run's output `t` against the reference `r`, given the near-ties run's `v`.
fn judged_output(r: &Tensor, t: &Tensor, v: &Tensor, flips: u64) -> Variation {
    let largest = |a: &Tensor, b: &Tensor| {
        let (a, b) = (a.as_f64(), b.as_f64());
        (a.iter().zip(b.iter()))
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    };
    let (max_abs, error) = (largest(v, r), largest(t, r));
    let finite_alike =
        (r.as_f64().iter().zip(t.as_f64().iter())).all(|(x, y)| x.is_finite() == y.is_finite());
    Variation {
        flips,
        max_abs,
        error,
        excused: finite_alike && max_abs > 0.0 && error <= FACTOR * max_abs,
        saturation: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f32]) -> Tensor {
        Tensor::F32(ndarray::ArrayD::from_shape_vec(vec![v.len()], v.to_vec()).unwrap())
    }

    #[test]
    fn an_output_passes_within_twice_the_near_ties_run_and_no_further() {
        let r = t(&[1.0, 2.0, 3.0]);
        let near_ties = t(&[1.0, 3.0, 3.0]);
        let within = judged_output(&r, &t(&[0.0, 2.0, 5.0]), &near_ties, 7);
        assert!(within.excused && within.max_abs == 1.0 && within.error == 2.0);
        let beyond = judged_output(&r, &t(&[1.0, 2.0, 5.5]), &near_ties, 7);
        assert!(!beyond.excused);
        let nothing_moves = judged_output(&r, &t(&[1.0, 2.0, 3.5]), &r, 0);
        assert!(!nothing_moves.excused, "no variation excuses nothing");
        let nan = judged_output(&r, &t(&[f32::NAN, 2.0, 3.0]), &near_ties, 7);
        assert!(!nan.excused, "a NaN where the reference is finite");
    }
}
