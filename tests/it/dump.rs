//! `phantom onnx --dump DIR`: every compared value of both sides as .npy, with an index; the files hold exactly
//! what was compared (the report's max |t − r| is recomputed from them).

use crate::common::*;

#[test]
fn dumped_values_are_the_compared_values() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("dump");
    let json = dir.path().join("r.json");
    let m = model("convnet.onnx");
    let (m, d_s, j) = (
        m.to_str().unwrap(),
        d.to_str().unwrap(),
        json.to_str().unwrap(),
    );
    let (code, out, err) = phantom(&["onnx", m, "--dump", d_s, "--json", j]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report = read_json(&json);
    let index = read_json(&d.join("index.json"));
    let values = index["values"].as_array().unwrap();
    assert_eq!(
        values.len() as u64,
        report["coverage"]["compared"].as_u64().unwrap()
    );
    for v in values {
        let name = v["name"].as_str().unwrap();
        let r = phantom::model::npy::read_npy(&d.join(v["reference"].as_str().unwrap())).unwrap();
        let target = v["targets"][0][1].as_str().unwrap();
        assert_eq!(v["targets"][0][0], "ort-cpu");
        let t = phantom::model::npy::read_npy(&d.join(target)).unwrap();
        assert_eq!(r.dtype(), phantom::tensor::DType::F64, "{name}");
        assert_eq!(r.shape(), t.shape(), "{name}");
        let max_abs = r
            .as_f64()
            .iter()
            .zip(t.as_f64().iter())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f64, f64::max);
        let (_, vr) = report["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|n| n["values"].as_array().unwrap().iter().map(move |x| (n, x)))
            .find(|(_, x)| x["name"] == name)
            .unwrap();
        let reported = vr["metrics"]["max_abs"].as_f64().unwrap();
        assert!(
            (max_abs - reported).abs() <= 1e-12 * reported.max(1e-30),
            "{name}: {max_abs} vs {reported}"
        );
    }
    // Never overwritten without --force; refused where a whole run is not held.
    let (code, _, err) = phantom(&["onnx", m, "--dump", d_s]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--force"), "{err}");
    let (code, _, err) = phantom(&["onnx", m, "--dump", d_s, "--force"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = phantom(&["onnx", m, "--dump", d_s, "--force", "--max-memory", "1GiB"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        d.join("index.json").exists(),
        "a refused run left the earlier dump in place"
    );
}
