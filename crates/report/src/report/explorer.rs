//! Overlays for Google's Model Explorer: node-data JSON files in its documented format
//! (`model_explorer.node_data_builder`: `{graph id: {results: {node id: {value, bgColor?}}, thresholds|gradient}}`),
//! keyed as its ONNX adapter (`model-explorer-onnx`) names things: the graph by its name (`<main>` when it has
//! none), each node by its name (`<node_I>`, I its position in the file, when it has none). Open them over the model
//! with `onnxvis model.onnx --node_data_paths=a.json,b.json`. Nodes phantom added (unrolled loops, inlined
//! branches) have no node in the file and are left out.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::Result;
use crate::fsutil::write_dir_atomically;
use crate::model::surgery::decode;
use crate::model::Graph;
use crate::report::model::{Report, ValueStatus};

/// One node's datum.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Datum {
    Number(f64),
    Text(String),
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeResult {
    value: Datum,
    #[serde(skip_serializing_if = "Option::is_none")]
    bg_color: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Threshold {
    value: f64,
    bg_color: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Stop {
    stop: f64,
    bg_color: String,
}

/// One node-data file: a datum per node (found by a value it computes) and how Model Explorer colours them.
pub struct Overlay {
    /// The file name (`phantom_tolerance_used.json`).
    pub file: String,
    /// (a value the node computes, its datum, its colour).
    pub values: Vec<(String, Datum, Option<&'static str>)>,
    /// Upper bounds and their colours, ascending (numbers only).
    pub thresholds: Vec<(f64, &'static str)>,
    /// Colours from the smallest to the largest value, when no thresholds.
    pub gradient: Vec<&'static str>,
}

/// Model Explorer's ids for a model: the graph id, and the id of the node computing each value.
pub struct Ids {
    pub graph: String,
    pub by_value: HashMap<String, String>,
}

/// The ids Model Explorer's ONNX adapter gives the model `graph` was read from (its file as it is).
pub fn ids(graph: &Graph) -> Result<Ids> {
    let g = decode(graph)?.graph.unwrap_or_default();
    let mut by_value = HashMap::new();
    for (i, n) in g.node.iter().enumerate() {
        let id = match n.name.is_empty() {
            true => format!("<node_{i}>"),
            false => n.name.clone(),
        };
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            by_value.insert(o.clone(), id.clone());
        }
    }
    let name = if g.name.is_empty() {
        "<main>".to_string()
    } else {
        g.name
    };
    Ok(Ids {
        graph: name,
        by_value,
    })
}

impl Ids {
    /// The ids keyed by the names its values ran under (`names`: a value's name in the file → that name), so that a
    /// report's values land on the nodes of a `--target-model` whose values were renamed to the model's.
    pub fn under(self, names: &BTreeMap<String, String>) -> Ids {
        let by_value = (self.by_value.into_iter())
            .map(|(v, id)| (names.get(&v).cloned().unwrap_or(v), id))
            .collect();
        Ids {
            graph: self.graph,
            by_value,
        }
    }
}

impl Overlay {
    /// The JSON Model Explorer reads: nodes Model Explorer has no id for are left out.
    fn json(&self, ids: &Ids) -> serde_json::Value {
        let results: BTreeMap<&str, NodeResult> = self
            .values
            .iter()
            .filter_map(|(value, v, colour)| {
                let id = ids.by_value.get(value)?;
                let value = match v {
                    Datum::Number(x) if !x.is_finite() => {
                        Datum::Number(if *x > 0.0 { f64::MAX } else { 0.0 })
                    }
                    other => other.clone(),
                };
                Some((
                    id.as_str(),
                    NodeResult {
                        value,
                        bg_color: colour.map(str::to_string),
                    },
                ))
            })
            .collect();
        let mut data = serde_json::json!({ "results": results });
        if !self.thresholds.is_empty() {
            let t: Vec<Threshold> = self
                .thresholds
                .iter()
                .map(|&(value, c)| Threshold {
                    value,
                    bg_color: c.into(),
                })
                .collect();
            data["thresholds"] = serde_json::json!(t);
        } else if self.gradient.len() >= 2 {
            let last = (self.gradient.len() - 1) as f64;
            let g: Vec<Stop> = self
                .gradient
                .iter()
                .enumerate()
                .map(|(i, c)| Stop {
                    stop: i as f64 / last,
                    bg_color: (*c).into(),
                })
                .collect();
            data["gradient"] = serde_json::json!(g);
        }
        serde_json::json!({ ids.graph.clone(): data })
    }
}

/// Writes `overlays` into `dir` (refused when it exists, unless `force`); the paths written.
pub fn write(dir: &Path, force: bool, ids: &Ids, overlays: &[Overlay]) -> Result<Vec<PathBuf>> {
    let each: Vec<(&Ids, &Overlay)> = overlays.iter().map(|o| (ids, o)).collect();
    write_each(dir, force, &each)
}

/// [`write`] with each overlay over a model of its own (`phantom equiv`: one per graph).
pub fn write_each(dir: &Path, force: bool, overlays: &[(&Ids, &Overlay)]) -> Result<Vec<PathBuf>> {
    write_dir_atomically(dir, force, "Model Explorer overlays", |w| {
        for (ids, o) in overlays {
            let bytes = serde_json::to_vec_pretty(&o.json(ids)).expect("serializes");
            w.write(&o.file, &bytes)?;
        }
        Ok(())
    })?;
    Ok(overlays.iter().map(|(_, o)| dir.join(&o.file)).collect())
}

/// The largest of `f` over each node's values that have it.
fn per_node(
    r: &Report,
    f: impl Fn(&crate::report::model::ValueReport) -> Option<f64>,
) -> Vec<(String, Datum, Option<&'static str>)> {
    r.nodes
        .iter()
        .filter_map(|n| {
            let m = n
                .values
                .iter()
                .filter_map(&f)
                .fold(None, |acc: Option<f64>, x| {
                    Some(acc.map_or(x, |a| a.max(x)))
                })?;
            Some((n.values.first()?.name.clone(), Datum::Number(m), None))
        })
        .collect()
}

/// A comparison's overlays: tolerance used, max abs error, noise multiple, and each node's verdict with its cause.
pub fn from_report(r: &Report) -> Vec<Overlay> {
    let used = per_node(r, |v| v.metrics.as_ref().map(|m| m.tolerance_used));
    let abs = per_node(r, |v| v.metrics.as_ref().map(|m| m.max_abs));
    let noise = per_node(r, |v| v.noise.as_ref().and_then(|n| n.ratio));
    vec![
        Overlay {
            file: "phantom_tolerance_used.json".into(),
            values: used,
            thresholds: vec![
                (0.5, "#c8e6c9"),
                (1.0, "#fff59d"),
                (10.0, "#ffab91"),
                (f64::MAX, "#e53935"),
            ],
            gradient: vec![],
        },
        Overlay {
            file: "phantom_max_abs_error.json".into(),
            values: abs,
            thresholds: vec![],
            gradient: vec!["#ffffff", "#ffab91", "#e53935"],
        },
        Overlay {
            file: "phantom_noise_multiple.json".into(),
            values: noise,
            thresholds: vec![
                (2.0, "#c8e6c9"),
                (10.0, "#fff59d"),
                (100.0, "#ffab91"),
                (f64::MAX, "#e53935"),
            ],
            gradient: vec![],
        },
        Overlay {
            file: "phantom_verdict.json".into(),
            values: verdicts(r),
            thresholds: vec![],
            gradient: vec![],
        },
    ]
}

/// Per node: `culprit: <causes>`, `anomaly`, `precision-limited`, `fail`, `pass` or `unchecked`, coloured.
fn verdicts(r: &Report) -> Vec<(String, Datum, Option<&'static str>)> {
    let v = &r.verdict;
    r.nodes
        .iter()
        .filter_map(|n| {
            let first = n.values.first()?.name.clone();
            let (text, colour) = if let Some(c) = v.culprits.iter().find(|c| c.node == n.name) {
                let kinds: Vec<String> = c.causes.iter().map(|k| kind_name(&k.kind)).collect();
                let text = match kinds.is_empty() {
                    true => "culprit".to_string(),
                    false => format!("culprit: {}", kinds.join(", ")),
                };
                (text, "#e53935")
            } else if v.anomalies.iter().any(|a| a.node == n.name) {
                ("anomaly".into(), "#ff7043")
            } else if v.precision_limited.iter().any(|p| p.node == n.name) {
                ("precision-limited".into(), "#fff59d")
            } else {
                match n.status {
                    ValueStatus::Fail => ("fail (inherited)".into(), "#ffab91"),
                    ValueStatus::Pass => ("pass".into(), "#c8e6c9"),
                    ValueStatus::Unchecked => ("unchecked".into(), "#e0e0e0"),
                }
            };
            Some((first, Datum::Text(text), Some(colour)))
        })
        .collect()
}

pub fn kind_name<T: Serialize>(k: &T) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
