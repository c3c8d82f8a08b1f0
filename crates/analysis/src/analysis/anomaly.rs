//! Anomalies and verdict classes. A node is **anomalous** when, fed the reference's inputs, its own error is far
//! beyond what correctly rounding its f64 result explains — a fault hiding under the tolerance. Two numbers must both
//! be large, so neither a tiny output nor a sensitive input fools it:
//!
//! - the *rounding ratio*, its error over the error of correctly rounding its f64 output to the type the target
//!   stores it in, above [`ROUNDING_FACTOR`] (a 0.05% weight fault in fp32 gives about 4,000–8,000; faithful fp32
//!   kernels on the 25 real models of `scripts/real_models.py` stay below 400 apart from ORT's Sigmoid on outputs
//!   around 1e-5, whose absolute error of ~1e-7 gives ratios up to 5e4);
//! - the *relative* error, its error over the scale of the value and its activation operands (max of their RMS),
//!   above [`RELATIVE_EPS`] machine epsilons of that type — that Sigmoid's 1e-7 on logits of RMS ~10 is 1e-8, a weight
//!   fault of δ is at least δ.
//!
//! A value stored in fp16 or bf16 is also anomalous when its node's RMS error, alone and in the graph, exceeds
//! [`NOISE_FACTOR`]× the RMS error the correctly rounded run has there ([`beyond_noise`]): fp16's epsilon is too
//! coarse for the two numbers above to see a 2% fault.
//!
//! The verdict then says what it means: `drift` when values fail that the target's precision does not explain,
//! `anomalous` when a node is anomalous and nothing else fails, `precision_limited` when every failing value fails
//! in the ideal run too (every value correctly rounded) and the target stays within [`NOISE_FACTOR`] of it, else
//! `clean`.

use super::attribution::NOISE_FACTOR;
use crate::report::model::{
    Anomaly, Basis, Culprit, NodeRef, NodeReport, Status, ValueReport, ValueStatus, Verdict,
};
use crate::tensor::DType;
use crate::units::num;

/// Rounding ratio above which a node's own error is anomalous.
pub const ROUNDING_FACTOR: f64 = 2048.0;

/// Relative error (in machine epsilons of the stored type) above which a node's own error is anomalous.
pub const RELATIVE_EPS: f64 = 64.0;

/// Machine epsilon of a float type.
pub fn epsilon(d: DType) -> f64 {
    match d {
        DType::F16 => 9.765_625e-4,
        DType::Bf16 => 7.812_5e-3,
        DType::F64 => f64::EPSILON,
        _ => f32::EPSILON as f64,
    }
}

/// What the anomaly test needs to know about a value's operands: the largest RMS among them, and the coarsest
/// float type the target stores any of them in (their rounding is part of the node's error when fed to it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Operands {
    pub rms: f64,
    pub coarsest: Option<DType>,
}

/// The anomaly of value `v` of node `n`, if its own error is beyond rounding on both counts, or (where the target
/// sums in float32, `sums_f32`) beyond the noise of the correctly rounded run in RMS ([`beyond_noise`]). Rounding is
/// that of the coarsest type among the value's and its operands' stored types: a node kept in fp32 whose inputs
/// arrive in fp16 carries fp16 input rounding.
fn anomaly(n: &NodeReport, v: &ValueReport, operands: Operands, sums_f32: bool) -> Option<Anomaly> {
    let (i, m) = (v.introduced.as_ref()?, v.metrics.as_ref()?);
    let own = v.target_dtype.filter(|d| d.is_float())?;
    let eps = epsilon(own).max(operands.coarsest.map(epsilon).unwrap_or(0.0));
    let ratio = i.ratio.map(|r| r * epsilon(own) / eps);
    let scale = m.scale.max(operands.rms);
    let relative = i.metrics.max_abs / scale;
    let rounding =
        ratio.is_some_and(|r| r > ROUNDING_FACTOR) && scale > 0.0 && relative > RELATIVE_EPS * eps;
    let noise = sums_f32.then(|| beyond_noise(v, own)).flatten();
    if !rounding && noise.is_none() {
        return None;
    }
    let hidden_by = match (v.status, i.status) {
        (ValueStatus::Pass, _) => "while within tolerance",
        (_, ValueStatus::Pass) => {
            "within tolerance alone, while its value fails in the graph on the error it inherits"
        }
        _ => "out of tolerance alone, while its inputs fail in the graph too (so it is not a culprit)",
    };
    let how = match (rounding, noise) {
        (false, Some(k)) => format!(
            "{} in RMS (up to {}) — {}× the RMS error of the correctly rounded run at this value, every value before \
             it rounded to {} too",
            num(i.metrics.rmse),
            num(i.metrics.max_abs),
            num(k),
            own.name()
        ),
        _ => format!(
            "up to {} — {}× the error of correct rounding and {} of the scale of its values and operands",
            num(i.metrics.max_abs),
            num(ratio.unwrap_or(f64::NAN)),
            num(relative)
        ),
    };
    Some(Anomaly {
        node_index: n.index,
        node: n.name.clone(),
        op_type: n.op_type.clone(),
        value: v.name.clone(),
        max_abs: i.metrics.max_abs,
        rounding_ratio: ratio.unwrap_or(f64::NAN),
        relative,
        noise_ratio: noise,
        summary: format!(
            "fed the reference's inputs, {} `{}` is off by {how} — {hidden_by}{KERNEL_OR_DATA}",
            n.op_type, n.name
        ),
        causes: vec![],
    })
}

/// For a value stored in fp16 or bf16, whose faithful kernels compute in float32 and round once: its node's own RMS
/// error over the RMS error of the correctly rounded run at that value (which rounds every value upstream too), when
/// that ratio exceeds [`NOISE_FACTOR`] both alone and in the graph. On the precision zoo's pristine models
/// (`scripts/zoo/`, ONNX Runtime's optimizations on and off) it stays below 1.5 in the graph and 1.3 alone over 3,024
/// fp16 values, and near 1 over 125 bf16 ones; a bias shifted by 2% of its node's output RMS in an fp16 RepViT gives
/// 21. Float32 values are left to the rounding test: float32 kernels' summation order alone exceeds this.
fn beyond_noise(v: &ValueReport, own: DType) -> Option<f64> {
    let (n, i) = (v.noise.as_ref()?, v.introduced.as_ref()?);
    let k = i.metrics.rmse / n.rms;
    (graph_beyond_noise(v, own) && k > NOISE_FACTOR).then_some(k)
}

/// The graph half of [`beyond_noise`]: the value's RMS error in the graph beyond [`NOISE_FACTOR`]× the correctly
/// rounded run's, for a value stored in fp16 or bf16.
fn graph_beyond_noise(v: &ValueReport, own: DType) -> bool {
    let (Some(n), Some(m)) = (&v.noise, &v.metrics) else {
        return false;
    };
    matches!(own, DType::F16 | DType::Bf16) && n.rms > 0.0 && m.rmse > NOISE_FACTOR * n.rms
}

/// The share of the anomaly thresholds a value's error *in the graph* must reach before its node is run alone.
/// A node's own error shows in the graph too (only inherited error of the opposite sign, element for element,
/// could hide it), so a node whose error in the graph stays under this share of either threshold is not anomalous
/// alone unless its error there is 8× what the graph shows.
pub const SCREEN: f64 = 1.0 / 8.0;

/// Whether the error of value `v` in the graph leaves room for its node to be anomalous when run alone: at least
/// [`SCREEN`] of both thresholds of [`anomaly`], its error in the graph standing for the error alone, or (where the
/// target sums in float32) an RMS error in the graph beyond the correctly rounded run's ([`beyond_noise`]). Values no float
/// type stores, whose discrete decisions the reference adopted, or whose correct rounding is exact are never
/// anomalous; a value without the error of its correct rounding (from the expected noise, or measured on its own when
/// no value failed) may be.
pub fn may_be_anomalous(v: &ValueReport, operands: Operands, sums_f32: bool) -> bool {
    let (Some(m), Some(own)) = (&v.metrics, v.target_dtype.filter(|d| d.is_float())) else {
        return false;
    };
    if v.adopted.is_some() {
        return false;
    }
    if sums_f32 && graph_beyond_noise(v, own) {
        return true;
    }
    let Some(correct) = v.noise.as_ref().map(|n| n.rounding).or(v.rounding) else {
        return true;
    };
    let eps = epsilon(own).max(operands.coarsest.map(epsilon).unwrap_or(0.0));
    let rounding = ROUNDING_FACTOR * correct * eps / epsilon(own);
    let relative = RELATIVE_EPS * eps * m.scale.max(operands.rms);
    correct > 0.0 && m.max_abs > SCREEN * rounding && m.max_abs > SCREEN * relative
}

/// How an anomaly's summary ends while nothing more specific explains it.
pub const KERNEL_OR_DATA: &str = ": the kernel or the data differ";

/// Nodes whose own error is beyond rounding, in topological order: within tolerance, or failing in the graph on
/// errors they inherit without being a culprit (downstream of a drift, a fault of their own is hidden there). A
/// discrete decision whose flips within the noise the reference adopted is not one: alone on the reference's inputs
/// it decides boundary elements either way (a QDQ pair's output level comes from ONNX Runtime's fused run, its input
/// from the run that exposes it).
pub fn find(
    nodes: &[NodeReport],
    culprits: &[Culprit],
    operands: impl Fn(&str) -> Operands,
    sums_f32: bool,
) -> Vec<Anomaly> {
    // A failing value's node, or an origin's, is listed as a culprit already.
    let blamed = |n: &NodeReport, v: &ValueReport| {
        (culprits.iter())
            .filter(|c| c.node_index == n.index)
            .any(|c| v.status == ValueStatus::Fail || c.basis == Basis::Origin)
    };
    nodes
        .iter()
        .flat_map(|n| n.values.iter().map(move |v| (n, v)))
        .filter(|(n, v)| !blamed(n, v))
        .filter(|(_, v)| v.adopted.is_none())
        .filter_map(|(n, v)| anomaly(n, v, operands(&v.name), sums_f32))
        .collect()
}

/// A failing value the target's precision explains: the ideal run fails its tolerance there too, and the target is
/// within [`NOISE_FACTOR`] of that run's error, at its largest and in RMS ([`within_noise`]); its infinities are the ideal run's, or elements within that run's
/// noise of the overflow threshold (values within rounding of 65504 land on either side).
pub(crate) fn precision_explains(v: &ValueReport) -> bool {
    match (&v.noise, &v.metrics) {
        (Some(n), Some(m)) => {
            (n.tolerance_used > 1.0 || n.nonfinite > 0)
                && m.nonfinite_mismatch <= n.nonfinite + n.near_overflow
                && within_noise(m, n)
        }
        _ => false,
    }
}

/// Whether an error is within [`NOISE_FACTOR`]× the ideal run's, both at its largest and in RMS: a one-quantum
/// flip at two elements of the ideal run does not excuse the same flip at half of them (a zero point off by one).
pub(crate) fn within_noise(m: &crate::compare::Metrics, n: &crate::report::model::Noise) -> bool {
    m.max_abs <= NOISE_FACTOR * n.max_abs && m.rmse <= NOISE_FACTOR * n.rms
}

/// Sets the verdict's class from its failing values, culprits and anomalies.
pub fn classify(verdict: &mut Verdict, nodes: &[NodeReport]) {
    let failing = nodes
        .iter()
        .flat_map(|n| n.values.iter().map(move |v| (n, v)))
        .filter(|(_, v)| v.status == ValueStatus::Fail);
    let (explained, unexplained): (Vec<_>, Vec<_>) =
        failing.partition(|(_, v)| precision_explains(v));
    verdict.precision_limited = explained.iter().map(|(n, v)| NodeRef::of(n, v)).collect();
    let ideal_culprits = verdict.culprits.iter().all(|c| {
        nodes
            .iter()
            .flat_map(|n| &n.values)
            .find(|v| v.name == c.value)
            .and_then(|v| v.noise.as_ref())
            .is_some_and(|n| n.tolerance_used > 1.0 || n.nonfinite > 0)
    });
    verdict.status = if !unexplained.is_empty() {
        Status::Drift
    } else if !verdict.anomalies.is_empty() {
        // A node whose own error is beyond rounding is a fault, whatever the precision explains downstream of it.
        Status::Anomalous
    } else if !explained.is_empty() || (!verdict.culprits.is_empty() && ideal_culprits) {
        match verdict.outputs_pass {
            true => Status::PrecisionLimited,
            false => Status::PrecisionInsufficient,
        }
    } else if !verdict.anomalies.is_empty() || !verdict.culprits.is_empty() {
        Status::Anomalous
    } else {
        Status::Clean
    };
}
