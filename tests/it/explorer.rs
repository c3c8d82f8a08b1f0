//! Model Explorer overlays (`--model-explorer DIR` on `onnx` and `scan`): files in Model Explorer's node-data format,
//! keyed by the graph's name and the ids its ONNX adapter gives nodes (the name, or `<node_I>` for a nameless one).

use std::collections::HashSet;
use std::path::Path;

use prost::Message;

use crate::common::{ensure_runtime, phantom, read_json, root};

/// The graph id and node ids Model Explorer's ONNX adapter gives the model at `path`.
fn explorer_ids(path: &Path) -> (String, HashSet<String>) {
    let m = tract_onnx::pb::ModelProto::decode(std::fs::read(path).unwrap().as_slice()).unwrap();
    let g = m.graph.unwrap();
    let ids = g
        .node
        .iter()
        .enumerate()
        .map(|(i, n)| match n.name.is_empty() {
            true => format!("<node_{i}>"),
            false => n.name.clone(),
        })
        .collect();
    let graph = if g.name.is_empty() {
        "<main>".into()
    } else {
        g.name
    };
    (graph, ids)
}

/// Checks one node-data file against the format; returns its results.
fn checked(
    file: &Path,
    graph: &str,
    ids: &HashSet<String>,
) -> serde_json::Map<String, serde_json::Value> {
    let j = read_json(file);
    let top = j.as_object().unwrap();
    assert_eq!(
        top.keys().collect::<Vec<_>>(),
        vec![graph],
        "{}",
        file.display()
    );
    let data = top[graph].as_object().unwrap();
    let results = data["results"].as_object().unwrap().clone();
    assert!(!results.is_empty(), "{}", file.display());
    for (id, r) in &results {
        assert!(
            ids.contains(id),
            "{}: `{id}` is no node of the model",
            file.display()
        );
        assert!(
            r["value"].is_number() || r["value"].is_string(),
            "{id}: {r}"
        );
        if let Some(c) = r.get("bgColor") {
            assert!(c.as_str().unwrap().starts_with('#'));
        }
    }
    if let Some(t) = data.get("thresholds") {
        let v: Vec<f64> = t
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["value"].as_f64().unwrap())
            .collect();
        assert!(
            v.windows(2).all(|w| w[0] < w[1]),
            "thresholds ascend: {v:?}"
        );
    }
    if let Some(g) = data.get("gradient") {
        let stops: Vec<f64> = g
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["stop"].as_f64().unwrap())
            .collect();
        assert_eq!((stops[0], *stops.last().unwrap()), (0.0, 1.0));
    }
    results
}

#[test]
fn onnx_overlays_mark_the_culprit_on_a_real_model_with_nameless_nodes() {
    ensure_runtime();
    let tmp = tempfile::tempdir().unwrap();
    let (real, faulty, _) = crate::common::wrong_epsilon_copy(tmp.path());
    let dir = tmp.path().join("me");
    let (code, out, err) = phantom(&[
        "onnx",
        real.to_str().unwrap(),
        "--target-model",
        faulty.to_str().unwrap(),
        "--model-explorer",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    let (graph, ids) = explorer_ids(&real);
    let verdict = checked(&dir.join("phantom_verdict.json"), &graph, &ids);
    let culprit = verdict["BatchNormalization@8"]["value"].as_str().unwrap();
    assert!(culprit.starts_with("culprit"), "{culprit}");
    assert_eq!(verdict["Conv@8"]["value"], "pass");
    assert!(
        verdict.keys().any(|k| k.starts_with("<node_")),
        "nameless nodes are keyed by position"
    );
    let used = checked(&dir.join("phantom_tolerance_used.json"), &graph, &ids);
    assert!(used["BatchNormalization@8"]["value"].as_f64().unwrap() > 1.0);
    assert!(used["Conv@8"]["value"].as_f64().unwrap() < 1.0);
    checked(&dir.join("phantom_max_abs_error.json"), &graph, &ids);
    checked(&dir.join("phantom_noise_multiple.json"), &graph, &ids);
    // Nothing is overwritten without --force.
    let (code, _, err) = phantom(&[
        "onnx",
        real.to_str().unwrap(),
        "--model-explorer",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--force"), "{err}");
}

#[test]
fn scan_overlays_rank_the_fp16_culprit() {
    let case = root().join("tests/data/fp16/ln_variance_overflow.onnx");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("me");
    let (code, out, err) = phantom(&[
        "scan",
        case.to_str().unwrap(),
        "--model-explorer",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (graph, ids) = explorer_ids(&case);
    let risk = checked(&dir.join("phantom_risk.json"), &graph, &ids);
    let top3: Vec<&str> = risk
        .iter()
        .filter(|(_, r)| {
            ["#1 ", "#2 ", "#3 "]
                .iter()
                .any(|p| r["value"].as_str().unwrap().starts_with(p))
        })
        .map(|(k, _)| k.as_str())
        .collect();
    assert!(top3.contains(&"ln/pow"), "{risk:?}");
    let headroom = checked(&dir.join("phantom_fp16_headroom.json"), &graph, &ids);
    assert!(
        headroom["ln/pow"]["value"].as_f64().unwrap() < 1.0,
        "x² overflows fp16"
    );
}
