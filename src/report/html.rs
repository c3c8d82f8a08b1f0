//! Self-contained HTML report (handlebars template, inline CSS, JS and SVG; nothing fetched): summary, drift along
//! the graph, a sortable and filterable node table, per-node detail on click, and the command that reproduces it.
//! Heatmaps, histograms and the graph view are not rendered yet.

use std::fmt::Write as _;

use handlebars::Handlebars;
use serde_json::json;

use super::model::{RefPrecision, Report, ValueStatus};
use super::terminal::num;

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

/// Log-scale chart of each node's max relative error, with the f32 rtol drawn.
fn chart(r: &Report) -> String {
    let (w, h, pad) = (1000.0, 220.0, 40.0);
    let n = r.nodes.len().max(1) as f64;
    let (lo, hi) = (-12.0f64, 1.0f64);
    let y = |rel: f64| {
        let l = rel.max(1e-12).log10().clamp(lo, hi);
        pad / 2.0 + (hi - l) / (hi - lo) * (h - pad)
    };
    let x = |i: usize| pad + i as f64 / n * (w - 2.0 * pad);
    let mut s = format!("<svg id=\"chart\" viewBox=\"0 0 {w} {h}\" width=\"100%\" xmlns=\"http://www.w3.org/2000/svg\">");
    for e in (lo as i32..=hi as i32).step_by(3) {
        let yy = y(10f64.powi(e));
        let _ = write!(s, "<line x1=\"{pad}\" x2=\"{}\" y1=\"{yy}\" y2=\"{yy}\" stroke=\"#eee\"/><text x=\"2\" y=\"{}\">1e{e}</text>", w - pad, yy + 4.0);
    }
    if let Some(t) = r.tolerance.by_dtype.get("f32") {
        let yy = y(t.rtol);
        let _ = write!(s, "<line x1=\"{pad}\" x2=\"{}\" y1=\"{yy}\" y2=\"{yy}\" stroke=\"#c62828\" stroke-dasharray=\"6 4\"/>", w - pad);
    }
    let pts: Vec<String> = r
        .nodes
        .iter()
        .filter_map(|nd| worst_rel(nd).map(|v| format!("{:.1},{:.1}", x(nd.index), y(v))))
        .collect();
    let _ = write!(
        s,
        "<polyline fill=\"none\" stroke=\"#90a4ae\" points=\"{}\"/>",
        pts.join(" ")
    );
    for nd in &r.nodes {
        let rel = worst_rel(nd).unwrap_or(1e-12);
        let fill = match nd.status {
            ValueStatus::Fail => "#d32f2f",
            ValueStatus::Pass => "#43a047",
            ValueStatus::Unchecked => "#9e9e9e",
        };
        let ring = matches!(
            nd.reference,
            RefPrecision::Reduced { .. } | RefPrecision::Unavailable { .. }
        );
        let stroke = if ring {
            " stroke=\"#ef6c00\" stroke-width=\"2\""
        } else {
            ""
        };
        let _ = write!(
            s,
            "<circle data-i=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{fill}\"{stroke}><title>#{} {} {} · max rel {}</title></circle>",
            nd.index,
            x(nd.index),
            y(rel),
            nd.index,
            nd.op_type,
            html_escape(&nd.name),
            num(rel)
        );
    }
    s.push_str("</svg>");
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
                RefPrecision::Unavailable { reason } => (format!("unavailable: {reason}"), true),
            };
            json!({
                "index": n.index, "op": n.op_type, "name": n.name, "status": status_name(n.status),
                "max_abs": max_abs.unwrap_or(0.0), "max_abs_text": max_abs.map(num).unwrap_or_default(),
                "max_rel": max_rel.unwrap_or(0.0), "max_rel_text": max_rel.map(num).unwrap_or_default(),
                "fail": fail.unwrap_or(0.0), "fail_text": fail.map(|f| format!("{:.2}%", 100.0 * f)).unwrap_or_default(),
                "ulp": ulp.map(|u| if u == u64::MAX { "nan/inf".into() } else { u.to_string() }).unwrap_or_default(),
                "reference": reference, "reduced": reduced,
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
    data["chart"] = json!(chart(r));
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
