//! Several targets as JUnit: one `<testsuite>` per target (its outputs and failing values against f64) and one
//! for the targets' agreement (a case per pair of targets, failing at their first disagreement).

use super::MultiReport;
use crate::report::junit::{cases, render_suites, Case};
use crate::report::model::ValueStatus;

/// The JUnit document.
pub fn render(m: &MultiReport) -> String {
    let mut suites: Vec<(String, Vec<Case>)> = m
        .targets
        .iter()
        .map(|r| {
            (
                format!("phantom onnx {} on {}", r.model.path, r.target.label),
                cases(r),
            )
        })
        .collect();
    suites.push(("phantom targets agreement".into(), agreement_cases(m)));
    let borrowed: Vec<(String, &[Case])> = suites
        .iter()
        .map(|(n, c)| (n.clone(), c.as_slice()))
        .collect();
    render_suites(&borrowed)
}

/// A case per pair of targets: failing with the first value they disagree on.
fn agreement_cases(m: &MultiReport) -> Vec<Case> {
    let labels = &m.agreement.labels;
    let mut out = vec![];
    for (i, a) in labels.iter().enumerate() {
        for b in &labels[i + 1..] {
            let first = m.agreement.nodes.iter().find_map(|n| {
                n.pairs
                    .iter()
                    .find(|p| &p.a == a && &p.b == b && p.status == ValueStatus::Fail)
                    .map(|p| (n, p))
            });
            let failure = first.map(|(n, p)| {
                format!(
                    "{a} and {b} first disagree at node #{} {} {} (value {}): max |a − b| {:e}, {:.3}× tolerance\n{}",
                    n.index,
                    n.op_type,
                    n.name,
                    p.value,
                    p.max_abs.unwrap_or(f64::NAN),
                    p.tolerance_used.unwrap_or(f64::NAN),
                    m.agreement.conclusion
                )
            });
            out.push(Case {
                name: format!("{a} vs {b}"),
                class: "phantom.agreement".into(),
                failure,
                ..Default::default()
            });
        }
    }
    out
}
