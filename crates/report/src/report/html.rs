//! Self-contained HTML report (handlebars template, inline CSS, JS and SVG; nothing fetched): summary, drift along
//! the graph, a sortable and filterable node table (with `--target-model`, what the target model holds of each
//! node's values), per-node detail on click, the command that reproduces it, and
//! a layered graph view coloured by verdict, and per value an error histogram, the worst elements and a |t − r|
//! heatmap with a channel selector and "jump to max difference".

use std::fmt::Write as _;

use handlebars::Handlebars;
use serde_json::json;

use super::model::{RefPrecision, Report, ValueStatus};
use crate::units::num;

const TEMPLATE: &str = include_str!("templates/report.html.hbs");

fn status_name(s: ValueStatus) -> &'static str {
    match s {
        ValueStatus::Pass => "pass",
        ValueStatus::Fail => "fail",
        ValueStatus::Unchecked => "unchecked",
    }
}

fn worst_rel(n: &super::model::NodeReport) -> Option<f64> {
    n.values
        .iter()
        .filter_map(|v| v.metrics.as_ref())
        .map(|m| m.max_rel)
        .reduce(f64::max)
}

fn introduced_used(n: &super::model::NodeReport) -> Option<f64> {
    n.values
        .iter()
        .filter_map(|v| v.introduced.as_ref())
        .map(|i| i.metrics.tolerance_used)
        .reduce(f64::max)
}

/// The culprits and their causes, each node clickable to its detail.
fn culprits(r: &Report) -> String {
    let mut s = String::new();
    for c in &r.verdict.culprits {
        let _ = write!(
            s,
            "<div class=\"culprit\"><b>culprit</b> <a href=\"#\" data-i=\"{}\">#{} {} <code>{}</code></a> ({} basis, max |t − r| {}{})<ul>",
            c.node_index,
            c.node_index,
            c.op_type,
            html_escape(&c.node),
            c.basis.name(),
            num(c.max_abs),
            c.noise_ratio
                .map(|x| format!(", {}× correct rounding", num(x)))
                .unwrap_or_default()
        );
        for k in &c.causes {
            let _ = write!(
                s,
                "<li><span class=\"cause {}\">{}</span> {} <i>({} confidence)</i><br>fix: {}</li>",
                k.confidence.name(),
                k.kind.name(),
                html_escape(&k.summary),
                k.confidence.name(),
                html_escape(&k.fix)
            );
        }
        if !c.spoils.is_empty() {
            let _ = write!(
                s,
                "<li>spoils <code>{}</code> via {}</li>",
                html_escape(&c.spoils.join(", ")),
                html_escape(&c.path.join(" → "))
            );
        }
        s.push_str("</ul></div>");
    }
    for a in &r.verdict.anomalies {
        let _ = write!(
            s,
            "<div class=\"culprit\"><b>anomaly</b> <a href=\"#\" data-i=\"{}\">#{} {} <code>{}</code></a>: {}</div>",
            a.node_index,
            a.node_index,
            a.op_type,
            html_escape(&a.node),
            html_escape(&a.summary)
        );
    }
    s
}

/// The largest share of its tolerance any output of `n` uses; a NaN/Inf mismatch counts as infinite.
fn tolerance_used(n: &super::model::NodeReport) -> Option<f64> {
    n.values
        .iter()
        .filter_map(|v| v.metrics.as_ref())
        .map(|m| {
            if m.nonfinite_mismatch > 0 {
                f64::INFINITY
            } else {
                m.tolerance_used
            }
        })
        .reduce(f64::max)
}

/// Fill by verdict, and an orange ring for a reduced-precision or unavailable reference.
fn paint(n: &super::model::NodeReport) -> (&'static str, &'static str) {
    let fill = match n.status {
        ValueStatus::Fail => "#d32f2f",
        ValueStatus::Pass => "#43a047",
        ValueStatus::Unchecked => "#9e9e9e",
    };
    let ring = matches!(
        n.reference,
        RefPrecision::Reduced { .. }
            | RefPrecision::Seeded { .. }
            | RefPrecision::Unavailable { .. }
    );
    (
        fill,
        if ring {
            " stroke=\"#ef6c00\" stroke-width=\"2\""
        } else {
            ""
        },
    )
}

/// Constants are exact copies on both sides: left out of the chart and the graph view.
fn drawn(n: &super::model::NodeReport) -> bool {
    n.op_type != "Constant"
}

/// Log-scale chart of how much of its tolerance each node's worst element uses (1 = the threshold).
fn chart(r: &Report) -> String {
    let (w, h, pad) = (1000.0, 220.0, 40.0);
    let (lo, hi) = (-6.0f64, 3.0f64);
    let y = |rel: f64| {
        let l = rel.max(1e-12).log10().clamp(lo, hi);
        pad / 2.0 + (hi - l) / (hi - lo) * (h - pad)
    };
    // Positions by rank among the drawn nodes, so leading constants take no room.
    let mut rank = std::collections::HashMap::new();
    let mut k = 0usize;
    for nd in &r.nodes {
        rank.insert(nd.index, k);
        k += drawn(nd) as usize;
    }
    let n = k.max(1) as f64;
    let x = |i: usize| pad + rank.get(&i).copied().unwrap_or(0) as f64 / n * (w - 2.0 * pad);
    let mut s = format!("<svg id=\"chart\" viewBox=\"0 0 {w} {h}\" width=\"100%\" xmlns=\"http://www.w3.org/2000/svg\">");
    for e in (lo as i32..=hi as i32).step_by(2) {
        let yy = y(10f64.powi(e));
        let _ = write!(s, "<line x1=\"{pad}\" x2=\"{}\" y1=\"{yy}\" y2=\"{yy}\" stroke=\"#eee\"/><text x=\"2\" y=\"{}\">1e{e}</text>", w - pad, yy + 4.0);
    }
    let yy = y(1.0);
    let _ = write!(s, "<line x1=\"{pad}\" x2=\"{}\" y1=\"{yy}\" y2=\"{yy}\" stroke=\"#c62828\" stroke-dasharray=\"6 4\"/>", w - pad);
    let pts: Vec<String> = r
        .nodes
        .iter()
        .filter(|nd| drawn(nd))
        .filter_map(|nd| tolerance_used(nd).map(|v| format!("{:.1},{:.1}", x(nd.index), y(v))))
        .collect();
    let _ = write!(
        s,
        "<polyline fill=\"none\" stroke=\"#90a4ae\" points=\"{}\"/>",
        pts.join(" ")
    );
    // Introduced error (the node alone, fed with reference inputs), where it was measured.
    let intro: Vec<String> = r
        .nodes
        .iter()
        .filter(|nd| drawn(nd))
        .filter_map(|nd| introduced_used(nd).map(|v| format!("{:.1},{:.1}", x(nd.index), y(v))))
        .collect();
    if !intro.is_empty() {
        let _ = write!(
            s,
            "<polyline id=\"introduced\" fill=\"none\" stroke=\"#ef6c00\" stroke-dasharray=\"3 3\" points=\"{}\"/>",
            intro.join(" ")
        );
    }
    for nd in r.nodes.iter().filter(|nd| drawn(nd)) {
        let used = tolerance_used(nd).unwrap_or(1e-6);
        let (fill, stroke) = paint(nd);
        let _ = write!(
            s,
            "<circle data-i=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{fill}\"{stroke}><title>#{} {} {} · uses {} of its tolerance</title></circle>",
            nd.index,
            x(nd.index),
            y(used),
            nd.index,
            nd.op_type,
            html_escape(&nd.name),
            num(used)
        );
    }
    s.push_str("</svg>");
    s
}

/// A layered drawing of the graph: columns by depth, nodes filled by verdict, each clickable to its detail.
fn graph_view(r: &Report) -> String {
    let producer: std::collections::HashMap<&str, usize> = r
        .nodes
        .iter()
        .flat_map(|n| n.values.iter().map(move |v| (v.name.as_str(), n.index)))
        .collect();
    let mut depth = vec![0usize; r.nodes.len()];
    let mut preds: Vec<Vec<usize>> = vec![vec![]; r.nodes.len()];
    for n in &r.nodes {
        for i in n
            .inputs
            .iter()
            .filter_map(|i| producer.get(i.as_str()))
            .filter(|&&i| drawn(&r.nodes[i]))
        {
            preds[n.index].push(*i);
            depth[n.index] = depth[n.index].max(depth[*i] + 1);
        }
    }
    let mut row_in_col: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let pos: Vec<(f64, f64)> = r
        .nodes
        .iter()
        .map(|n| {
            if !drawn(n) {
                return (-100.0, -100.0);
            }
            let row = row_in_col.entry(depth[n.index]).or_insert(0);
            *row += 1;
            (
                20.0 + depth[n.index] as f64 * 36.0,
                16.0 + (*row - 1) as f64 * 22.0,
            )
        })
        .collect();
    let w = pos.iter().map(|p| p.0).fold(0.0, f64::max) + 40.0;
    let h = pos.iter().map(|p| p.1).fold(0.0, f64::max) + 30.0;
    let mut s = format!("<div style=\"overflow:auto;background:#fff;border:1px solid #ddd\"><svg id=\"graph\" width=\"{w}\" height=\"{h}\" xmlns=\"http://www.w3.org/2000/svg\">");
    for (i, ps) in preds.iter().enumerate() {
        for &p in ps {
            let _ = write!(
                s,
                "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#cfd8dc\"/>",
                pos[p].0, pos[p].1, pos[i].0, pos[i].1
            );
        }
    }
    for n in r.nodes.iter().filter(|n| drawn(n)) {
        let (fill, stroke) = paint(n);
        let (x, y) = pos[n.index];
        let _ = write!(
            s,
            "<circle data-i=\"{}\" cx=\"{x}\" cy=\"{y}\" r=\"6\" fill=\"{fill}\"{stroke}><title>#{} {} {}</title></circle>",
            n.index,
            n.index,
            n.op_type,
            html_escape(&n.name)
        );
    }
    s.push_str("</svg></div>");
    s
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn shell_quote(a: &str) -> String {
    if !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@".contains(c))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// What the target model holds of each value of node `n` (`--target-model` paired by value): the target model's
/// value it equals, "same name", or the fused node that computes it inside; `None` without such a pairing.
fn paired_cell(r: &Report, n: &super::model::NodeReport) -> Option<String> {
    let p = r.target_model.as_ref()?.pairing.as_ref()?;
    let from: std::collections::HashMap<&str, &str> = (p.renamed.iter())
        .map(|(t, m)| (m.as_str(), t.as_str()))
        .collect();
    let cells: Vec<String> = (n.values.iter())
        .map(
            |v| match (p.fused.get(&v.name), from.get(v.name.as_str())) {
                (Some(node), _) => format!("inside {node}"),
                (None, Some(t)) => t.to_string(),
                (None, None) => "same name".into(),
            },
        )
        .collect();
    Some(cells.join(", "))
}

/// Renders the report as one HTML file.
pub fn render(r: &Report) -> String {
    let rows: Vec<_> = r
        .nodes
        .iter()
        .map(|n| {
            let m = n.values.iter().filter_map(|v| v.metrics.as_ref());
            let max_abs = m.clone().map(|m| m.max_abs).reduce(f64::max);
            let max_rel = worst_rel(n);
            let fail = m.clone().map(|m| m.fail_fraction).reduce(f64::max);
            let ulp = m.map(|m| m.max_ulp).max();
            let (reference, reduced) = match &n.reference {
                RefPrecision::F64 => ("f64".to_string(), false),
                RefPrecision::F64Phantom => ("f64 (phantom kernel)".to_string(), false),
                RefPrecision::Reduced { reason } => (format!("reduced: {reason}"), true),
                RefPrecision::Seeded { reason } => (format!("taken from the target: {reason}"), true),
                RefPrecision::Unavailable { reason } => (format!("unavailable: {reason}"), true),
            };
            json!({
                "index": n.index, "op": n.op_type, "name": n.name, "status": status_name(n.status),
                "max_abs": max_abs.unwrap_or(0.0), "max_abs_text": max_abs.map(num).unwrap_or_default(),
                "max_rel": max_rel.unwrap_or(0.0), "max_rel_text": max_rel.map(num).unwrap_or_default(),
                "fail": fail.unwrap_or(0.0), "fail_text": fail.map(|f| format!("{:.2}%", 100.0 * f)).unwrap_or_default(),
                "ulp": ulp.map(|u| if u == u64::MAX { "nan/inf".into() } else { u.to_string() }).unwrap_or_default(),
                "reference": reference, "reduced": reduced, "ran_on": n.ran_on.clone().unwrap_or_default(),
                "paired": paired_cell(r, n).unwrap_or_default(),
            })
        })
        .collect();
    let mut ops: Vec<&str> = r.nodes.iter().map(|n| n.op_type.as_str()).collect();
    ops.sort_unstable();
    ops.dedup();
    let mut data = serde_json::to_value(r).expect("report serializes");
    let nodes_json = serde_json::to_string(&r.nodes)
        .expect("nodes serialize")
        .replace("</", "<\\/");
    data["rows"] = json!(rows);
    data["ops"] = json!(ops);
    data["ran_on_column"] = json!(r.nodes.iter().any(|n| n.ran_on.is_some()));
    data["paired_column"] = json!(r.target_model.as_ref().is_some_and(|t| t.pairing.is_some()));
    data["chart"] = json!(chart(r));
    data["graph"] = json!(graph_view(r));
    data["culprits"] = json!(culprits(r));
    data["verdict_name"] = json!(r.verdict.status.name());
    data["headline"] = json!(super::terminal::verdict_line(r));
    data["culprits_json"] = json!(serde_json::to_string(&r.verdict.culprits)
        .expect("culprits serialize")
        .replace("</", "<\\/"));
    data["nodes_json"] = json!(nodes_json);
    data["command_line"] = json!(r
        .command
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" "));
    let mut hb = Handlebars::new();
    hb.set_strict_mode(false);
    hb.render_template(TEMPLATE, &data)
        .expect("the built-in template renders")
}
