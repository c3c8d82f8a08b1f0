//! Terminal summary of several targets: each target's verdict and what ran, one column per target on the nodes
//! that matter (tolerance used against f64), which target is closer to f64, the target-vs-target columns, and the
//! answer.

use std::fmt::Write as _;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, Table};
use owo_colors::{OwoColorize, Stream::Stdout};

use super::{AgreeStatus, MultiReport, NodeAgreement};
use crate::report::model::ValueStatus;
use crate::report::terminal::{target_lines, verdict_line};
use crate::units::num;

fn cell(status: ValueStatus, used: Option<f64>) -> String {
    match (status, used) {
        (ValueStatus::Unchecked, _) | (_, None) => "—".into(),
        (ValueStatus::Pass, Some(u)) => format!("✓ {}", num(u)),
        (ValueStatus::Fail, Some(u)) => format!("✗ {}", num(u)),
    }
}

/// Nodes worth a row: any target fails or any pair disagrees; without any, the `top` using most tolerance.
fn rows(m: &MultiReport, top: usize) -> Vec<&NodeAgreement> {
    let nodes = &m.agreement.nodes;
    let bad = |n: &&NodeAgreement| {
        n.status.contains(&ValueStatus::Fail)
            || n.pairs.iter().any(|p| p.status == ValueStatus::Fail)
    };
    let mut shown: Vec<&NodeAgreement> = nodes.iter().filter(bad).take(top).collect();
    if shown.is_empty() {
        let used = |n: &NodeAgreement| {
            n.tolerance_used
                .iter()
                .flatten()
                .copied()
                .fold(0.0, f64::max)
        };
        shown = nodes.iter().collect();
        shown.sort_by(|a, b| used(b).total_cmp(&used(a)));
        shown.truncate(top);
        shown.sort_by_key(|n| n.index);
    }
    shown
}

fn table(m: &MultiReport, top: usize) -> Table {
    let labels = &m.agreement.labels;
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let mut header: Vec<String> = vec!["#".into(), "op".into(), "node".into()];
    header.extend(labels.iter().map(|l| format!("{l} vs f64")));
    header.push("closer to f64 (|t − f64|)".into());
    let pair_names: Vec<(String, String)> = m
        .agreement
        .nodes
        .iter()
        .flat_map(|n| n.pairs.iter())
        .fold(vec![], |mut acc, p| {
            if !acc.iter().any(|(a, b)| a == &p.a && b == &p.b) {
                acc.push((p.a.clone(), p.b.clone()));
            }
            acc
        });
    header.extend(pair_names.iter().map(|(a, b)| format!("{a} vs {b}")));
    t.set_header(header);
    for n in rows(m, top) {
        let mut row: Vec<Cell> = vec![
            Cell::new(n.index),
            Cell::new(&n.op_type),
            Cell::new(&n.name),
        ];
        row.extend((0..labels.len()).map(|k| Cell::new(cell(n.status[k], n.tolerance_used[k]))));
        row.push(Cell::new(super::closer_text(n)));
        for (a, b) in &pair_names {
            let p = n.pairs.iter().find(|p| &p.a == a && &p.b == b);
            row.push(Cell::new(
                p.map(|p| cell(p.status, p.tolerance_used))
                    .unwrap_or("—".into()),
            ));
        }
        t.add_row(row);
    }
    t
}

/// Renders the several-targets report.
pub fn render(m: &MultiReport, top: usize) -> String {
    let mut s = String::new();
    let Some(first) = m.targets.first() else {
        return s;
    };
    let _ = writeln!(
        s,
        "{} {} (sha256 {}…, {} nodes): {} targets against one f64 reference run",
        "phantom".if_supports_color(Stdout, |t| t.bold()),
        first.model.path,
        &first.model.sha256[..12.min(first.model.sha256.len())],
        first.model.nodes,
        m.targets.len()
    );
    for r in &m.targets {
        let _ = writeln!(
            s,
            "\n[{}] {}",
            r.target.label.if_supports_color(Stdout, |t| t.bold()),
            verdict_line(r)
        );
        s.push_str(&target_lines(r));
    }
    let _ = writeln!(
        s,
        "\ncells: share of its tolerance the node's worst value uses (✗ above 1); target-vs-target columns compare the \
         targets with each other\n{}",
        table(m, top)
    );
    let a = &m.agreement;
    let head = match a.status {
        AgreeStatus::Agree => "agreement"
            .if_supports_color(Stdout, |t| t.green())
            .to_string(),
        AgreeStatus::Disagree => "disagreement"
            .if_supports_color(Stdout, |t| t.red())
            .to_string(),
    };
    let _ = writeln!(s, "{head}: {}", a.conclusion);
    let closer: Vec<String> = a
        .labels
        .iter()
        .zip(&a.closer_nodes)
        .map(|(l, n)| format!("{l} on {n}"))
        .collect();
    let _ = writeln!(
        s,
        "clearly closer to f64 (2× or more): {} node(s)",
        closer.join(", ")
    );
    s
}

/// One line per target and one for the agreement (for `--quiet`).
pub fn verdict_lines(m: &MultiReport) -> String {
    let mut s = String::new();
    for r in &m.targets {
        let _ = writeln!(s, "{}: {}", r.target.label, verdict_line(r));
    }
    let _ = writeln!(s, "targets: {}", m.agreement.conclusion);
    s
}
