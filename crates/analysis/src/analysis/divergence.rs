//! Matches reference and target values by ONNX name, compares them node by node in topological order, and
//! finds the first divergent node.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::compare::{compare_at, detail, Scaling, ToleranceSpec};
use crate::model::Graph;
use crate::report::model::{
    Coverage, NodeRef, NodeReport, RefPrecision, Status, ValueReport, ValueStatus, Verdict,
    INCOMPLETE_PERCENT,
};
use crate::tensor::Tensor;

fn unchecked(name: &str, reason: String, is_output: bool) -> ValueReport {
    ValueReport {
        name: name.to_string(),
        status: ValueStatus::Unchecked,
        reason: Some(reason),
        shape: vec![],
        target_dtype: None,
        judged_in: None,
        tolerance: None,
        metrics: None,
        reference_stats: None,
        target_stats: None,
        worst: None,
        detail: None,
        noise: None,
        rounding: None,
        introduced: None,
        is_output,
        sample: None,
        adopted: None,
        variation: None,
    }
}

/// Compares one value given what each side produced (or why it did not). `scaling`: the largest RMS of the
/// activations the value was computed from, and the floor of a value that only copies elements (see
/// [`crate::compare::scales`]); the default `atol` is scaled to it and to the value's own RMS, an explicit `--atol`
/// is applied as given.
pub fn compare_pair(
    name: &str,
    reference: Result<&Tensor, &str>,
    target: Result<&Tensor, &str>,
    tol: &ToleranceSpec,
    scaling: impl Into<Scaling>,
    is_output: bool,
    heatmap: bool,
) -> ValueReport {
    let scaling = scaling.into();
    let r = match reference {
        Ok(r) => r,
        Err(why) => return unchecked(name, format!("reference: {why}"), is_output),
    };
    let t = match target {
        Ok(t) => t,
        Err(why) => return unchecked(name, format!("target: {why}"), is_output),
    };
    let rule = tol.resolve(t.dtype(), Some(scaling));
    let (judged, tolerance) = (rule.judged, rule.tolerance);
    let mut v = unchecked(name, String::new(), is_output);
    v.reason = None;
    v.shape = t.shape().to_vec();
    v.target_dtype = Some(t.dtype());
    v.judged_in = (judged != t.dtype()).then_some(judged);
    v.tolerance = Some(tolerance);
    if r.shape() != t.shape() {
        v.status = ValueStatus::Fail;
        v.reason = Some(format!(
            "shape mismatch: reference {:?}, target {:?}",
            r.shape(),
            t.shape()
        ));
        return v;
    }
    if let Some(d) = crate::compare::strings::pair(r, t) {
        return strings_compared(v, d);
    }
    let rf = r.as_f64();
    let c = compare_at(&rf, t, tolerance, (rule.operands, scaling.rms));
    let (m, rs, ts, worst, tolerance) = (c.metrics, c.reference, c.target, c.worst, c.tolerance);
    let spread = c.spread;
    v.tolerance = Some(tolerance);
    let owned: Vec<f64>;
    let flat = match rf.as_slice() {
        Some(s) => s,
        None => {
            owned = rf.iter().copied().collect();
            &owned
        }
    };
    v.detail = Some(detail(flat, t, spread, heatmap));
    v.status = if m.failed > 0 {
        ValueStatus::Fail
    } else {
        ValueStatus::Pass
    };
    v.rounding = (r.dtype().is_float() && t.dtype().is_float()).then_some(c.rounding);
    v.metrics = Some(m);
    v.reference_stats = Some(rs);
    v.target_stats = Some(ts);
    v.worst = worst;
    v
}

/// A string value's report: pass when every string is equal, else fail with the first difference.
fn strings_compared(
    mut v: ValueReport,
    d: Result<crate::compare::strings::StringDiff, String>,
) -> ValueReport {
    v.tolerance = None;
    let (fails, reason) = crate::compare::strings::outcome(d, ("reference", "target"));
    v.status = match fails {
        true => ValueStatus::Fail,
        false => ValueStatus::Pass,
    };
    v.reason = reason;
    v
}

/// Why output `k` of `n` is not compared, if it is not: Dropout's mask before opset 12 (inference leaves it
/// unspecified; ONNX Runtime writes zeros where ONNX's reference writes ones), and ZipMap's sequence of maps.
fn undefined_output(n: &crate::model::Node, k: usize, opset: i64) -> Option<&'static str> {
    if n.op_type == "ZipMap" && n.domain == "ai.onnx.ml" {
        return Some(
            "not compared: ZipMap writes a sequence of maps, which holds exactly its input's values (compared at \
             the input's producer)",
        );
    }
    (n.op_type == "Dropout" && n.domain.is_empty() && k == 1 && opset < 12).then_some(
        "not compared: ONNX leaves Dropout's mask unspecified in inference before opset 12 (runtimes differ)",
    )
}

/// Builds node reports in topological order from value reports made as values arrived; a value with no report
/// is unchecked with `missing(name)` as the reason.
pub fn assemble(
    graph: &Graph,
    mut reports: HashMap<String, ValueReport>,
    precision: &HashMap<String, RefPrecision>,
    missing: impl Fn(&str) -> String,
) -> Vec<NodeReport> {
    let outputs: HashSet<&str> = graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let opset = graph.default_opset().unwrap_or(0);
    graph
        .nodes
        .iter()
        .map(|n| {
            let precision = precision.get(&n.name).cloned().unwrap_or(RefPrecision::F64);
            let values: Vec<ValueReport> = n
                .outputs
                .iter()
                .enumerate()
                .filter(|(_, o)| !o.is_empty())
                .map(|(k, o)| {
                    let is_output = outputs.contains(o.as_str());
                    if let Some(why) = undefined_output(n, k, opset) {
                        reports.remove(o);
                        return unchecked(o, why.into(), is_output);
                    }
                    match (&precision, reports.remove(o)) {
                        (
                            RefPrecision::Unavailable { reason } | RefPrecision::Seeded { reason },
                            _,
                        ) => unchecked(o, format!("reference: {reason}"), is_output),
                        (_, Some(mut v)) => {
                            v.is_output = is_output;
                            v
                        }
                        (_, None) => unchecked(o, missing(o), is_output),
                    }
                })
                .collect();
            let status = node_status(&values);
            NodeReport {
                index: n.index,
                name: n.name.clone(),
                op_type: n.op_type.clone(),
                domain: n.domain.clone(),
                inputs: n.inputs.clone(),
                reference: precision,
                status,
                values,
                target_placement: None,
                ran_on: None,
                not_measured: Default::default(),
            }
        })
        .collect()
}

fn severity(v: &ValueReport) -> (f64, f64) {
    match &v.metrics {
        Some(m) => (m.fail_fraction, m.max_rel),
        None => (1.0, f64::INFINITY),
    }
}

/// A node's status from its values': fail > pass > unchecked.
pub fn node_status(values: &[ValueReport]) -> ValueStatus {
    if values.iter().any(|v| v.status == ValueStatus::Fail) {
        ValueStatus::Fail
    } else if values.iter().any(|v| v.status == ValueStatus::Pass) {
        ValueStatus::Pass
    } else {
        ValueStatus::Unchecked
    }
}

/// The verdict: first divergent node, the worst values, whether the outputs pass.
pub fn verdict(graph: &Graph, nodes: &[NodeReport]) -> Verdict {
    let outputs: HashSet<&str> = graph.outputs.iter().map(|o| o.name.as_str()).collect();
    verdict_for(&outputs, nodes)
}

/// [`verdict`] given the names of the graph outputs.
pub fn verdict_for(outputs: &HashSet<&str>, nodes: &[NodeReport]) -> Verdict {
    let failing: Vec<(&NodeReport, &ValueReport)> = nodes
        .iter()
        .flat_map(|n| n.values.iter().map(move |v| (n, v)))
        .filter(|(_, v)| v.status == ValueStatus::Fail)
        .collect();
    let first_divergence = failing.first().map(|(n, v)| NodeRef::of(n, v));
    let mut worst = failing.clone();
    worst.sort_by(|a, b| {
        severity(b.1)
            .partial_cmp(&severity(a.1))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let outputs_pass = !failing
        .iter()
        .any(|(_, v)| outputs.contains(v.name.as_str()));
    Verdict {
        status: if failing.is_empty() {
            Status::Clean
        } else {
            Status::Drift
        },
        first_divergence,
        failing_values: failing.len(),
        worst: worst
            .iter()
            .take(10)
            .map(|(n, v)| NodeRef::of(n, v))
            .collect(),
        outputs_pass,
        culprits: vec![],
        anomalies: vec![],
        precision_limited: vec![],
    }
}

/// Whether a value unchecked for `reason` hides something the verdict needs: not when no output depends on it
/// (tract prunes those), ONNX leaves it undefined, or its readers are computed from an exact stand-in (an
/// INT64_MAX slice bound tract cannot hold, read clamped).
pub fn hides(reason: &str) -> bool {
    !HIDE_NOTHING.iter().any(|w| reason.contains(w))
}

/// Words of the reasons [`hides`] does not count (as the places that leave values unchecked write them).
const HIDE_NOTHING: &[&str] = &[
    "no graph output depends on it",
    "ONNX leaves",
    "the Slice reads a copy clamped",
    "holds exactly its input's values",
    "fused in the target model",
    "equals a compared value",
    "an integer of another width, equal in f64",
];

/// A passing verdict becomes [`Status::Incomplete`] when more than [`INCOMPLETE_PERCENT`]% of the values hide
/// (unless `accept`).
pub fn incomplete(verdict: &mut Verdict, c: &Coverage, accept: bool) {
    let passing = matches!(verdict.status, Status::Clean | Status::PrecisionLimited);
    if passing && !accept && c.unchecked_hiding * 100 > INCOMPLETE_PERCENT * c.values.max(1) {
        verdict.status = Status::Incomplete;
    }
}

/// Compared / unchecked counts, with unchecked reasons grouped.
pub fn coverage(graph: &Graph, nodes: &[NodeReport]) -> Coverage {
    let mut c = Coverage {
        hidden: graph.hidden.len(),
        ..Default::default()
    };
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for v in nodes.iter().flat_map(|n| n.values.iter()) {
        c.values += 1;
        if v.status == ValueStatus::Unchecked {
            c.unchecked += 1;
            let why = v.reason.clone().unwrap_or_default();
            c.unchecked_hiding += usize::from(hides(&why));
            *by.entry(why).or_default() += 1;
        } else {
            c.compared += 1;
        }
    }
    c.unchecked_by_reason = by;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(status: Status) -> Verdict {
        let mut v = verdict_for(&HashSet::new(), &[]);
        v.status = status;
        v
    }

    fn coverage_of(values: usize, hiding: usize) -> Coverage {
        Coverage {
            values,
            compared: values - hiding,
            unchecked: hiding,
            unchecked_hiding: hiding,
            ..Default::default()
        }
    }

    #[test]
    fn a_passing_run_that_hides_many_values_is_incomplete() {
        // issue 32: a wgpu run with 239 of 607 values unchecked said CLEAN, exit 0
        let mut v = verdict(Status::Clean);
        incomplete(&mut v, &coverage_of(607, 239), false);
        assert_eq!(v.status, Status::Incomplete);
        assert!(v.status.fails(false));
        let mut v = verdict(Status::PrecisionLimited);
        incomplete(&mut v, &coverage_of(100, 6), false);
        assert_eq!(v.status, Status::Incomplete);
    }

    #[test]
    fn a_few_unchecked_values_drift_or_acceptance_keep_their_verdict() {
        let mut v = verdict(Status::Clean);
        incomplete(&mut v, &coverage_of(100, 5), false);
        assert_eq!(v.status, Status::Clean, "5% is within the allowance");
        let mut v = verdict(Status::Clean);
        incomplete(&mut v, &coverage_of(607, 239), true);
        assert_eq!(v.status, Status::Clean, "--accept-incomplete");
        let mut v = verdict(Status::Drift);
        incomplete(&mut v, &coverage_of(607, 239), false);
        assert_eq!(v.status, Status::Drift, "drift found is drift");
    }

    #[test]
    fn pruned_and_undefined_values_hide_nothing() {
        assert!(!hides(
            "reference: tract pruned it: no graph output depends on it"
        ));
        assert!(!hides(
            "not compared: ONNX leaves Dropout's mask unspecified in inference before opset 12 (runtimes differ)"
        ));
        assert!(hides("target: node ScatterND failed on the host"));
        assert!(hides("reference: not computable (Concat `Concat_82`)"));
    }
}
