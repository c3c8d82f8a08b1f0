//! String tensors (`tests/data/ml/make_ml_strings.py`): a classifier's string labels and a string categorical
//! feature are compared element by element, match scikit-learn, and a string input is drawn from the model's own
//! categories when none is given.

use prost::Message;
use tract_onnx::pb;

use crate::common::{ensure_runtime, phantom, read_json, value_reports};
use crate::ml::{dumped, ml};

fn report_value(r: &serde_json::Value, name: &str) -> serde_json::Value {
    value_reports(r)
        .find(|v| v["name"] == name)
        .unwrap()
        .clone()
}

#[test]
fn string_labels_are_compared_and_match_scikit_learn() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (json, dump) = (dir.path().join("r.json"), dir.path().join("dump"));
    let m = ml("logreg_labels.onnx");
    let x = format!("X={}", ml("ml_x.npy").display());
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &x,
        "--dump",
        dump.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let label = report_value(&read_json(&json), "label");
    assert_eq!(
        (&label["status"], &label["target_dtype"]),
        (&"pass".into(), &"string".into()),
        "{label}"
    );
    let ours = &dumped(&dump)["label"];
    let sk = phantom::model::npy::read_npy(&ml("logreg_labels.sk.npy")).unwrap();
    assert_eq!(ours.strings().unwrap(), sk.strings().unwrap());
    assert!(sk.strings().unwrap().iter().any(|s| s == "virginica"));
}

/// `logreg_labels.onnx` with its class labels in another order: what a broken label table in a deployed model does.
fn relabelled(dst: &std::path::Path) {
    let mut p = pb::ModelProto::decode(std::fs::read(ml("logreg_labels.onnx")).unwrap().as_slice())
        .unwrap();
    let g = p.graph.as_mut().unwrap();
    let a = (g.node.iter_mut().flat_map(|n| n.attribute.iter_mut()))
        .find(|a| a.name == "classlabels_strings")
        .unwrap();
    a.strings.swap(0, 2);
    std::fs::write(dst, p.encode_to_vec()).unwrap();
}

#[test]
fn a_target_whose_labels_differ_is_drift_naming_the_first_string() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (json, other) = (dir.path().join("r.json"), dir.path().join("other.onnx"));
    relabelled(&other);
    let m = ml("logreg_labels.onnx");
    let x = format!("X={}", ml("ml_x.npy").display());
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--target-model",
        other.to_str().unwrap(),
        "--input",
        &x,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let label = report_value(&read_json(&json), "label");
    assert_eq!(label["status"], "fail", "{label}");
    let why = label["reason"].as_str().unwrap();
    assert!(why.contains("strings differ; first at ["), "{why}");
    assert!(
        why.contains("reference \"setosa\", target \"virginica\"")
            || why.contains("reference \"virginica\", target \"setosa\""),
        "{why}"
    );
}

#[test]
fn a_string_feature_is_drawn_from_the_model_s_categories() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let m = ml("onehot_strings.onnx");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("categories of `OneHotEncoder` (3 strings)"),
        "{out}"
    );
    let r = read_json(&json);
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    // Given scikit-learn's rows, the reference's predictions are scikit-learn's.
    let a = format!("animal={}", ml("onehot_strings_x.npy").display());
    let dump = dir.path().join("dump");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &a,
        "--dump",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let sk = phantom::model::npy::read_npy(&ml("onehot_strings.sk.npy"))
        .unwrap()
        .as_f64()
        .into_owned();
    let ours = dumped(&dump)["variable"].as_f64().into_owned();
    let worst = (ours.iter().zip(sk.iter()))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-5, "{worst}: {ours} vs {sk}");
}
