//! A runtime's precision mode named as the cause: ONNX Runtime's `MatMulNBits` with `accuracy_level = 4` quantizes
//! its activations to int8 on CPU. The same model at level 0 is clean; at level 4 the node drifts and its cause is
//! the attribute, with the error that int8 quantization of the reference's activations alone makes.

use std::path::Path;

use prost::Message;
use tract_onnx::pb;

use crate::common::*;

const K: usize = 256;
const N: usize = 64;
const BLOCK: usize = 32;

/// a[4, K] → MatMulNBits (4-bit weights, blocks of 32, default zero points) at `level` → y[4, N].
fn model(path: &Path, level: i64) {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) as u32
    };
    let q: Vec<u8> = (0..N * K).map(|_| (next() % 16) as u8).collect();
    let packed: Vec<u8> = q.chunks(2).map(|p| p[0] | (p[1] << 4)).collect();
    let scales: Vec<f32> = (0..N * K / BLOCK)
        .map(|_| 0.01 + 0.05 * (next() % 1000) as f32 / 1000.0)
        .collect();
    let mut mm = node("MatMulNBits", &["a", "w", "s"], "y");
    mm.domain = "com.microsoft".into();
    mm.attribute = vec![
        attr_int("K", K as i64),
        attr_int("N", N as i64),
        attr_int("bits", 4),
        attr_int("block_size", BLOCK as i64),
        attr_int("accuracy_level", level),
    ];
    let w = pb::TensorProto {
        name: "w".into(),
        data_type: 2,
        dims: vec![N as i64, (K / BLOCK) as i64, (BLOCK / 2) as i64],
        raw_data: packed,
        ..Default::default()
    };
    let graph = pb::GraphProto {
        name: "nbits".into(),
        node: vec![mm],
        initializer: vec![w, f32_tensor("s", vec![(N * K / BLOCK) as i64], scales)],
        input: vec![value("a", &[4, K as i64])],
        output: vec![value("y", &[4, N as i64])],
        ..Default::default()
    };
    let mut m = model_proto(graph, 21);
    m.opset_import.push(pb::OperatorSetIdProto {
        domain: "com.microsoft".into(),
        version: 1,
    });
    std::fs::write(path, m.encode_to_vec()).unwrap();
}

#[test]
fn accuracy_level_4_is_named_as_the_cause_with_its_numbers() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (exact, int8) = (dir.path().join("l0.onnx"), dir.path().join("l4.onnx"));
    model(&exact, 0);
    model(&int8, 4);
    let (code, out, err) = phantom(&["onnx", exact.to_str().unwrap()]);
    assert_eq!(code, 0, "level 0 computes in float: {out}{err}");
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        int8.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let r = read_json(&json);
    let c = &r["verdict"]["culprits"][0];
    assert_eq!(c["node"], "y", "{out}");
    let cause = &c["causes"][0];
    assert_eq!(cause["kind"], "accuracy_level", "{out}");
    let ratio = cause["evidence"]["ratio"].as_f64().unwrap();
    assert!(
        (0.9..1.1).contains(&ratio),
        "int8 activations explain the error: {ratio}"
    );
}
