//! Markdown summary of several targets: a verdict per target, the answer, and one column per target on the nodes
//! where any target fails or two disagree.

use std::fmt::Write as _;

use super::MultiReport;
use crate::report::model::ValueStatus;
use crate::report::terminal::verdict_line;
use crate::units::num;

fn cell(status: ValueStatus, used: Option<f64>) -> String {
    match (status, used) {
        (ValueStatus::Unchecked, _) | (_, None) => "—".into(),
        (ValueStatus::Pass, Some(u)) => format!("✅ {}", num(u)),
        (ValueStatus::Fail, Some(u)) => format!("❌ {}", num(u)),
    }
}

/// The summary.
pub fn render(m: &MultiReport) -> String {
    let mut s = String::new();
    let path = m
        .targets
        .first()
        .map(|r| r.model.path.as_str())
        .unwrap_or("");
    let _ = writeln!(s, "### phantom: `{path}` on {} targets\n", m.targets.len());
    for r in &m.targets {
        let mark = crate::report::markdown::mark(r.verdict.status);
        let _ = writeln!(s, "- {mark} **{}**: {}", r.target.label, verdict_line(r));
    }
    let _ = writeln!(s, "\n**Targets**: {}\n", m.agreement.conclusion);
    let a = &m.agreement;
    let rows: Vec<_> = a
        .nodes
        .iter()
        .filter(|n| {
            n.status.contains(&ValueStatus::Fail)
                || n.pairs.iter().any(|p| p.status == ValueStatus::Fail)
        })
        .take(20)
        .collect();
    if rows.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "| # | node | op | {} | closer to f64 | targets apart |\n|---|---|---|{}---|---|",
        a.labels.join(" | "),
        "---|".repeat(a.labels.len())
    );
    for n in rows {
        let cols: Vec<String> = (0..a.labels.len())
            .map(|k| cell(n.status[k], n.tolerance_used[k]))
            .collect();
        let apart = n
            .pairs
            .iter()
            .filter(|p| p.status == ValueStatus::Fail)
            .map(|p| {
                format!(
                    "{}↔{} {}×",
                    p.a,
                    p.b,
                    p.tolerance_used.map(num).unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            s,
            "| {} | `{}` | {} | {} | {} | {} |",
            n.index,
            n.name,
            n.op_type,
            cols.join(" | "),
            super::closer_text(n),
            apart
        );
    }
    let _ = writeln!(
        s,
        "\nCells: share of its tolerance the node's worst value uses against f64."
    );
    s
}
