//! ONNX Runtime's NCHWc layout: what its optimizer writes at `ORT_ENABLE_ALL` on this CPU (`com.microsoft.nchwc`
//! `ReorderInput`, `ReorderOutput`, blocked `Conv`, pools and `Upsample`, filters stored reordered), made here by
//! ONNX Runtime itself (the conformance environment, locked) from a small PyTorch export that uses every NCHWc op
//! (`tests/data/pairs/make_nchwc_net.py`) and from the timm EfficientNet the pairing tests use. The f64 reference
//! runs the blocked model and compares each blocked value element by element with ONNX Runtime's; `equiv` and
//! `--target-model` pair the blocked values with the model's in row-major order, and a changed filter is named at
//! its Conv.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{ensure_runtime, file_lock, phantom, read_json, root, scaled_weights_copy};
use crate::contrib::onnx_report;

const OPTIMIZE: &str = r#"
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.optimized_model_filepath = sys.argv[2]
so.log_severity_level = 3
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
"#;

/// `tests/data/pairs/NAME.onnx` optimized by ONNX Runtime at `ORT_ENABLE_ALL`, written in `dir`.
fn optimized_all(name: &str, dir: &Path) -> (PathBuf, PathBuf) {
    optimized_all_of(&root().join(format!("tests/data/pairs/{name}.onnx")), dir)
}

/// The model at `src` optimized by ONNX Runtime at `ORT_ENABLE_ALL` (the conformance environment's), written in
/// `dir`: (src, the optimized model).
pub fn optimized_all_of(src: &Path, dir: &Path) -> (PathBuf, PathBuf) {
    ensure_runtime();
    let name = src.file_stem().unwrap().to_string_lossy();
    let work = root().join("target/conformance");
    let python = {
        let _lock = file_lock(&work.with_extension("lock"));
        crate::conformance::cases(&work).0
    };
    let src = src.to_path_buf();
    let dst = dir.join(format!("{name}__ort-all.onnx"));
    let out = Command::new(python)
        .args(["-c", OPTIMIZE])
        .arg(&src)
        .arg(&dst)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (src, dst)
}

/// The NCHWc nodes of a model, by op.
fn nchwc_ops(model: &Path) -> Vec<String> {
    use prost::Message;
    let m = tract_onnx::pb::ModelProto::decode(std::fs::read(model).unwrap().as_slice()).unwrap();
    (m.graph.unwrap().node.iter())
        .filter(|n| n.domain == "com.microsoft.nchwc")
        .map(|n| n.op_type.clone())
        .collect()
}

#[test]
fn the_reference_runs_a_blocked_model_and_compares_every_blocked_value_with_onnx_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (_, all) = optimized_all("nchwc_net", dir.path());
    let ops = nchwc_ops(&all);
    for op in [
        "Conv",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "Upsample",
        "ReorderOutput",
    ] {
        assert!(ops.iter().any(|o| o == op), "no NCHWc {op}: {ops:?}");
    }
    let (code, out, r) = onnx_report(&all, &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["verdict"]["status"], "clean", "{out}");
    let c = &r["coverage"];
    assert_eq!(c["unchecked"], 0, "{c}");
    assert!(c["compared"].as_u64().unwrap() >= 14, "{c}");
    // Every node, the blocked ones included, computed in f64 by the reference.
    let nodes = r["nodes"].as_array().unwrap();
    assert!(
        nodes
            .iter()
            .all(|n| n["reference"]["kind"].as_str().unwrap().starts_with("f64")),
        "{out}"
    );
}

#[test]
fn an_nchwc_optimization_pairs_by_value_and_compares_clean() {
    let dir = tempfile::tempdir().unwrap();
    let (src, all) = optimized_all("test_efficientnet", dir.path());
    let json = dir.path().join("e.json");
    let (code, out, err) = phantom(
        &[
            "equiv",
            src.to_str().unwrap(),
            all.to_str().unwrap(),
            "--json",
        ]
        .iter()
        .copied()
        .chain([json.to_str().unwrap()])
        .collect::<Vec<_>>(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let e = read_json(&json);
    assert_eq!(e["same_function"], true, "{e}");
    let c = &e["counts"];
    assert_eq!(c["lost"], 0, "{c}");
    // Every value but two pairs: the plain input a ReorderInput blocks after a ReduceMean is the same value.
    let paired = c["paired"].as_u64().unwrap() + c["duplicates"].as_u64().unwrap();
    assert!(
        paired + 2 >= c["transformed_values"].as_u64().unwrap(),
        "{c}"
    );
    let (code, out, r) = onnx_report(&src, &["--target-model", all.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["verdict"]["status"], "clean", "{out}");
    let c = &r["coverage"];
    assert_eq!(c["unchecked_hiding"], 0, "{c}");
    assert!(c["compared"].as_u64().unwrap() >= 30, "{c}");
    assert!(out.contains("NCHWc blocked layout"), "{out}");
}

#[test]
fn a_filter_changed_in_the_blocked_model_is_named_at_its_conv() {
    let dir = tempfile::tempdir().unwrap();
    let (src, all) = optimized_all("test_efficientnet", dir.path());
    // The third NCHWc Conv's filter, stored reordered: the timm model's `node_Conv_213`.
    use prost::Message;
    let m = tract_onnx::pb::ModelProto::decode(std::fs::read(&all).unwrap().as_slice()).unwrap();
    let g = m.graph.unwrap();
    let conv = (g.node.iter())
        .filter(|n| n.domain == "com.microsoft.nchwc" && n.op_type == "Conv")
        .nth(2)
        .unwrap();
    let bug = dir.path().join("bug.onnx");
    scaled_weights_copy(&all, &conv.input[1], 1.02, &bug);
    let json = dir.path().join("e.json");
    let (code, out, err) = phantom(
        &[
            "equiv",
            src.to_str().unwrap(),
            bug.to_str().unwrap(),
            "--json",
        ]
        .iter()
        .copied()
        .chain([json.to_str().unwrap()])
        .collect::<Vec<_>>(),
    );
    assert_eq!(code, 1, "{out}\n{err}");
    let e = read_json(&json);
    assert_eq!(e["divergence"]["node"], conv.name.as_str(), "{e}");
    let (code, out, r) = onnx_report(&src, &["--target-model", bug.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let culprit = &r["verdict"]["culprits"][0];
    assert_eq!(culprit["node"], "node_Conv_213", "{out}");
    let cause = culprit["causes"][0].to_string();
    assert!(
        cause.contains("weights_differ") && cause.contains("9216 of 9216"),
        "{cause}"
    );
}
