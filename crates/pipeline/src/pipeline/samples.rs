//! Several input samples (`--samples N`, or several `test_data_set` directories): the whole comparison runs once
//! per sample and the reports merge into one in which, per value, the worst sample decides — its figures are shown
//! and the value names the sample. The verdict's status, culprits and inputs are those of the worst sample (most
//! severe status, then most failing values); first divergence, failing values and the worst list are recounted over
//! the merged values; culprits and anomalies found on other samples are added after the worst sample's. Each
//! sample's own verdict stays in `report.samples`. (Polygraphy's `debug reduce` silently uses one sample.)

use std::collections::{HashMap, HashSet};

use super::{compare, CompareSettings};
use crate::analysis::determinism::hash;
use crate::analysis::divergence::{node_status, verdict_for};
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::report::model::{Report, SampleVerdict, ValueReport, ValueStatus, Verdict};

/// One sample's run.
struct Sample {
    label: String,
    report: Report,
    inputs: Inputs,
}

/// The comparison over every input sample `s.inputs` describes, merged (a single sample is a plain comparison).
pub fn compare_samples(s: &CompareSettings) -> Result<(Report, Inputs)> {
    let specs = s.inputs.per_sample()?;
    if specs.len() == 1 {
        return compare(s);
    }
    let mut runs: Vec<Sample> = Vec::with_capacity(specs.len());
    for (label, spec) in specs {
        let mut one = s.clone();
        one.inputs = spec;
        let (report, inputs) = compare(&one).map_err(|e| in_sample(e, &label))?;
        runs.push(Sample {
            label,
            report,
            inputs,
        });
        refuse_identical(&runs)?;
    }
    Ok(merge(runs))
}

/// An error in one sample, naming it.
fn in_sample(e: Error, label: &str) -> Error {
    match e {
        Error::Ort { reason } => Error::Ort {
            reason: format!("input sample {label}: {reason}"),
        },
        Error::Reference { reason } => Error::Reference {
            reason: format!("input sample {label}: {reason}"),
        },
        other => other,
    }
}

/// Samples whose inputs are all equal (every input loaded from the same files) would repeat one comparison.
fn refuse_identical(runs: &[Sample]) -> Result<()> {
    let [.., a, b] = runs else { return Ok(()) };
    let hashes = |i: &Inputs| i.tensors.iter().map(|(_, t)| hash(t)).collect::<Vec<_>>();
    if hashes(&a.inputs) != hashes(&b.inputs) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "input samples {} and {} are identical (every input is loaded from a file): leave an input to be generated, \
         or give one test_data_set directory per sample",
        a.label, b.label
    )))
}

/// How bad a sample's outcome is: status severity, then failing values.
fn sample_rank(r: &Report) -> (u8, usize) {
    (r.verdict.status.severity(), r.verdict.failing_values)
}

/// How bad a value is: failed > passed > unchecked, then the share of its tolerance used.
fn value_rank(v: &ValueReport) -> (u8, f64) {
    let status = match v.status {
        ValueStatus::Fail => 2,
        ValueStatus::Pass => 1,
        ValueStatus::Unchecked => 0,
    };
    let used = v.metrics.as_ref().map(|m| m.tolerance_used).unwrap_or(0.0);
    (status, if used.is_nan() { f64::INFINITY } else { used })
}

/// One report from several samples' (see the module doc).
fn merge(mut runs: Vec<Sample>) -> (Report, Inputs) {
    let worst = (0..runs.len())
        .max_by_key(|&k| (sample_rank(&runs[k].report), std::cmp::Reverse(k)))
        .unwrap_or(0);
    let mut report = runs[worst].report.clone();
    worst_values(&mut report, &runs);
    let outputs: HashSet<&str> = report
        .values()
        .filter(|(_, v)| v.is_output)
        .map(|(_, v)| v.name.as_str())
        .collect();
    let mut verdict = verdict_for(&outputs, &report.nodes);
    drop(outputs);
    let order: Vec<usize> = std::iter::once(worst)
        .chain((0..runs.len()).filter(|&k| k != worst))
        .collect();
    keep_findings(
        &mut verdict,
        &report.verdict,
        order.iter().map(|&k| &runs[k].report.verdict),
    );
    report.verdict = verdict;
    report.samples = runs
        .iter()
        .enumerate()
        .map(|(k, r)| sample_verdict(k, r, k == worst))
        .collect();
    report.timings.total_ms = runs.iter().map(|r| r.report.timings.total_ms).sum();
    report.notes.push(format!(
        "{} input samples ({}); per value the worst sample's figures are shown; the verdict's culprits and the \
         inputs above are sample {worst}'s ({})",
        runs.len(),
        runs.iter().map(|r| r.label.as_str()).collect::<Vec<_>>().join(", "),
        runs[worst].label
    ));
    let inputs = std::mem::take(&mut runs[worst].inputs);
    (report, inputs)
}

/// Every value replaced by its worst sample's report, naming the sample; node statuses recounted.
fn worst_values(report: &mut Report, runs: &[Sample]) {
    let by_name: Vec<HashMap<&str, &ValueReport>> = runs
        .iter()
        .map(|r| {
            r.report
                .values()
                .map(|(_, v)| (v.name.as_str(), v))
                .collect()
        })
        .collect();
    for node in report.nodes.iter_mut() {
        for v in node.values.iter_mut() {
            let found = by_name
                .iter()
                .enumerate()
                .filter_map(|(k, m)| m.get(v.name.as_str()).map(|x| (k, *x)))
                .max_by(|a, b| {
                    value_rank(a.1)
                        .partial_cmp(&value_rank(b.1))
                        .unwrap_or(std::cmp::Ordering::Equal)
                });
            if let Some((k, w)) = found {
                *v = w.clone();
                v.sample = Some(k);
            }
        }
        node.status = node_status(&node.values);
    }
}

/// The worst sample's status; culprits, anomalies and precision-limited values of every sample, worst first,
/// each node once.
fn keep_findings<'a>(
    merged: &mut Verdict,
    worst: &Verdict,
    all: impl Iterator<Item = &'a Verdict>,
) {
    merged.status = worst.status;
    for v in all {
        for c in &v.culprits {
            if !merged.culprits.iter().any(|x| x.node == c.node) {
                merged.culprits.push(c.clone());
            }
        }
        for a in &v.anomalies {
            if !merged.anomalies.iter().any(|x| x.node == a.node) {
                merged.anomalies.push(a.clone());
            }
        }
        for p in &v.precision_limited {
            if !merged.precision_limited.contains(p) {
                merged.precision_limited.push(p.clone());
            }
        }
    }
}

fn sample_verdict(index: usize, run: &Sample, decides: bool) -> SampleVerdict {
    let v = &run.report.verdict;
    SampleVerdict {
        index,
        label: run.label.clone(),
        status: v.status,
        failing_values: v.failing_values,
        first_divergence: v.first_divergence.clone(),
        culprits: v.culprits.iter().map(|c| c.node.clone()).collect(),
        anomalies: v.anomalies.iter().map(|a| a.node.clone()).collect(),
        decides,
    }
}
