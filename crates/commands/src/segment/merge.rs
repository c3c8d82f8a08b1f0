//! `phantom merge`: the partial reports of a plan joined into the report of the whole model. Node reports are put
//! back in the model's topological order; the verdict, the first divergence and the culprits are recomputed on the
//! whole graph (a segment cannot see that its first node's inputs already failed upstream), each culprit keeping
//! the causes its own segment found with the values at hand.

use std::collections::HashMap;
use std::path::Path;

use super::run::PartialReport;
use super::{load_graph, store, Plan};
use crate::analysis::{self, anomaly, culprit};
use crate::error::{Error, Result};
use crate::model::Graph;
use crate::report::model::{Anomaly, Cause, IntroducedScope, NodeReport, Report, Timings};

/// A plan whose segments compared no value gives no verdict.
fn compared_something(c: &crate::report::model::Coverage) -> Result<()> {
    match c.compared {
        0 => Err(Error::Usage(
            "nothing was compared in any segment (run `phantom segment --index K --json` to see each value's \
             reason); phantom gives no verdict on nothing"
                .into(),
        )),
        _ => Ok(()),
    }
}

/// The joined report and each segment job's measured peak memory and time.
pub struct Merged {
    pub report: Report,
    /// (segment, peak RSS in bytes, wall ms) per job.
    pub jobs: Vec<(usize, Option<u64>, f64)>,
}

/// Reads every partial report; an error names the segments missing and how to run them.
pub fn read_partials(dir: &Path, plan: &Plan) -> Result<Vec<PartialReport>> {
    let mut found = vec![];
    let mut missing = vec![];
    for seg in &plan.segments {
        let path = store::report_path(dir, seg.index);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let p: PartialReport = ciborium::from_reader(bytes.as_slice()).map_err(|e| {
                    Error::Usage(format!(
                        "{}: not a segment report ({e}); run `phantom segment {} --index {}` again",
                        path.display(),
                        dir.display(),
                        seg.index
                    ))
                })?;
                if p.plan_sha256 != plan.model_sha256 || p.segment != seg.index {
                    return Err(Error::Usage(format!(
                        "{}: written for another plan or segment; run `phantom segment {} --index {}` again",
                        path.display(),
                        dir.display(),
                        seg.index
                    )));
                }
                found.push(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing.push(seg.index.to_string())
            }
            Err(e) => {
                return Err(Error::Io {
                    path: path.clone(),
                    source: e,
                })
            }
        }
    }
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "{} of {} segment report(s) missing: segment(s) {}; run `phantom segment {} --index I` for each, then \
             merge again",
            missing.len(),
            plan.segments.len(),
            missing.join(", "),
            dir.display()
        )));
    }
    Ok(found)
}

/// The segments' node reports, anomalies and culprits' causes, renumbered as the whole model's nodes.
struct Gathered {
    nodes: Vec<NodeReport>,
    anomalies: Vec<Anomaly>,
    causes: HashMap<String, Vec<Cause>>,
}

fn gathered(graph: &Graph, partials: &[PartialReport]) -> Result<Gathered> {
    let index: HashMap<&str, usize> = graph
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.index))
        .collect();
    let at = |name: &str| {
        index.get(name).copied().ok_or_else(|| {
            Error::Usage(format!(
                "a segment report names node `{name}`, which the model does not have; run `phantom plan` again"
            ))
        })
    };
    let outputs: std::collections::HashSet<&str> =
        graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let mut nodes = vec![];
    let mut anomalies = vec![];
    let mut causes = HashMap::new();
    for p in partials {
        for n in &p.report.nodes {
            let mut n = n.clone();
            n.index = at(&n.name)?;
            // A segment's cut declares the values it hands on as outputs; the model's outputs are what count.
            for v in n.values.iter_mut() {
                v.is_output = outputs.contains(v.name.as_str());
            }
            nodes.push(n);
        }
        for a in &p.report.verdict.anomalies {
            let mut a = a.clone();
            a.node_index = at(&a.node)?;
            anomalies.push(a);
        }
        for c in &p.report.verdict.culprits {
            causes.insert(c.node.clone(), c.causes.clone());
        }
    }
    Ok(Gathered {
        nodes,
        anomalies,
        causes,
    })
}

/// Where the segments ran nodes alone, summed (each segment screens its own values: see `IntroducedScope`).
fn introduced_scope(partials: &[PartialReport]) -> Option<IntroducedScope> {
    let scopes: Vec<IntroducedScope> = (partials.iter())
        .filter_map(|p| p.report.coverage.introduced)
        .collect();
    (!scopes.is_empty()).then(|| IntroducedScope {
        all: scopes.iter().all(|s| s.all),
        measured: scopes.iter().map(|s| s.measured).sum(),
        compared: scopes.iter().map(|s| s.compared).sum(),
    })
}

/// Joins the partial reports of the plan in `dir`.
pub fn merge(dir: &Path, plan: &Plan, command: Vec<String>) -> Result<Merged> {
    let partials = read_partials(dir, plan)?;
    let inputs = store::read_inputs(dir, plan)?;
    let graph = load_graph(plan, &inputs)?;
    let Gathered {
        mut nodes,
        mut anomalies,
        causes,
    } = gathered(&graph, &partials)?;
    nodes.sort_by_key(|n| n.index);
    anomalies.sort_by_key(|a| a.node_index);
    let mut verdict = analysis::verdict(&graph, &nodes);
    verdict.culprits = culprit::find(&graph, &nodes);
    let mut notes = vec![format!(
        "merged from {} segment(s) of the plan in {} (`phantom plan`, `phantom segment`, `phantom merge`)",
        partials.len(),
        dir.display()
    )];
    for c in verdict.culprits.iter_mut() {
        match causes.get(&c.node) {
            Some(found) => c.causes = found.clone(),
            None => notes.push(format!(
                "culprit `{}`: its segment did not name it (it starts a segment fed with drifted values), so no \
                 cause was sought",
                c.node
            )),
        }
    }
    verdict.anomalies = anomalies;
    anomaly::classify(&mut verdict, &nodes);
    let first = &partials[0].report;
    let mut report = first.clone();
    report.command = command;
    report.model = crate::pipeline::model_summary(&graph);
    report.inputs = inputs.summaries.clone();
    report.coverage = analysis::coverage(&graph, &nodes);
    report.coverage.introduced = introduced_scope(&partials);
    compared_something(&report.coverage)?;
    analysis::incomplete(
        &mut verdict,
        &report.coverage,
        plan.settings.accept_incomplete,
    );
    report.instrumentation = partials
        .last()
        .and_then(|p| p.report.instrumentation.clone());
    report.timings = summed(&partials);
    report.notes = notes;
    report.notes.extend(plan.notes.iter().cloned());
    for p in &partials {
        for n in &p.report.notes {
            if !report.notes.contains(n) {
                report.notes.push(n.clone());
            }
        }
    }
    report.nodes = nodes;
    report.verdict = verdict;
    let jobs = partials
        .iter()
        .map(|p| (p.segment, p.peak_rss_bytes, p.wall_ms))
        .collect();
    Ok(Merged { report, jobs })
}

/// Every stage's time summed over the segments (the time one machine would take running them one by one).
fn summed(partials: &[PartialReport]) -> Timings {
    let mut t = Timings::default();
    for p in partials {
        let s = &p.report.timings;
        t.import_ms += s.import_ms;
        t.reference_ms += s.reference_ms;
        t.reference_ahead |= s.reference_ahead;
        t.target_ms += s.target_ms;
        t.noise_ms += s.noise_ms;
        t.compare_ms += s.compare_ms;
        t.attribution_ms += s.attribution_ms;
        t.explain_ms += s.explain_ms;
        t.total_ms += p.wall_ms;
        for (op, o) in &s.by_op {
            let m = t.by_op.entry(op.clone()).or_default();
            m.values += o.values;
            m.reference_ms += o.reference_ms;
            m.compare_ms += o.compare_ms;
        }
    }
    t
}
