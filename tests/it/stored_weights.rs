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

/// x [1, C, 1, 1] → BatchNormalization with C = 16384 (each parameter 64 KiB in float32, inline), beside a chain of
/// eight MatMuls on z [1, 128] with 64 KiB float32 weights in external data. tract needs the statistics as constants
/// while typing, so a stored parse cannot type the model and every weight is widened up front instead.
fn wide_batchnorm(dir: &Path) -> std::path::PathBuf {
    let c = 16384;
    let param = |name: &str, f: fn(usize) -> f32| pb::TensorProto {
        name: name.into(),
        data_type: 1,
        dims: vec![c as i64],
        raw_data: (0..c).flat_map(|i| f(i).to_le_bytes()).collect(),
        ..Default::default()
    };
    let mut bn = node("BatchNormalization", &["x", "s", "b", "m", "v"], "y");
    bn.attribute.push(attr_int("training_mode", 0));
    let mut g = pb::GraphProto {
        name: "bn".into(),
        node: vec![bn],
        initializer: vec![
            param("s", |i| 1.0 + (i % 7) as f32 / 10.0),
            param("b", |i| (i % 5) as f32 / 3.0),
            param("m", |i| (i % 11) as f32 / 13.0),
            param("v", |i| 0.5 + (i % 3) as f32),
        ],
        input: vec![value("x", &[1, c as i64, 1, 1]), value("z", &[1, 128])],
        output: vec![value("y", &[1, c as i64, 1, 1]), value("h8", &[1, 128])],
        ..Default::default()
    };
    let w: Vec<u8> = (0..128 * 128)
        .flat_map(|i| (((i * 29 % 83) as f32 - 41.0) / 512.0).to_le_bytes())
        .collect();
    std::fs::write(dir.join("w.bin"), w.repeat(8)).unwrap();
    for k in 0..8 {
        let entry = |key: &str, v: String| pb::StringStringEntryProto {
            key: key.into(),
            value: v,
        };
        g.initializer.push(pb::TensorProto {
            name: format!("w{k}"),
            data_type: 1,
            dims: vec![128, 128],
            data_location: Some(1),
            external_data: vec![
                entry("location", "w.bin".into()),
                entry("offset", (k * w.len()).to_string()),
                entry("length", w.len().to_string()),
            ],
            ..Default::default()
        });
        let from = if k == 0 {
            "z".to_string()
        } else {
            format!("h{k}")
        };
        g.node.push(node(
            "MatMul",
            &[&from, &format!("w{k}")],
            &format!("h{}", k + 1),
        ));
    }
    write_model(&dir.join("bn.onnx"), g, 15)
}

#[test]
fn a_model_tract_cannot_type_with_stored_weights_is_widened_or_refused_by_the_budget() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = wide_batchnorm(dir.path());
    let json = dir.path().join("r.json");
    let r = report(&m, &[], &[], &json);
    let weights = &r["reference"]["details"]["weights"];
    assert_eq!(
        weights, "every weight widened to f64 up front",
        "{}",
        r["reference"]
    );
    assert_eq!(r["coverage"]["compared"], 9);
    // As stored they fit 1200 KiB (the inline 256 KiB, the widest in f64, 128 KiB); widened (1.5 MiB) they do not.
    let args = ["onnx", m.to_str().unwrap()];
    let (code, out, err) = phantom_env(&args, &[("PHANTOM_MEMORY_BUDGET", "1200KiB")]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("widened to f64 up front, as the reference needs them"),
        "{err}"
    );
}
