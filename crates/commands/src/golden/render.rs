//! What `phantom check` prints and writes: the summary with the first regressed value and the worst regressions,
//! and the JUnit file (one case per value).

use std::fmt::Write;
use std::path::Path;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use super::check::{CheckReport, CheckStatus, ValueCheck};
use crate::report::junit::{self, Case};
use crate::units::num;

/// The check as JUnit: one case per value, failing where it regressed or is missing.
pub fn junit(report: &CheckReport, model: &Path) -> String {
    let cases: Vec<Case> = report
        .values
        .iter()
        .map(|v| Case {
            name: format!("#{} {} {} → {}", v.node_index, v.op_type, v.node, v.value),
            class: "phantom.check".into(),
            failure: match v.status {
                CheckStatus::Regressed => Some(format!(
                    "drift {} > budget {}{}",
                    num(v.drift),
                    num(v.budget),
                    detail(v)
                )),
                CheckStatus::Missing => Some("recorded, but not produced now".into()),
                _ => None,
            },
            skipped: None,
        })
        .collect();
    junit::render(&format!("phantom check {}", model.display()), &cases)
}

/// The counts, the first regressed value with the worst regressions, and what changed in the environment; on
/// GitHub Actions (`github`) an error annotation for the first regressed value.
pub fn summary(report: &CheckReport, model: &Path, golden: &Path, github: bool) -> String {
    let mut s = format!(
        "phantom check {} against {}: {} identical, {} within budget, {} regressed, {} missing\n",
        model.display(),
        golden.display(),
        report.identical,
        report.within,
        report.regressed,
        report.missing
    );
    if let Some(f) = &report.first_regressed {
        s += &first_regressed(f, github);
        let _ = writeln!(s, "{}", regressed_table(report));
    }
    if report.environment_changes.is_empty() {
        s += "environment: unchanged\n";
    }
    for c in &report.environment_changes {
        let _ = writeln!(
            s,
            "changed since the record: {}: {} → {}",
            c.what, c.recorded, c.now
        );
    }
    s
}

fn detail(v: &ValueCheck) -> String {
    v.detail
        .as_ref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default()
}

/// The first regressed value, and on GitHub Actions an error annotation for it.
fn first_regressed(f: &ValueCheck, github: bool) -> String {
    let mut s = format!(
        "first regressed: node #{} {} `{}` → `{}`: drift {} > budget {}{}\n",
        f.node_index,
        f.op_type,
        f.node,
        f.value,
        num(f.drift),
        num(f.budget),
        detail(f)
    );
    if github {
        let _ = writeln!(
            s,
            "::error title=phantom numeric regression::{} `{}` drifted {} (budget {})",
            f.op_type,
            f.node,
            num(f.drift),
            num(f.budget)
        );
    }
    s
}

/// The first ten regressed values with their drift and budget.
fn regressed_table(report: &CheckReport) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["#", "op", "node", "value", "drift", "budget"]);
    for v in report
        .values
        .iter()
        .filter(|v| v.status == CheckStatus::Regressed)
        .take(10)
    {
        t.add_row(vec![
            v.node_index.to_string(),
            v.op_type.clone(),
            v.node.clone(),
            v.value.clone(),
            num(v.drift),
            num(v.budget),
        ]);
    }
    t
}
