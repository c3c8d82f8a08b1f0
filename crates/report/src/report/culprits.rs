//! Plain-text rendering of the culprits and their causes (terminal and Markdown share it).

use std::fmt::Write as _;

use super::model::{Basis, Culprit, Report, TargetFacts};
use crate::units::num;

fn basis(c: &Culprit) -> String {
    match c.basis {
        Basis::Introduced => format!(
            "makes max |t − r| {} on its own (fed with reference inputs){}",
            num(c.max_abs),
            c.noise_ratio
                .map(|r| format!(", {}× the error of correct rounding", num(r)))
                .unwrap_or_default()
        ),
        Basis::Ideal => format!(
            "fails even computed exactly with values stored in the target's precision (max |ideal − f64| {})",
            num(c.max_abs)
        ),
        Basis::Origin => match c.noise_ratio {
            Some(r) => format!(
                "within tolerance, but its own error (fed with reference inputs, max |t − r| {}, {}× the error of \
                 correct rounding) is where the error a culprit downstream amplifies starts",
                num(c.max_abs),
                num(r)
            ),
            None => format!(
                "within tolerance, but the error its value carries (max |t − r| {}) is where the error a culprit \
                 downstream amplifies starts",
                num(c.max_abs)
            ),
        },
        Basis::Cumulative => format!("fails in the graph on clean inputs (max |t − r| {})", num(c.max_abs)),
    }
}

/// ` (ran on P)` where ONNX Runtime split the graph between providers (the node's `ran_on`); empty where one
/// provider ran everything.
fn ran_on(r: &Report, node: &str) -> String {
    let TargetFacts::Ort(o) = &r.target.details else {
        return String::new();
    };
    if o.placement.len() < 2 {
        return String::new();
    }
    let on = (r.nodes.iter())
        .find(|n| n.name == node)
        .and_then(|n| n.ran_on.as_deref());
    match on {
        Some(p) if p.starts_with("fused by") => format!(" ({p})"),
        Some(p) => format!(" (ran on {p})"),
        None => String::new(),
    }
}

/// The culprits, one block each: node, basis, causes with confidence and fix, what it spoils.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    for (k, c) in r.verdict.culprits.iter().enumerate() {
        let _ = writeln!(
            s,
            "culprit {}: node #{} {} `{}` → `{}`{}: {}",
            k + 1,
            c.node_index,
            c.op_type,
            c.node,
            c.value,
            ran_on(r, &c.node),
            basis(c)
        );
        for cause in &c.causes {
            let _ = writeln!(
                s,
                "  cause ({}, {}): {}\n    fix: {}",
                cause.kind.name(),
                cause.confidence.name(),
                cause.summary,
                cause.fix
            );
        }
        if !c.spoils.is_empty() {
            let _ = writeln!(
                s,
                "  spoils {} via {}",
                c.spoils.join(", "),
                c.path.join(" → ")
            );
        }
    }
    for (k, a) in r.verdict.anomalies.iter().enumerate() {
        let _ = writeln!(
            s,
            "anomaly {}: node #{} {} `{}` → `{}`{}: {}",
            k + 1,
            a.node_index,
            a.op_type,
            a.node,
            a.value,
            ran_on(r, &a.node),
            a.summary
        );
        for cause in &a.causes {
            let _ = writeln!(
                s,
                "  cause ({}, {}): {}\n    fix: {}",
                cause.kind.name(),
                cause.confidence.name(),
                cause.summary,
                cause.fix
            );
        }
    }
    s
}
