//! Markdown summary of a `phantom onnx` report, for CI logs and pull-request comments.

use std::fmt::Write as _;

use super::model::{RefPrecision, Report, Status};
use crate::units::num;

/// The mark of a verdict class.
pub fn mark(s: Status) -> &'static str {
    match s {
        Status::Clean => "✅",
        Status::PrecisionLimited => "⚠️",
        Status::Anomalous | Status::Drift | Status::PrecisionInsufficient | Status::Incomplete => {
            "❌"
        }
    }
}

/// The summary: verdict, first divergence with its metrics, the worst values, coverage, provenance.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let verdict = format!(
        "{} **{}** — {}",
        mark(r.verdict.status),
        r.verdict.status.name(),
        super::terminal::verdict_sentence(r)
    );
    let _ = writeln!(s, "### phantom: `{}`\n\n{verdict}\n", r.model.path);
    s.push_str(&samples_table(r));
    if let Some(f) = &r.verdict.first_divergence {
        let _ = writeln!(
            s,
            "First divergence: node #{} `{}` ({}) → value `{}`\n",
            f.node_index, f.node, f.op_type, f.value
        );
    }
    s.push_str(&culprit_lines(r));
    s.push_str(&worst_table(r));
    s.push_str(&coverage_line(r));
    s.push_str(&not_measured_lines(r));
    s.push_str(&provenance_line(r));
    s
}

/// One row per input sample with its verdict, when there were several samples.
fn samples_table(r: &Report) -> String {
    let mut s = String::new();
    if r.samples.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "| input sample | verdict | values out of tolerance | culprits |\n|---|---|---|---|"
    );
    for k in &r.samples {
        let decides = if k.decides { " (decides)" } else { "" };
        let _ = writeln!(
            s,
            "| {} {}{decides} | {} | {} | {} |",
            k.index,
            k.label,
            k.status.name(),
            k.failing_values,
            k.culprits.join(", ")
        );
    }
    let _ = writeln!(s);
    s
}

/// Each culprit node with its causes and their fixes.
fn culprit_lines(r: &Report) -> String {
    let mut s = String::new();
    for c in &r.verdict.culprits {
        let _ = writeln!(
            s,
            "**Culprit**: node #{} `{}` ({}, {} basis)\n",
            c.node_index,
            c.node,
            c.op_type,
            c.basis.name()
        );
        for k in &c.causes {
            let _ = writeln!(
                s,
                "- **{}** ({}): {} — *fix*: {}",
                k.kind.name(),
                k.confidence.name(),
                k.summary,
                k.fix
            );
        }
        s.push('\n');
    }
    s
}

/// The worst values with their metrics, or the reason a value has none.
fn worst_table(r: &Report) -> String {
    let mut s = String::new();
    let failing: Vec<_> = r
        .verdict
        .worst
        .iter()
        .filter_map(|w| r.find_value(&w.value))
        .collect();
    if failing.is_empty() {
        return s;
    }
    let _ = writeln!(s, "| # | op | node | value | max abs | max rel | out of tol | max ulp |\n|---|---|---|---|---|---|---|---|");
    for (n, v) in failing {
        match &v.metrics {
            Some(m) => {
                let _ = writeln!(
                    s,
                    "| {} | {} | `{}` | `{}` | {} | {} | {:.2}% | {} |",
                    n.index,
                    n.op_type,
                    n.name,
                    v.name,
                    num(m.max_abs),
                    num(m.max_rel),
                    100.0 * m.fail_fraction,
                    m.max_ulp
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "| {} | {} | `{}` | `{}` | {} | | | |",
                    n.index,
                    n.op_type,
                    n.name,
                    v.name,
                    v.reason.clone().unwrap_or_default()
                );
            }
        }
    }
    let _ = writeln!(s);
    s
}

/// How many values were compared, and how many nodes lack a full-precision reference.
fn coverage_line(r: &Report) -> String {
    let reduced = r
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.reference,
                RefPrecision::Reduced { .. }
                    | RefPrecision::Seeded { .. }
                    | RefPrecision::Unavailable { .. }
            )
        })
        .count();
    format!(
        "Coverage: {} of {} values compared, {} unchecked; {} node(s) with a reduced-precision or unavailable reference.\n\n",
        r.coverage.compared, r.coverage.values, r.coverage.unchecked, reduced
    )
}

/// Nodes whose figures an optional stage could not measure, with the reason: the first [`NOT_MEASURED_SHOWN`].
fn not_measured_lines(r: &Report) -> String {
    let all: Vec<String> = r
        .nodes
        .iter()
        .flat_map(|n| {
            n.not_measured.iter().map(move |(what, why)| {
                format!(
                    "- node #{} `{}` ({}): {what} — {why}",
                    n.index, n.name, n.op_type
                )
            })
        })
        .collect();
    if all.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "Not measured ({}; the verdict stands on the compared values):

",
        all.len()
    );
    for line in all.iter().take(NOT_MEASURED_SHOWN) {
        let _ = writeln!(s, "{line}");
    }
    if all.len() > NOT_MEASURED_SHOWN {
        let _ = writeln!(
            s,
            "- … and {} more (see the JSON report's `not_measured`)",
            all.len() - NOT_MEASURED_SHOWN
        );
    }
    s.push('\n');
    s
}

/// How many not-measured figures the Markdown summary lists.
const NOT_MEASURED_SHOWN: usize = 20;

/// The reference, the target, the model's hash and phantom's version, in small print.
fn provenance_line(r: &Report) -> String {
    let d = &r.target.details;
    format!(
        "<sub>reference {} {} · target {} {} ({}, opt {}) · model sha256 `{}` · phantom {}</sub>\n",
        r.reference.name,
        r.reference.version,
        r.target.name,
        r.target.version,
        d.requested(),
        d.opt_level(),
        &r.model.sha256[..12.min(r.model.sha256.len())],
        r.phantom_version
    )
}
