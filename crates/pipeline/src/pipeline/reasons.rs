//! The causes of each culprit: the cause families read on the reference's values, the weights hypothesis for the
//! origins of amplified errors (only where a provider other than ONNX Runtime's CPU one ran), and with
//! `--target-model` what differs between the two models; and anomalies the model's own precision choice explains.

use super::stream::Compared;
use super::{Lane, Prepared};
use crate::analysis::causes;
use crate::report::model::{Basis, CauseKind, Culprit, NodeReport, Verdict};
use crate::spill::Values;

/// The likely causes of each culprit.
pub(super) fn explain_causes(
    p: &Prepared,
    cmp: &Compared,
    lane: &Lane,
    nodes: &[NodeReport],
    verdict: &mut Verdict,
) {
    if verdict.culprits.is_empty() {
        return;
    }
    let rounding = lane.rounding.as_ref();
    let ev = causes::Evidence::new(
        &p.graph,
        rounding.map(|_| &cmp.held as &dyn Values),
        rounding,
        lane.target.range_issues(),
        nodes,
        &verdict.culprits,
    );
    let found: Vec<_> = verdict
        .culprits
        .iter()
        .map(|c| causes::explain(c, &ev))
        .collect();
    let narrows = narrows_weights(lane);
    for (c, mut f) in verdict.culprits.iter_mut().zip(found) {
        f.retain(|k| narrows || k.kind != CauseKind::WeightsNarrowed);
        c.causes = f;
    }
}

/// Whether the target may hold weights in a narrower type than the model's: an ONNX Runtime provider other than its
/// CPU one ran nodes (the CPU provider, and phantom's shaders, hold them as the model does).
fn narrows_weights(lane: &Lane) -> bool {
    let Some(crate::runner::facts::TargetFacts::Ort(o)) = lane.out.facts.as_ref() else {
        return false;
    };
    match o.placement.is_empty() {
        true => o.ep_requested != "CPUExecutionProvider",
        false => (o.placement.iter()).any(|p| p.provider != "CPUExecutionProvider"),
    }
}

/// The weights hypothesis ([`causes::weights_narrowed`]) for the origins of amplified errors, first among their
/// causes where it explains their own error.
pub(super) fn origin_weights(
    p: &Prepared,
    cmp: &Compared,
    lane: &Lane,
    nodes: &[NodeReport],
    verdict: &mut Verdict,
) {
    let origin =
        |c: &&crate::report::model::Culprit| c.basis == crate::report::model::Basis::Origin;
    let origins: Vec<_> = verdict.culprits.iter().filter(origin).cloned().collect();
    let Some(rounding) =
        (lane.rounding.as_ref()).filter(|_| !origins.is_empty() && narrows_weights(lane))
    else {
        return;
    };
    let values = &cmp.held as &dyn Values;
    let issues = lane.target.range_issues();
    let ev = causes::Evidence::new(
        &p.graph,
        Some(values),
        Some(rounding),
        issues,
        nodes,
        &origins,
    );
    for c in verdict.culprits.iter_mut().filter(|c| origin(&&**c)) {
        if let Some(cause) = causes::weights_narrowed(c, &ev) {
            c.causes.insert(0, cause);
        }
    }
}

/// With `--target-model`: what differs between the two models at each culprit and anomaly, as their first causes.
pub(super) fn model_differences(models: &causes::differ::Models, verdict: &mut Verdict) {
    for c in verdict.culprits.iter_mut() {
        let mut found = models.explain(&c.value);
        found.append(&mut c.causes);
        found.sort_by_key(|k| k.confidence);
        c.causes = found;
    }
    for a in verdict.anomalies.iter_mut() {
        a.causes = models.explain(&a.value);
    }
}

/// Anomalies whose whole error the model's own precision choice explains: a `MatMulNBits` at `accuracy_level = 4`
/// on ONNX Runtime's CPU provider, which quantizes its activations to int8 (the cause's numbers, at half to twice the
/// node's error). They are not anomalies; the note returned says how many and why.
pub(super) fn chosen_precision(
    p: &Prepared,
    cmp: &Compared,
    lane: &Lane,
    nodes: &[NodeReport],
    verdict: &mut Verdict,
) -> Option<String> {
    let as_culprits: Vec<Culprit> = (verdict.anomalies.iter())
        .filter(|a| a.op_type == "MatMulNBits")
        .map(|a| Culprit {
            node_index: a.node_index,
            node: a.node.clone(),
            op_type: a.op_type.clone(),
            value: a.value.clone(),
            basis: Basis::Introduced,
            max_abs: a.max_abs,
            noise_ratio: None,
            causes: vec![],
            spoils: vec![],
            path: vec![],
        })
        .collect();
    if as_culprits.is_empty() || !super::noise::int8_activations(&lane.spec) {
        return None;
    }
    let rounding = lane.rounding.as_ref();
    let held = rounding.map(|_| &cmp.held as &dyn Values);
    let ev = causes::Evidence::new(
        &p.graph,
        held,
        rounding,
        lane.target.range_issues(),
        nodes,
        &as_culprits,
    );
    let explained: Vec<&str> = (as_culprits.iter())
        .filter(|c| {
            causes::explain(c, &ev)
                .iter()
                .any(|k| k.kind == CauseKind::AccuracyLevel)
        })
        .map(|c| c.node.as_str())
        .collect();
    if explained.is_empty() {
        return None;
    }
    verdict
        .anomalies
        .retain(|a| !explained.contains(&a.node.as_str()));
    Some(format!(
        "{} MatMulNBits node(s) at accuracy_level 4 are off, alone, by what quantizing their activations to int8 \
         per block explains (ONNX Runtime's CPU kernel does, as the model asks): its chosen precision, not anomalies",
        explained.len()
    ))
}
