//! Self-contained HTML for several targets: each target's verdict, the answer, a table with one column per target
//! (tolerance used against f64), which is closer to f64 and the target-vs-target columns; below, each target's
//! full single-target report embedded whole (`<iframe srcdoc>`, nothing fetched).

use handlebars::Handlebars;
use serde_json::json;

use super::{MultiReport, NodeAgreement};
use crate::report::model::ValueStatus;
use crate::units::num;

const TEMPLATE: &str = r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>phantom · {{model}} · {{count}} targets</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d2327;background:#fafafa}
header{padding:16px 24px;background:#fff;border-bottom:1px solid #ddd}h1{font-size:18px;margin:0 0 6px}h2{font-size:15px;margin:20px 0 8px}
main{padding:0 24px 40px}.verdict{display:inline-block;padding:2px 8px;border-radius:4px;font-weight:600;margin-right:8px}
.clean,.agree{background:#c8e6c9;color:#1b5e20}.drift,.disagree{background:#ffcdd2;color:#b71c1c}
table{border-collapse:collapse;background:#fff;font-size:13px}th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;white-space:nowrap}
th{background:#f3f3f3;position:sticky;top:0}td.fail{background:#fff0f0;color:#b71c1c}td.pass{color:#1b5e20}td.unchecked{color:#888}
iframe{width:100%;height:85vh;border:1px solid #ddd;background:#fff}summary{cursor:pointer;font-weight:600;margin:10px 0}
</style></head><body>
<header><h1>phantom · {{model}} · {{count}} targets against one f64 reference run</h1>
{{#each targets}}<div><span class="verdict {{status}}">{{label}}</span>{{line}}</div>{{/each}}
</header><main>
<h2>Which target is right?</h2><p><span class="verdict {{agree}}">{{agree}}</span><span id="conclusion">{{conclusion}}</span></p>
<h2>Per node</h2>
<p>Cells: share of its tolerance the node's worst value uses against f64 (above 1 it fails); "closer to f64": the target
at least 2× closer than every other; target-vs-target columns compare the targets with each other.</p>
<table><thead><tr><th>#</th><th>op</th><th>node</th>{{#each labels}}<th>{{this}} vs f64</th>{{/each}}<th>closer to f64</th>{{#each pair_names}}<th>{{this}}</th>{{/each}}</tr></thead>
<tbody>{{#each rows}}<tr><td>{{index}}</td><td>{{op}}</td><td>{{name}}</td>{{#each cells}}<td class="{{class}}">{{text}}</td>{{/each}}<td>{{closer}}</td>{{#each pairs}}<td class="{{class}}">{{text}}</td>{{/each}}</tr>{{/each}}</tbody></table>
<h2>Each target's full report</h2>
{{#each targets}}<details{{#if @first}} open{{/if}}><summary>{{label}}</summary><iframe title="{{label}}" srcdoc="{{html}}"></iframe></details>{{/each}}
</main></body></html>
"#;

fn status_class(s: ValueStatus) -> &'static str {
    match s {
        ValueStatus::Pass => "pass",
        ValueStatus::Fail => "fail",
        ValueStatus::Unchecked => "unchecked",
    }
}

fn cell(status: ValueStatus, used: Option<f64>) -> serde_json::Value {
    let text = match (status, used) {
        (ValueStatus::Unchecked, _) | (_, None) => "—".to_string(),
        (_, Some(u)) => num(u),
    };
    json!({"class": status_class(status), "text": text})
}

fn row(n: &NodeAgreement, pair_names: &[(String, String)]) -> serde_json::Value {
    let cells: Vec<_> = (0..n.status.len())
        .map(|k| cell(n.status[k], n.tolerance_used[k]))
        .collect();
    let pairs: Vec<_> = pair_names
        .iter()
        .map(
            |(a, b)| match n.pairs.iter().find(|p| &p.a == a && &p.b == b) {
                Some(p) => cell(p.status, p.tolerance_used),
                None => cell(ValueStatus::Unchecked, None),
            },
        )
        .collect();
    json!({"index": n.index, "op": n.op_type, "name": n.name, "cells": cells,
           "closer": super::closer_text(n), "pairs": pairs})
}

/// Renders the several-targets report as one HTML file.
pub fn render(m: &MultiReport) -> String {
    let a = &m.agreement;
    let mut pair_names: Vec<(String, String)> = vec![];
    for (i, x) in a.labels.iter().enumerate() {
        for y in &a.labels[i + 1..] {
            pair_names.push((x.clone(), y.clone()));
        }
    }
    let targets: Vec<_> = m
        .targets
        .iter()
        .map(|r| {
            json!({"label": r.target.label, "status": r.verdict.status,
                   "line": crate::report::terminal::verdict_line(r), "html": crate::report::html::render(r)})
        })
        .collect();
    let data = json!({
        "model": m.targets.first().map(|r| r.model.path.clone()).unwrap_or_default(),
        "count": m.targets.len(), "targets": targets, "labels": a.labels, "agree": a.status,
        "conclusion": a.conclusion,
        "pair_names": pair_names.iter().map(|(x, y)| format!("{x} vs {y}")).collect::<Vec<_>>(),
        "rows": a.nodes.iter().map(|n| row(n, &pair_names)).collect::<Vec<_>>(),
    });
    let mut hb = Handlebars::new();
    hb.set_strict_mode(false);
    hb.render_template(TEMPLATE, &data)
        .expect("the built-in template renders")
}
