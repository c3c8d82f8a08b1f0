//! GraphViz rendering of a `phantom onnx` report: the model's nodes, edges by value, each node filled by its drift
//! (green pass, red fail, grey unchecked, orange outline for a reduced-precision reference).

use std::collections::HashMap;
use std::fmt::Write as _;

use super::model::{RefPrecision, Report, ValueStatus};
use crate::model::Graph;

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The report's graph in DOT.
pub fn render(r: &Report, graph: &Graph) -> String {
    let mut s = String::from("digraph phantom {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n");
    for n in &r.nodes {
        let fill = match n.status {
            ValueStatus::Pass => "#c8e6c9",
            ValueStatus::Fail => "#ef9a9a",
            ValueStatus::Unchecked => "#e0e0e0",
        };
        let worst = n
            .values
            .iter()
            .filter_map(|v| v.metrics.as_ref())
            .map(|m| m.max_rel)
            .fold(0.0f64, f64::max);
        let outline = if matches!(
            n.reference,
            RefPrecision::Reduced { .. }
                | RefPrecision::Seeded { .. }
                | RefPrecision::Unavailable { .. }
        ) {
            ", color=\"#ef6c00\", penwidth=2"
        } else {
            ""
        };
        let label = format!(
            "#{} {}\\n{}\\nmax rel {}",
            n.index,
            n.op_type,
            n.name,
            crate::units::num(worst)
        );
        let _ = writeln!(
            s,
            "  n{} [label={}, fillcolor=\"{fill}\"{outline}];",
            n.index,
            quote(&label).replace("\\\\n", "\\n")
        );
    }
    let producers: HashMap<&str, usize> = graph.producers();
    for n in &graph.nodes {
        for i in n.inputs.iter().filter(|i| !i.is_empty()) {
            if let Some(p) = producers.get(i.as_str()) {
                let _ = writeln!(s, "  n{p} -> n{};", n.index);
            }
        }
    }
    s.push_str("}\n");
    s
}
