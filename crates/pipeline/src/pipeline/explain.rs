//! The attribute and explain stages: the error each node introduces (the target running every node alone on
//! the reference's values), then the first divergence, the culprits and their causes — a fusion cause settled by a
//! rerun of the target with graph optimizations off.

use std::borrow::Cow;
use std::collections::HashMap;

use rayon::prelude::*;

use super::degrade::{self, Said};
use super::parts::{prune_heatmaps, stage};
use super::reasons::{explain_causes, model_differences, origin_weights};
use super::stream::Compared;
use super::{CompareSettings, Lane, Prepared};
use crate::analysis::{self, anomaly, attribution, causes, culprit};
use crate::bounded::chunk_bytes;
use crate::error::Result;
use crate::model::Graph;
use crate::report::model::{CauseKind, Introduced, NodeReport, ValueReport, Verdict};
use crate::runner::isolate;
use crate::runner::reference::Rounding;
use crate::spill::{Held, Values};
use crate::targets::{self, Capture, Isolated};
use crate::tensor::Tensor;

/// Introduced error: every node on the target with reference inputs, compared with the reference. When the
/// reference values wait on disk (bounded memory), the nodes run in groups whose values fit a chunk of the budget,
/// each group's feeds read back from disk, compared, then dropped. Returns the error each node's value introduces,
/// by value, and what the stage says (the nodes the target could not run alone).
pub fn attribute(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &Compared,
    lane: Alone<'_>,
    round: &Rounding,
) -> Result<(Vec<Introduces>, Said)> {
    let msg = format!(
        "introduced error: every node on {} with reference inputs",
        lane.label
    );
    let pb = stage(s.progress, &msg);
    let graph = match lane.nodes {
        Some(names) => Cow::Owned(Graph {
            nodes: (p.graph.nodes.iter())
                .filter(|n| names.contains(&n.name))
                .cloned()
                .collect(),
            ..p.graph.clone()
        }),
        None => Cow::Borrowed(&p.graph),
    };
    let mut said = Said::default();
    if graph.nodes.is_empty() {
        pb.finish_and_clear();
        return Ok((vec![], said));
    }
    let groups: Vec<Cow<Graph>> = match (&cmp.held, s.budget()) {
        (Held::Disk(_), Some(budget)) => {
            isolate::parts(&graph, &cmp.held, chunk_bytes(budget, &p.graph))
                .into_iter()
                .map(Cow::Owned)
                .collect()
        }
        _ => vec![graph],
    };
    let mut all = Isolated::default();
    let mut found = vec![];
    for g in &groups {
        let mut iso = lane.target.run_isolated(g, &p.inputs, &cmp.held, round)?;
        let values = std::mem::take(&mut iso.values);
        found.extend(introduced(s, lane.reports, cmp, &values, round));
        all.absorb(iso);
    }
    if let (true, Some(budget)) = (groups.len() > 1, s.budget()) {
        // Groups read back from disk, each within a chunk of the budget.
        all.groups = groups.len();
        all.group_bytes = chunk_bytes(budget, &p.graph);
    }
    said.notes.extend(all.notes());
    for (node, why) in &all.excluded {
        said.node(node, "introduced error", why);
    }
    pb.finish_and_clear();
    Ok((found, said))
}

/// A value, and the error its node introduces (none where it was not measured).
pub type Introduces = (String, Option<Introduced>);

/// What the attribution stage reads of a lane: its target (which runs the nodes alone), its label, the nodes to run
/// alone (None: every node) and the value reports of the comparison.
pub struct Alone<'a> {
    pub target: &'a mut dyn crate::targets::Target,
    pub label: String,
    pub nodes: Option<&'a std::collections::HashSet<String>>,
    pub reports: &'a super::Reports,
}

/// What the anomaly test knows about the operands of `value`: their largest RMS and the coarsest float type the
/// target stores any of them in.
pub(super) fn operands_of(
    cmp: &Compared,
    rounding: Option<&Rounding>,
    value: &str,
) -> anomaly::Operands {
    anomaly::Operands {
        rms: cmp.scales.operands(value),
        coarsest: (cmp.scales.operand_names(value).iter())
            .filter_map(|o| rounding.and_then(|r| r.get(o)).copied())
            .filter(|d| d.is_float())
            .max_by(|a, b| anomaly::epsilon(*a).total_cmp(&anomaly::epsilon(*b))),
    }
}

/// Each isolated output compared with the reference: the error its node introduces, by value.
fn introduced(
    s: &CompareSettings,
    reports: &super::Reports,
    cmp: &Compared,
    isolated: &HashMap<String, Tensor>,
    round: &Rounding,
) -> Vec<Introduces> {
    // Values are compared in parallel: most are too small to occupy every core alone.
    isolated
        .par_iter()
        .filter(|(name, _)| reports.contains_key(*name))
        .filter_map(|(name, t_iso)| {
            let r = cmp.held.tensor(name)?;
            let (r, t_iso) = match &s.slice {
                Some(sp) => (Cow::Owned(sp.apply(&r)), Cow::Owned(sp.apply(t_iso))),
                None => (r, Cow::Borrowed(t_iso)),
            };
            // Fed the reference's values as the target stores them, the node alone is judged in the precision
            // its value was judged in, in the graph.
            let operands = crate::compare::Scaling {
                source: reports.get(name.as_str()).and_then(|v| v.judged_in),
                ..cmp.scales.scaling(name)
            };
            let alone = analysis::compare_pair(
                name,
                Ok(&r),
                Ok(&t_iso),
                &s.tolerance,
                operands,
                false,
                false,
            );
            Some((
                name.clone(),
                attribution::introduced(&alone, &r, round.get(name).copied()),
            ))
        })
        .collect()
}

/// The node reports, and the verdict with its culprits and their causes.
pub struct Found {
    pub nodes: Vec<NodeReport>,
    pub verdict: Verdict,
    /// What the report should say of the findings (anomalies the model's own precision explains).
    pub notes: Vec<String>,
}

/// Assembles node reports from the lane's value reports (`reports`, taken out of it) and finds the first
/// divergence, the culprits and their causes. Returns what it found and what it says (the figures it could not
/// measure, which the lane marks on the nodes with the earlier stages', [`super::Lane::explain`]).
pub fn explain(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &Compared,
    (lane, reports): (&Lane, super::Reports),
) -> Result<(Found, Said)> {
    let (mut found, causes, settled) = find(s, p, cmp, lane, reports)?;
    let mut said = Said {
        notes: std::mem::take(&mut found.notes),
        ..Default::default()
    };
    if let Err(e) = &causes {
        for c in &found.verdict.culprits {
            said.node(&c.node, "causes", &e.to_string());
        }
    }
    said.optional("causes", causes);
    if let Err(e) = &settled {
        for c in (found.verdict.culprits.iter())
            .filter(|c| c.causes.iter().any(|k| k.kind == CauseKind::Fusion))
        {
            said.node(&c.node, "the fusion check", &e.to_string());
        }
    }
    let settled = said.optional("the fusion check", settled);
    let tf32 =
        degrade::injected("tf32").and_then(|_| settle_tf32(s, p, cmp, lane, &mut found.verdict));
    match said.optional("the TF32 check", tf32) {
        Some(Some(note)) => said.notes.push(note),
        Some(None) => said.notes.extend(tf32_note(&lane.spec, &found.verdict)),
        None => {}
    }
    if settled == Some(true) {
        said.notes.push(
            "a fusion cause was checked by rerunning the target with --ort-opt-level disable"
                .into(),
        );
    }
    Ok((found, said))
}

/// The node reports, the verdict and its culprits; whether their causes were found (an error: the causes stage
/// failed, and the culprits stand without causes); whether a fusion cause was settled by a rerun (an error: the
/// check failed, and the fusion causes stand as found).
fn find(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &Compared,
    lane: &Lane,
    reports: HashMap<String, ValueReport>,
) -> Result<(Found, Result<()>, Result<bool>)> {
    let rounding = lane.rounding.as_ref();
    let missing = &cmp.reference.missing;
    let mut nodes = analysis::assemble(&p.graph, reports, &cmp.reference.precision, |n| {
        let why = missing.get(n).map(String::as_str).unwrap_or("not produced");
        format!("reference: {why}")
    });
    let placement = match lane.out.facts.as_ref() {
        Some(crate::runner::facts::TargetFacts::Ort(o)) => o.placement.as_slice(),
        _ => &[],
    };
    let names: std::collections::HashSet<&str> =
        p.graph.nodes.iter().map(|n| n.name.as_str()).collect();
    for n in nodes.iter_mut() {
        n.target_placement = lane.out.placement.get(&n.name).cloned();
        n.ran_on = analysis::placed::ran_on(placement, &names, &n.name);
    }
    prune_heatmaps(&mut nodes);
    let mut verdict = analysis::verdict(&p.graph, &nodes);
    verdict.culprits = culprit::find(&p.graph, &nodes);
    let causes = crate::error::guard("causes", || {
        degrade::injected("causes")?;
        explain_causes(p, cmp, lane, &nodes, &mut verdict);
        Ok(())
    });
    let settled = match rounding {
        Some(_) => {
            degrade::injected("fusion").and_then(|_| settle_fusion(s, p, cmp, lane, &mut verdict))
        }
        None => Ok(false),
    };
    // With `--target-model`: both models decoded once, for the origins and the differences at each finding.
    let models = (lane.spec.model.as_ref())
        .and(lane.target.own_model())
        .map(|t| causes::differ::Models::new(&p.graph, t));
    let differs = |v: &str| models.as_ref().is_some_and(|m| !m.explain(v).is_empty());
    analysis::origin::blame(&p.graph, &nodes, &mut verdict.culprits, &differs);
    origin_weights(p, cmp, lane, &nodes, &mut verdict);
    let operands = |v: &str| operands_of(cmp, rounding, v);
    verdict.anomalies = anomaly::find(&nodes, &verdict.culprits, operands, lane.spec.sums_f32());
    let notes = super::reasons::chosen_precision(p, cmp, lane, &nodes, &mut verdict);
    anomaly::classify(&mut verdict, &nodes);
    culprit::precision_last(&mut verdict.culprits);
    if let Some(models) = &models {
        model_differences(models, &mut verdict);
    }
    let found = Found {
        nodes,
        verdict,
        notes: notes.into_iter().collect(),
    };
    Ok((found, causes, settled))
}

/// A fusion cause is settled by rerunning the target with graph optimizations off: confirmed, or turned into
/// amplification.
fn settle_fusion(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &Compared,
    lane: &Lane,
    verdict: &mut Verdict,
) -> Result<bool> {
    let fused: Vec<String> = verdict
        .culprits
        .iter()
        .filter(|c| c.causes.iter().any(|k| k.kind == CauseKind::Fusion))
        .map(|c| c.value.clone())
        .collect();
    let Some(unfused) = lane.spec.unfused().filter(|_| !fused.is_empty()) else {
        return Ok(false);
    };
    let what = "fusion check: the target with --ort-opt-level disable";
    let reruns = rerun_values(s, p, cmp, &unfused, &fused, what)?;
    for c in verdict.culprits.iter_mut() {
        if let Some(rep) = reruns.get(&c.value) {
            analysis::fusion::settle(c, rep);
        }
    }
    Ok(true)
}

/// `values` from a run of the target as `spec` says, each compared with the reference.
fn rerun_values(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &Compared,
    spec: &targets::TargetSpec,
    values: &[String],
    what: &str,
) -> Result<HashMap<String, ValueReport>> {
    let pb = stage(s.progress, what);
    let mut t = targets::open(spec, &p.graph, &p.lib)?;
    super::paired::pair(s, t.as_mut(), &p.graph, &p.inputs);
    let names: Vec<&str> = values.iter().map(String::as_str).collect();
    let out = t.run(&p.graph, &p.inputs, Capture::Names(&names))?;
    let mut reports = HashMap::new();
    for name in values {
        if let (Some(r), Some(v)) = (cmp.held.tensor(name), out.values.get(name)) {
            let operands = cmp.scales.scaling(name);
            let rep =
                analysis::compare_pair(name, Ok(&r), Ok(v), &s.tolerance, operands, false, false);
            reports.insert(name.clone(), rep);
        }
    }
    pb.finish_and_clear();
    Ok(reports)
}

/// On ONNX Runtime's CUDA provider with TF32 on, in a graph with float32 MatMul/Gemm/Conv: the target rerun with
/// `use_tf32=0` confirms or refutes TF32 as the cause of each float32 culprit and anomaly ([`analysis::tf32`]).
/// Returns the note saying what the rerun found; None when nothing is in play.
fn settle_tf32(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &Compared,
    lane: &Lane,
    verdict: &mut Verdict,
) -> Result<Option<String>> {
    let tensor_cores = p
        .graph
        .nodes
        .iter()
        .any(|n| analysis::tf32::on_tensor_cores(&n.op_type));
    let Some(off) = lane.spec.without_tf32().filter(|_| tensor_cores) else {
        return Ok(None);
    };
    let f32_value = |v: &String| {
        let d = lane
            .rounding
            .as_ref()
            .and_then(|r| r.get(v.as_str()).copied());
        d.is_none_or(|d| d == crate::tensor::DType::F32)
    };
    let values: Vec<String> = verdict
        .culprits
        .iter()
        .map(|c| &c.value)
        .chain(verdict.anomalies.iter().map(|a| &a.value))
        .filter(|v| f32_value(v))
        .cloned()
        .collect();
    if values.is_empty() {
        return Ok(None);
    }
    let what = "TF32 check: the target with use_tf32=0";
    let reruns = rerun_values(s, p, cmp, &off, &values, what)?;
    let (mut confirmed, mut refuted) = (vec![], vec![]);
    let mut tally = |node: &str, settled| match settled {
        analysis::tf32::Settled::Confirmed => confirmed.push(format!("`{node}`")),
        analysis::tf32::Settled::Refuted(m) => {
            refuted.push(format!("`{node}` (max |t − r| {})", crate::units::num(m)))
        }
    };
    for c in verdict.culprits.iter_mut() {
        if let Some(rep) = reruns.get(&c.value) {
            let settled = analysis::tf32::settle(c, "CUDA", rep);
            tally(&c.node, settled);
        }
    }
    for a in verdict.anomalies.iter_mut() {
        if let Some(rep) = reruns.get(&a.value) {
            let settled = analysis::tf32::settle_anomaly(a, "CUDA", rep);
            tally(&a.node, settled);
        }
    }
    let mut said = vec![];
    if !confirmed.is_empty() {
        said.push(format!("TF32 causes the error of {}", list(&confirmed)));
    }
    if !refuted.is_empty() {
        said.push(format!(
            "without TF32 the error stays at {}: not TF32",
            list(&refuted)
        ));
    }
    Ok(Some(format!(
        "TF32 was checked by rerunning the target with --ep-option use_tf32=0: {}",
        said.join("; ")
    )))
}

/// Up to five names, then how many more.
fn list(names: &[String]) -> String {
    match names.len() {
        0..=5 => names.join(", "),
        n => format!("{} and {} more", names[..5].join(", "), n - 5),
    }
}

/// TensorRT builds float32 MatMul, Gemm and Conv layers with TF32 tactics by default on Ampere and newer GPUs
/// (10-bit mantissa operands), and ONNX Runtime's TensorRT provider has no option to turn that off, so no rerun can
/// settle it (the CUDA provider's culprits are settled by a rerun with `use_tf32=0`, [`settle_tf32`]). When such a
/// node is a float32 culprit on TensorRT, the note says how to tell TF32 from a kernel fault; it does not claim
/// TF32 as the cause.
fn tf32_note(spec: &targets::TargetSpec, verdict: &Verdict) -> Option<String> {
    let o = spec.engine.ort()?;
    let linear: Vec<&str> = verdict
        .culprits
        .iter()
        .filter(|c| analysis::tf32::on_tensor_cores(&c.op_type))
        .map(|c| c.node.as_str())
        .take(3)
        .collect();
    (o.provider == "tensorrt" && spec.precision.is_none() && !linear.is_empty()).then(|| {
        format!(
            "culprits {} are float32 MatMul/Gemm/Conv on TensorRT, which may pick TF32 tactics (10-bit mantissa) \
             on Ampere and newer GPUs; compare with --ep cuda --ep-option use_tf32=0 to tell TF32 from a kernel \
             fault",
            linear.join(", "),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::{Engine, OrtSpec, TargetSpec};

    fn verdict(op: &str) -> Verdict {
        serde_json::from_value(serde_json::json!({
            "status": "drift", "first_divergence": null, "failing_values": 1, "worst": [], "outputs_pass": true,
            "culprits": [{"node_index": 4, "node": "Conv_1", "op_type": op, "value": "c", "basis": "introduced",
                          "max_abs": 1e-3, "noise_ratio": null, "causes": [], "spoils": [], "path": []}]
        }))
        .unwrap()
    }

    fn on(provider: &str, tf32: Option<&str>) -> TargetSpec {
        let mut o = OrtSpec::new(provider);
        if let Some(v) = tf32 {
            o.options.insert("use_tf32".into(), v.into());
        }
        TargetSpec {
            engine: Engine::Ort(o),
            precision: None,
            model: None,
        }
    }

    #[test]
    fn tf32_is_noted_for_tensorrt_linear_culprits_and_settled_by_a_rerun_on_cuda() {
        let note = tf32_note(&on("tensorrt", None), &verdict("Conv")).unwrap();
        assert!(
            note.contains("Conv_1") && note.contains("use_tf32=0"),
            "{note}"
        );
        assert!(tf32_note(&on("tensorrt", None), &verdict("Softmax")).is_none());
        assert!(tf32_note(&on("cuda", None), &verdict("Conv")).is_none());
        let off = on("cuda", None).without_tf32().unwrap();
        assert_eq!(off.engine.ort().unwrap().options["use_tf32"], "0");
        assert!(on("cuda", Some("1")).without_tf32().is_some());
        assert!(on("cuda", Some("0")).without_tf32().is_none());
        assert!(on("cpu", None).without_tf32().is_none());
        assert!(on("tensorrt", None).without_tf32().is_none());
        let mut fp16 = on("cuda", None);
        fp16.precision = Some(phantom_precision::LowPrecision::F16);
        assert!(fp16.without_tf32().is_none());
    }
}
