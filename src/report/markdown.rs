//! Markdown summary of a `phantom onnx` report, for CI logs and pull-request comments.

use std::fmt::Write as _;

use super::model::{RefPrecision, Report, Status};
use super::terminal::num;

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
    if !r.samples.is_empty() {
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
    }
    if let Some(f) = &r.verdict.first_divergence {
        let _ = writeln!(
            s,
            "First divergence: node #{} `{}` ({}) → value `{}`\n",
            f.node_index, f.node, f.op_type, f.value
        );
    }
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
    let failing: Vec<_> = r
        .verdict
        .worst
        .iter()
        .filter_map(|w| r.find_value(&w.value))
        .collect();
    if !failing.is_empty() {
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
    }
    let reduced = r
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.reference,
                RefPrecision::Reduced { .. } | RefPrecision::Unavailable { .. }
            )
        })
        .count();
    let _ = writeln!(
        s,
        "Coverage: {} of {} values compared, {} unchecked; {} node(s) with a reduced-precision or unavailable reference.\n",
        r.coverage.compared, r.coverage.values, r.coverage.unchecked, reduced
    );
    let d = &r.target.details;
    let _ = writeln!(
        s,
        "<sub>reference {} {} · target {} {} ({}, opt {}) · model sha256 `{}` · phantom {}</sub>",
        r.reference.name,
        r.reference.version,
        r.target.name,
        r.target.version,
        d.requested(),
        d.opt_level(),
        &r.model.sha256[..12.min(r.model.sha256.len())],
        r.phantom_version
    );
    s
}
