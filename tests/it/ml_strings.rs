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

/// A dump directory holding `labels` (strings) and `x` (f32).
fn string_dump(dir: &std::path::Path, labels: &[&str]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let s = ndarray::arr1(labels).mapv(str::to_string).into_dyn();
    let x = ndarray::arr1(&[1.0f32, 2.0, 3.0]).into_dyn();
    let npy = phantom::model::npy::to_npy;
    std::fs::write(
        dir.join("labels.npy"),
        npy(&phantom::tensor::Tensor::Str(s)),
    )
    .unwrap();
    std::fs::write(dir.join("x.npy"), npy(&phantom::tensor::Tensor::F32(x))).unwrap();
    dir.display().to_string()
}

#[test]
fn string_dumps_diff_by_equality() {
    let dir = tempfile::tempdir().unwrap();
    let a = string_dump(&dir.path().join("a"), &["cat", "dog", "emu"]);
    let same = string_dump(&dir.path().join("same"), &["cat", "dog", "emu"]);
    let other = string_dump(&dir.path().join("other"), &["cat", "dog", "yak"]);
    let (code, out, _) = crate::diff::diff(&[&a, &same]);
    assert_eq!(code, 0, "{out}");
    let (code, out, r) = crate::diff::diff(&[&a, &other]);
    assert_eq!(code, 1, "{out}");
    let p = crate::diff::pair(&r, "labels");
    assert_eq!(p["status"], "fail", "{p}");
    assert_eq!(
        p["reason"],
        "1 of 3 strings differ; first at [2]: A \"emu\", B \"yak\""
    );
    assert_eq!(crate::diff::pair(&r, "x")["status"], "pass");
}

/// `value` with element type `elem` (8: string, 7: int64).
fn typed(name: &str, elem: i32) -> pb::ValueInfoProto {
    let mut v = crate::common::value(name, &[4]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        v.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = elem;
    }
    v
}

/// CategoryMapper string → int64 (`i`) and back (`back`), "cat", "dog", "emu" ↔ 1, 2, 3, defaults -1 and "none".
fn category_mapper(path: &std::path::Path) {
    use crate::common::{attr_int, attr_ints, attr_str, node};
    let cats = pb::AttributeProto {
        name: "cats_strings".into(),
        r#type: pb::attribute_proto::AttributeType::Strings as i32,
        strings: ["cat", "dog", "emu"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect(),
        ..Default::default()
    };
    let mapper = |input: &str, out: &str, default: pb::AttributeProto| {
        let mut n = node("CategoryMapper", &[input], out);
        n.domain = "ai.onnx.ml".into();
        n.attribute = vec![cats.clone(), attr_ints("cats_int64s", &[1, 2, 3]), default];
        n
    };
    let graph = pb::GraphProto {
        name: "categories".into(),
        node: vec![
            mapper("s", "i", attr_int("default_int64", -1)),
            mapper("i", "back", attr_str("default_string", "none")),
        ],
        input: vec![typed("s", 8)],
        output: vec![typed("back", 8), typed("i", 7)],
        ..Default::default()
    };
    let mut m = crate::common::model_proto(graph, 17);
    m.opset_import.push(pb::OperatorSetIdProto {
        domain: "ai.onnx.ml".into(),
        version: 3,
    });
    std::fs::write(path, m.encode_to_vec()).unwrap();
}

#[test]
fn category_mapper_strings_round_trip_with_defaults() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (m, x, dump) = (
        dir.path().join("m.onnx"),
        dir.path().join("s.npy"),
        dir.path().join("d"),
    );
    category_mapper(&m);
    let s = ndarray::arr1(&["dog", "yak", "cat", "emu"])
        .mapv(str::to_string)
        .into_dyn();
    std::fs::write(
        &x,
        phantom::model::npy::to_npy(&phantom::tensor::Tensor::Str(s)),
    )
    .unwrap();
    let input = format!("s={}", x.display());
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &input,
        "--dump",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("all 2 compared values within tolerance"),
        "{out}"
    );
    let values = dumped(&dump);
    let back: Vec<&str> = values["back"]
        .strings()
        .unwrap()
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(back, ["dog", "none", "cat", "emu"]);
    assert_eq!(
        values["i"].as_f64().iter().copied().collect::<Vec<_>>(),
        [2.0, -1.0, 1.0, 3.0]
    );
}
