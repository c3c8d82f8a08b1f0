//! Weights kept as stored: the reference widens each large weight to f64 as it is used, from the model's own bytes
//! (inline) or its memory-mapped external data, and gets the very numbers it gets with every weight widened up front.

use std::path::Path;

use crate::common::*;
use tract_onnx::pb;

/// A float16 weight of `dims`, in `raw_data`, with values that are not round in binary.
fn f16_weight(name: &str, dims: [i64; 2]) -> pb::TensorProto {
    let n = (dims[0] * dims[1]) as usize;
    let raw = (0..n)
        .flat_map(|i| half::f16::from_f32(((i * 37 % 101) as f32 - 50.0) / 333.0).to_le_bytes())
        .collect();
    pb::TensorProto {
        name: name.into(),
        data_type: 10,
        dims: dims.to_vec(),
        raw_data: raw,
        ..Default::default()
    }
}

/// x [2, 256] → Cast(float16 `w1` [256, 128], inline) → MatMul → MatMul(float `w2` [128, 256], external data in
/// `w.bin`) → Add(small `b`): two weights of at least 64 KiB, one of each storage.
fn two_weight_model(dir: &Path) -> std::path::PathBuf {
    let w2: Vec<f32> = (0..128 * 256)
        .map(|i| ((i * 53 % 97) as f32 - 48.0) / 1000.3)
        .collect();
    let bytes: Vec<u8> = w2.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("w.bin"), &bytes).unwrap();
    let entry = |k: &str, v: String| pb::StringStringEntryProto {
        key: k.into(),
        value: v,
    };
    let ext = pb::TensorProto {
        name: "w2".into(),
        data_type: 1,
        dims: vec![128, 256],
        data_location: Some(1),
        external_data: vec![
            entry("location", "w.bin".into()),
            entry("offset", "0".into()),
            entry("length", bytes.len().to_string()),
        ],
        ..Default::default()
    };
    let mut cast = node("Cast", &["w1"], "w1f");
    cast.attribute.push(attr_int("to", 1));
    let g = pb::GraphProto {
        name: "stored".into(),
        node: vec![
            cast,
            node("MatMul", &["x", "w1f"], "h"),
            node("MatMul", &["h", "w2"], "y"),
            node("Add", &["y", "b"], "z"),
        ],
        initializer: vec![
            f16_weight("w1", [256, 128]),
            ext,
            f32_tensor("b", vec![256], (0..256).map(|i| i as f32 / 7.0).collect()),
        ],
        input: vec![value("x", &[2, 256])],
        output: vec![value("z", &[2, 256])],
        ..Default::default()
    };
    write_model(&dir.join("m.onnx"), g, 17)
}

/// The JSON report of `phantom onnx MODEL EXTRA...` with `env`, which must exit 0.
fn report(m: &Path, extra: &[&str], env: &[(&str, &str)], json: &Path) -> serde_json::Value {
    let mut args = vec![
        "onnx",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend(extra);
    let (code, out, err) = phantom_env(&args, env);
    assert_eq!(code, 0, "{out}{err}");
    read_json(json)
}

#[test]
fn stored_weights_give_the_numbers_of_weights_widened_up_front() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = two_weight_model(dir.path());
    for extra in [&[][..], &["--precision", "fp16"][..]] {
        let json = dir.path().join("r.json");
        let stored = report(&m, extra, &[], &json);
        let widened = report(&m, extra, &[("PHANTOM_STORED_WEIGHTS", "0")], &json);
        let weights = |r: &serde_json::Value| r["reference"]["details"]["weights"].clone();
        assert_eq!(
            weights(&stored),
            "2 weight(s) kept as stored (192 KiB), widened to f64 as each is used",
            "{extra:?}"
        );
        assert_eq!(weights(&widened), "every weight widened to f64 up front");
        assert_eq!(
            stored["nodes"], widened["nodes"],
            "{extra:?}: the same numbers"
        );
        assert_eq!(stored["verdict"], widened["verdict"]);
        let compared = stored["coverage"]["compared"].as_u64();
        assert_eq!(
            compared,
            Some(4),
            "every value compared: {}",
            stored["coverage"]
        );
    }
}
