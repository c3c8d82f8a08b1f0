//! The assemble stage: the one report model every renderer reads, from what the stages found.

use std::collections::BTreeMap;
use std::time::Instant;

use super::explain::Found;
use super::parts::{environment, ms};
use super::stream::Compared;
use super::{CompareSettings, Lane, Prepared};
use crate::analysis;
use crate::model::Graph;
use crate::report::model::{
    ModelRef, ModelSummary, Report, RunnerInfo, TargetInfo, Timings, ToleranceReport,
    SCHEMA_VERSION,
};
use crate::runner::reference::TRACT_VERSION;
use crate::tensor::DType;

/// The report of a comparison.
pub fn report(
    s: &CompareSettings,
    p: &Prepared,
    lane: &Lane,
    cmp: &Compared,
    found: Found,
    (t_explain, t_all): (Instant, Instant),
) -> Report {
    let mut coverage = analysis::coverage(&p.graph, &found.nodes);
    coverage.introduced = lane.attribution.scope;
    coverage.noise_skipped = lane.noise.skipped.clone();
    let mut found = found;
    analysis::incomplete(&mut found.verdict, &coverage, s.accept_incomplete);
    let notes = notes(p, lane, cmp);
    let details = lane
        .out
        .facts
        .clone()
        .unwrap_or_else(|| lane.target.facts(&p.graph));
    Report {
        schema: SCHEMA_VERSION.into(),
        phantom_version: env!("CARGO_PKG_VERSION").into(),
        command: s.command.clone(),
        model: summary(&p.graph),
        conversion: lane.target.conversion().cloned(),
        target_model: lane.spec.model.as_ref().and_then(|_| {
            lane.target.own_model().map(|g| ModelRef {
                path: g.path.display().to_string(),
                sha256: g.sha256.clone(),
                pairing: lane.paired.report.clone(),
            })
        }),
        environment: environment(),
        reference: RunnerInfo {
            name: "tract-f64".into(),
            version: TRACT_VERSION.into(),
            details: cmp.reference.details.clone(),
        },
        target: TargetInfo {
            name: lane.target.name(),
            version: lane.target.version(),
            label: lane.spec.label(),
            spec: lane.spec.clone(),
            details,
        },
        tolerance: tolerance(s),
        inputs: p.inputs.summaries.clone(),
        verdict: found.verdict,
        coverage,
        instrumentation: lane.target.instrumentation(),
        nodes: found.nodes,
        timings: Timings {
            import_ms: p.import_ms,
            reference_ms: cmp.reference_ms,
            target_ms: lane.ms,
            noise_ms: lane.noise.ms,
            noise_beside: lane.noise.beside.is_some(),
            reference_ahead: cmp.reference_ahead,
            compare_ms: cmp.compare_time.as_secs_f64() * 1e3,
            attribution_ms: lane.attribution.ms,
            explain_ms: ms(t_explain),
            total_ms: ms(t_all),
            by_op: cmp.by_op.clone(),
        },
        notes,
        samples: vec![],
    }
}

/// What the user should know about the run, from every stage.
fn notes(p: &Prepared, lane: &Lane, cmp: &Compared) -> Vec<String> {
    let mut notes = p.inputs.notes.clone();
    notes.extend(lane.target.notes());
    notes.extend(cmp.reference.notes.iter().cloned());
    notes.extend(lane.out.notes.iter().cloned());
    notes.extend(lane.said.notes.iter().cloned());
    if p.graph.was_unsorted {
        notes.push("the model's node list is not topologically sorted; phantom sorted it".into());
    }
    notes.extend(p.graph.notes.iter().cloned());
    notes
}

pub fn summary(graph: &Graph) -> ModelSummary {
    ModelSummary {
        path: graph.path.display().to_string(),
        sha256: graph.sha256.clone(),
        ir_version: graph.ir_version,
        opsets: graph
            .opsets
            .iter()
            .map(|(d, v)| {
                let d = if d.is_empty() { "ai.onnx" } else { d.as_str() };
                (d.to_string(), *v)
            })
            .collect(),
        producer: graph.producer.clone(),
        nodes: graph.nodes.len(),
        was_unsorted: graph.was_unsorted,
        hidden_values: graph.hidden.clone(),
    }
}

fn tolerance(s: &CompareSettings) -> ToleranceReport {
    let by_dtype: BTreeMap<String, _> = [DType::F32, DType::F16, DType::Bf16, DType::F64]
        .iter()
        .map(|d| (d.name().to_string(), s.tolerance.for_dtype(*d)))
        .collect();
    ToleranceReport {
        atol: s.tolerance.atol,
        rtol: s.tolerance.rtol,
        by_dtype,
    }
}
