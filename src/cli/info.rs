//! `phantom info`: a model's inputs, outputs, opsets and op histogram.

use super::out::sayln;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use super::args::InfoArgs;
use super::Outcome;
use crate::model;

pub fn run(a: InfoArgs) -> anyhow::Result<Outcome> {
    let (path, json) = a.resolved()?;
    let g = model::load(&path)?;
    if let Some(out) = json {
        let v = serde_json::json!({
            "path": g.path.display().to_string(),
            "sha256": g.sha256,
            "ir_version": g.ir_version,
            "producer": g.producer,
            "opsets": g.opsets.iter().map(|(d, v)| (if d.is_empty() { "ai.onnx".to_string() } else { d.clone() }, *v)).collect::<std::collections::BTreeMap<_, _>>(),
            "inputs": g.inputs,
            "outputs": g.outputs,
            "nodes": g.nodes.len(),
            "initializers": g.initializers.len(),
            "hidden_values": g.hidden.len(),
            "op_histogram": g.op_histogram().into_iter().collect::<Vec<_>>(),
        });
        super::settings::emit_json(&out, &v)?;
        return Ok(Outcome::Clean);
    }
    sayln!("{} (sha256 {})", g.path.display(), g.sha256);
    sayln!(
        "ir_version {} · producer {}",
        g.ir_version,
        if g.producer.is_empty() {
            "?"
        } else {
            &g.producer
        }
    );
    let opsets: Vec<String> = g
        .opsets
        .iter()
        .map(|(d, v)| format!("{}={v}", if d.is_empty() { "ai.onnx" } else { d }))
        .collect();
    sayln!("opsets {}", opsets.join(", "));
    // Saturating: a corrupt initializer may declare dims whose product overflows.
    let params: u128 = g
        .initializers
        .values()
        .map(|i| {
            i.dims
                .iter()
                .fold(1u128, |a, &d| a.saturating_mul(d.max(0) as u128))
        })
        .fold(0u128, u128::saturating_add);
    sayln!(
        "{} nodes, {} initializers ({} parameters){}",
        g.nodes.len(),
        g.initializers.len(),
        params,
        if g.was_unsorted {
            ", node list not topologically sorted"
        } else {
            ""
        }
    );
    let sub: usize = g.nodes.iter().map(|n| n.subgraph_nodes).sum();
    if sub > 0 {
        sayln!(
            "{sub} nodes inside If/Loop/Scan bodies ({} values not reachable as graph outputs)",
            g.hidden.len()
        );
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["", "name", "dtype", "shape"]);
    for (kind, list) in [("input", &g.inputs), ("output", &g.outputs)] {
        for v in list {
            t.add_row(vec![
                kind.to_string(),
                v.name.clone(),
                v.dtype.map(|d| d.to_string()).unwrap_or("?".into()),
                v.shape_text(),
            ]);
        }
    }
    sayln!("{t}");
    let mut h = Table::new();
    h.load_preset(UTF8_FULL_CONDENSED);
    h.set_header(vec!["op", "count"]);
    for (op, n) in g.op_histogram() {
        h.add_row(vec![op, n.to_string()]);
    }
    sayln!("{h}");
    Ok(Outcome::Clean)
}
