//! Classic-ML pipelines converted by skl2onnx (`ai.onnx.ml`, `tests/data/ml/make_ml.py`): phantom's own f64
//! kernels compute them, so every value is compared, and a model whose attributes do not fit its input is refused
//! naming the node and the counts.

use std::path::PathBuf;

use crate::common::{ensure_runtime, phantom, read_json, root, value_reports};

pub fn ml(name: &str) -> PathBuf {
    root().join("tests/data/ml").join(name)
}

#[test]
fn scikit_learn_pipelines_are_compared_in_f64() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    for (name, ops) in [
        (
            "scaler_logreg3.onnx",
            &["Scaler", "LinearClassifier", "Normalizer"][..],
        ),
        (
            "normalizer_logreg2.onnx",
            &["Normalizer", "LinearClassifier"][..],
        ),
        ("scaler_linreg.onnx", &["Scaler", "LinearRegressor"][..]),
        ("forest_reg.onnx", &["TreeEnsembleRegressor"][..]),
        ("boosting_reg.onnx", &["TreeEnsembleRegressor"][..]),
        ("scaler_svr_rbf.onnx", &["Scaler", "SVMRegressor"][..]),
        (
            "imputer_binarizer_linreg.onnx",
            &["Imputer", "Binarizer", "LinearRegressor"][..],
        ),
    ] {
        let json = dir.path().join(format!("{name}.json"));
        let m = ml(name);
        let (code, out, err) = phantom(&[
            "onnx",
            m.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{name}: {out}{err}");
        let r = read_json(&json);
        for op in ops {
            let n = r["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["op_type"] == *op)
                .unwrap_or_else(|| panic!("{name}: no {op}"));
            assert_eq!(n["reference"]["kind"], "f64_phantom", "{name} {op}: {n}");
            assert_eq!(n["status"], "pass", "{name} {op}");
        }
        // Every float value is compared (ZipMap's maps aside) and agrees with ORT's fp32 to fp32 rounding.
        for v in value_reports(&r).filter(|v| v["target_dtype"] == "f32") {
            assert_eq!(v["status"], "pass", "{name}: {v}");
            let max_abs = v["metrics"]["max_abs"].as_f64().unwrap();
            assert!(max_abs < 1e-5, "{name} {}: {max_abs}", v["name"]);
        }
        assert!(
            value_reports(&r)
                .all(|v| v["status"] == "pass"
                    || v["reason"].as_str().unwrap_or("").contains("ZipMap")),
            "{name}"
        );
    }
}

#[test]
fn a_classifier_whose_coefficients_do_not_fit_its_input_is_refused_naming_it() {
    ensure_runtime();
    let m = ml("misfit_classifier.onnx");
    let (code, out, err) = phantom(&["onnx", m.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("12 coefficients for 3 target(s) × 2 input feature(s) = 6"),
        "{err}"
    );
    assert!(
        err.contains("LinearClassifier node `LinearClassifier_0` has 12 coefficients"),
        "the node is named once: {err}"
    );
}

/// A one-hot encoding of two int64 columns into a linear regression (skl2onnx: Gather, OneHotEncoder with int64
/// categories, Concat): the encoder runs on phantom's f64 kernel and every value agrees with ONNX Runtime's; a
/// value outside the categories encodes as zeros (`handle_unknown="ignore"`), as ORT's does.
#[test]
fn a_one_hot_encoding_is_compared_in_f64() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = ml("onehot_linreg.onnx");
    for range in ["0,4", "2,6"] {
        let json = dir.path().join("r.json");
        let args = ["onnx", m.to_str().unwrap(), "--val-range", range, "--json"];
        let (code, out, err) = phantom(&[&args[..], &[json.to_str().unwrap()]].concat());
        assert_eq!(code, 0, "{range}: {out}{err}");
        let r = read_json(&json);
        assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
        let enc = (r["nodes"].as_array().unwrap().iter())
            .filter(|n| n["op_type"] == "OneHotEncoder")
            .collect::<Vec<_>>();
        assert_eq!(enc.len(), 2, "{out}");
        for n in enc {
            assert_eq!(n["reference"]["kind"], "f64_phantom", "{n}");
            assert_eq!(n["values"][0]["metrics"]["max_abs"], 0.0, "{n}");
        }
    }
}

/// The reference's values of a `phantom onnx --dump` run, by ONNX name.
pub fn dumped(dir: &std::path::Path) -> std::collections::HashMap<String, phantom::tensor::Tensor> {
    let index = read_json(&dir.join("index.json"));
    (index["values"].as_array().unwrap().iter())
        .map(|v| {
            let path = dir.join(v["reference"].as_str().unwrap());
            let t = phantom::model::npy::read_npy(&path).unwrap();
            (v["name"].as_str().unwrap().to_string(), t)
        })
        .collect()
}

/// `phantom onnx tests/data/ml/<name>.onnx --input <input>` with `--dump` and `--json` into `dir`, which must exit 0:
/// the report, stdout, and the reference's dumped values.
fn run_dumped(
    dir: &std::path::Path,
    name: &str,
    input: &str,
) -> (
    serde_json::Value,
    String,
    std::collections::HashMap<String, phantom::tensor::Tensor>,
) {
    let (json, dump) = (dir.join(format!("{name}.json")), dir.join(name));
    let m = ml(&format!("{name}.onnx"));
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        input,
        "--dump",
        dump.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{name}: {out}{err}");
    (read_json(&json), out, dumped(&dump))
}

#[test]
fn classifiers_and_k_means_match_scikit_learn_s_own_predictions() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let x = format!("X={}", ml("ml_x.npy").display());
    // (model, the reference's value holding scikit-learn's scores, and how they read: a binary SVC's decision value
    // is the first column). `svc_proba*` are SVCs with Platt probabilities (pairwise coupling), compared with
    // scikit-learn's `predict_proba`.
    for (name, scores) in [
        ("forest_cls3", "probabilities"),
        ("boosting_cls2", "probabilities"),
        ("boosting_cls3", "probabilities"),
        ("svc_rbf3", "probabilities"),
        ("svc_rbf2", "probabilities"),
        ("svc_proba3", "probabilities"),
        ("svc_proba2", "probabilities"),
        ("kmeans", "scores"),
    ] {
        let (r, out, values) = run_dumped(dir.path(), name, &x);
        let ours = (r["nodes"].as_array().unwrap().iter())
            .filter(|n| n["reference"]["kind"] == "f64_phantom")
            .count();
        assert!(ours > 0 || name == "kmeans", "{name}: {out}");
        let expected = phantom::model::npy::read_npz(&ml(&format!("{name}.sk.npz"))).unwrap();
        let get = |k: &str| {
            expected
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, t)| t.as_f64())
        };
        assert_eq!(
            values["label"].as_f64(),
            get("label").unwrap(),
            "{name}: labels"
        );
        let want = get("proba").or(get("scores")).or(get("distances")).unwrap();
        let got = values[scores].as_f64();
        let got = match want.ndim() {
            1 => got.index_axis(ndarray::Axis(1), 0).to_owned().into_dyn(),
            _ => got.into_owned(),
        };
        assert_eq!(got.shape(), want.shape(), "{name}");
        let worst = (got.iter().zip(want.iter()))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        // scikit-learn computes in f64 from the float32 inputs; the ONNX model stores its constants as float32.
        assert!(worst < 1e-6, "{name}: {worst}");
    }
}

#[test]
fn label_encoders_map_ints_strings_and_floats_with_their_defaults() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let (m, codes) = (ml("label_encoders.onnx"), ml("label_codes.npy"));
    let codes = format!("codes={}", codes.display());
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &codes,
        "--json",
        json.to_str().unwrap(),
    ]);
    // Strings are computed and compared, element by element.
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    let v = |name: &str| {
        value_reports(&r)
            .find(|v| v["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(v("names")["status"], "pass", "{out}");
    assert_eq!(v("names")["target_dtype"], "string", "{out}");
    // Code 7 is no key: "none", then -1.0 (no key either), then -7; every lookup agrees with ORT exactly.
    for name in ["weights", "back"] {
        assert_eq!(v(name)["status"], "pass", "{name}: {out}");
        assert_eq!(v(name)["metrics"]["max_abs"], 0.0, "{name}: {out}");
    }
    let kinds = (r["nodes"].as_array().unwrap().iter())
        .filter(|n| n["op_type"] == "LabelEncoder")
        .map(|n| n["reference"]["kind"].as_str().unwrap().to_string());
    assert!(kinds.clone().count() == 3 && kinds.into_iter().all(|k| k == "f64_phantom"));
}

/// `phantom onnx scaler_forest.onnx` on features that land on its split thresholds, with `args`: exit code,
/// stdout and report.
fn near_thresholds(args: &[&str]) -> (i32, String, serde_json::Value) {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let (m, x) = (ml("scaler_forest.onnx"), ml("scaler_forest_x.npy"));
    let x = format!("X={}", x.display());
    let mut all = vec![
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &x,
        "--json",
        json.to_str().unwrap(),
    ];
    all.extend(args);
    let (code, out, err) = phantom(&all);
    assert!(code == 0 || code == 1, "{out}{err}");
    (code, out, read_json(&json))
}

#[test]
fn label_flips_at_tree_thresholds_within_the_noise_are_adopted() {
    let (code, out, r) = near_thresholds(&[]);
    assert_eq!(code, 0, "{out}");
    let v = |name: &str| {
        value_reports(&r)
            .find(|v| v["name"] == name)
            .unwrap()
            .clone()
    };
    // The float32 Scaler puts some features on the other side of a threshold than the float64 one.
    let a = &v("label")["adopted"];
    assert!(a["flips"].as_u64().unwrap() > 0, "{out}");
    assert_eq!(a["beyond"], 0, "{out}");
    for name in ["label", "probabilities", "output_label"] {
        assert_eq!(v(name)["status"], "pass", "{name}: {out}");
    }
    // Kept as the reference's own, the same flips are drift at the forest.
    let (code, out, r) = near_thresholds(&["--own-decisions"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(r["verdict"]["first_divergence"]["value"], "label", "{out}");
}

#[test]
fn a_fault_in_the_features_a_forest_compares_is_caught_where_it_is() {
    let fault = ml("scaler_forest_fault.onnx");
    let (code, out, r) = near_thresholds(&["--target-model", fault.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        r["verdict"]["first_divergence"]["value"], "variable",
        "{out}"
    );
    let probabilities = value_reports(&r)
        .find(|v| v["name"] == "probabilities")
        .unwrap();
    assert_eq!(probabilities["status"], "fail", "{out}");
}

/// Opset 5's `TreeEnsemble` (a forest rewritten from skl2onnx's TreeEnsembleRegressor, `make_ml_more.py`) runs on
/// phantom's f64 kernel: scikit-learn's predictions to float32 rounding, and ONNX Runtime's within tolerance; with a
/// set-membership split (`BRANCH_MEMBER`) too, where ORT's value is the oracle.
#[test]
fn opset_5_tree_ensembles_are_compared_in_f64() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    for (name, x) in [
        ("tree_ensemble5", "ml_x.npy"),
        ("tree_member5", "tree_member5_x.npy"),
    ] {
        let (r, _, values) = run_dumped(dir.path(), name, &format!("X={}", ml(x).display()));
        let node = &r["nodes"][0];
        assert_eq!(node["op_type"], "TreeEnsemble", "{name}");
        assert_eq!(node["reference"]["kind"], "f64_phantom", "{name}: {node}");
        let y = value_reports(&r).find(|v| v["name"] == "Y").unwrap();
        assert_eq!(y["status"], "pass", "{name}: {y}");
        // Leaf weights are float32: a sum of four differs from ORT's float32 sum by a few of its ulps.
        assert!(
            y["metrics"]["max_abs"].as_f64().unwrap() < 1e-5,
            "{name}: {y}"
        );
        let got = values["Y"].as_f64();
        assert_eq!(got.shape(), &[64, 1], "{name}");
        if name == "tree_ensemble5" {
            let sk = phantom::model::npy::read_npz(&ml("tree_ensemble5.sk.npz")).unwrap();
            let want = sk[0].1.as_f64();
            let worst = (got.iter().zip(want.iter()))
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-6, "{name}: {worst}");
        }
    }
}
