//! Narrow number formats (int4 with blocked scales, float8 e4m3fn): weights stored in them are decoded exactly by
//! the reference, a model built on them gets a complete, clean verdict against ONNX Runtime, and ONNX Runtime's
//! outputs in them are decoded and compared.

use std::path::Path;

use phantom::model::npy::read_npy;
use prost::Message;
use tract_onnx::pb;

use crate::common::*;

/// int4 weights [8, 4]: value (3i + j) mod 16 − 8.
fn w4(i: usize, j: usize) -> i8 {
    ((3 * i + j) % 16) as i8 - 8
}

/// Blocked scales [2, 4] (blocks of 4 rows) and int4 zero points.
fn s4(b: usize, j: usize) -> f32 {
    0.125 * (b + 1) as f32 + 0.0625 * j as f32
}

fn z4(b: usize, j: usize) -> i8 {
    ((b + j) % 3) as i8 - 1
}

/// float8 e4m3fn codes of the [4, 3] weights and the values they mean.
const W8: [(u8, f64); 12] = [
    (0x38, 1.0),
    (0x40, 2.0),
    (0xB8, -1.0),
    (0x30, 0.5),
    (0x3C, 1.5),
    (0x44, 3.0),
    (0xC0, -2.0),
    (0x28, 0.25),
    (0x7E, 448.0),
    (0x01, 1.0 / 512.0),
    (0x34, 0.75),
    (0xBC, -1.5),
];

fn packed_int4(dims: Vec<i64>, values: &[i8]) -> pb::TensorProto {
    let mut raw = vec![0u8; values.len().div_ceil(2)];
    for (k, &v) in values.iter().enumerate() {
        raw[k / 2] |= ((v as u8) & 0xF) << (4 * (k % 2));
    }
    pb::TensorProto {
        data_type: 22,
        dims,
        raw_data: raw,
        ..Default::default()
    }
}

fn x_value(k: usize) -> f32 {
    k as f32 * 0.25 - 1.0
}

/// x [2, 8] → MatMul with DequantizeLinear(int4 weights, blocked) → MatMul with DequantizeLinear(float8 weights).
fn narrow_weights_model(dir: &Path) -> std::path::PathBuf {
    let mut wq = packed_int4(
        vec![8, 4],
        &(0..32).map(|k| w4(k / 4, k % 4)).collect::<Vec<_>>(),
    );
    wq.name = "w4".into();
    let mut zp = packed_int4(
        vec![2, 4],
        &(0..8).map(|k| z4(k / 4, k % 4)).collect::<Vec<_>>(),
    );
    zp.name = "w4_zp".into();
    let scale = f32_tensor(
        "w4_scale",
        vec![2, 4],
        (0..8).map(|k| s4(k / 4, k % 4)).collect(),
    );
    let w8 = pb::TensorProto {
        name: "w8".into(),
        data_type: 17,
        dims: vec![4, 3],
        raw_data: W8.iter().map(|(c, _)| *c).collect(),
        ..Default::default()
    };
    let mut dq4 = node("DequantizeLinear", &["w4", "w4_scale", "w4_zp"], "w4f");
    dq4.attribute = vec![attr_int("axis", 0), attr_int("block_size", 4)];
    let graph = pb::GraphProto {
        name: "narrow".into(),
        node: vec![
            dq4,
            node("MatMul", &["x", "w4f"], "y1"),
            node("DequantizeLinear", &["w8", "w8_scale"], "w8f"),
            node("MatMul", &["y1", "w8f"], "y"),
        ],
        initializer: vec![wq, zp, scale, w8, f32_tensor("w8_scale", vec![], vec![0.5])],
        input: vec![value("x", &[2, 8])],
        output: vec![value("y", &[2, 3])],
        ..Default::default()
    };
    let m = write_model(&dir.join("narrow.onnx"), graph, 21);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut x = f32_tensor("x", vec![2, 8], (0..16).map(x_value).collect());
    x.name = "x".into();
    std::fs::write(data.join("input_0.pb"), x.encode_to_vec()).unwrap();
    m
}

/// y1 and y computed here in f64 from the weights' definitions.
fn expected() -> (Vec<f64>, Vec<f64>) {
    let w = |i: usize, j: usize| (w4(i, j) - z4(i / 4, j)) as f64 * s4(i / 4, j) as f64;
    let y1: Vec<f64> = (0..2)
        .flat_map(|r| {
            (0..4).map(move |j| (0..8).map(|i| x_value(r * 8 + i) as f64 * w(i, j)).sum())
        })
        .collect();
    let y = (0..2)
        .flat_map(|r| {
            let y1 = &y1;
            (0..3).map(move |j| (0..4).map(|i| y1[r * 4 + i] * W8[i * 3 + j].1 * 0.5).sum())
        })
        .collect();
    (y1, y)
}

#[test]
fn int4_and_float8_weights_are_decoded_exactly_and_compared_clean() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = narrow_weights_model(dir.path());
    let data = dir.path().join("data");
    let dump = dir.path().join("dump");
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        data.to_str().unwrap(),
        "--dump",
        dump.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    for n in r["nodes"].as_array().unwrap() {
        let kind = n["reference"]["kind"].as_str().unwrap();
        assert!(kind == "f64_phantom" || kind == "f64", "{n}");
    }
    let (want1, want) = expected();
    for (name, want) in [("y1", want1), ("y", want)] {
        let got = read_npy(&dump.join(format!("reference/{name}.npy"))).unwrap();
        let got = got.to_f64_array();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                "{name}: {g} vs {w}"
            );
        }
    }
}

#[test]
fn a_given_input_off_a_float8_grid_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = value("x", &[3]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        input.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 17;
    }
    let mut cast = node("Cast", &["x"], "y");
    cast.attribute = vec![attr_int("to", 1)];
    let graph = pb::GraphProto {
        name: "f8".into(),
        node: vec![cast],
        input: vec![input],
        output: vec![value("y", &[3])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("f8.onnx"), graph, 21);
    let npy = dir.path().join("x.npy");
    let t = phantom::tensor::Tensor::F32(ndarray::arr1(&[1.0f32, 0.3, 2.0]).into_dyn());
    phantom::model::npy::write_npy(&npy, &t).unwrap();
    let arg = format!("x={}", npy.display());
    let err = refused(
        &["run", m.to_str().unwrap(), "--input", &arg],
        &["x", "float8e4m3fn", "0.3"],
    );
    assert!(err.contains("element 1"), "{err}");
}

fn packed_uint4(name: &str, dims: Vec<i64>, values: &[u8]) -> pb::TensorProto {
    let codes: Vec<i8> = values.iter().map(|&v| v as i8).collect();
    let mut t = packed_int4(dims, &codes);
    t.data_type = 21;
    t.name = name.into();
    t
}

/// ORT's `GatherBlockQuantized` on a uint4 table [6, 32] with uint4 zero points (blocks of 16 along axis 1), as
/// the onnxruntime-genai model builder writes embedding tables: gathered rows equal their exact dequantization.
#[test]
fn a_uint4_embedding_table_is_gathered_exactly() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let q = |r: usize, c: usize| ((5 * r + 3 * c) % 16) as u8;
    let z = |r: usize, b: usize| ((r + 2 * b) % 16) as u8;
    let s = |r: usize, b: usize| 0.01 * (1 + r + 3 * b) as f32;
    let table = packed_uint4(
        "table",
        vec![6, 32],
        &(0..192).map(|k| q(k / 32, k % 32)).collect::<Vec<_>>(),
    );
    let zp = packed_uint4(
        "zp",
        vec![6, 2],
        &(0..12).map(|k| z(k / 2, k % 2)).collect::<Vec<_>>(),
    );
    let scales = f32_tensor(
        "scales",
        vec![6, 2],
        (0..12).map(|k| s(k / 2, k % 2)).collect(),
    );
    let mut gather = node(
        "GatherBlockQuantized",
        &["table", "ids", "scales", "zp"],
        "emb",
    );
    gather.domain = "com.microsoft".into();
    gather.attribute = vec![attr_int("block_size", 16), attr_int("quantize_axis", 1)];
    let mut ids = value("ids", &[3]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        ids.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 7;
    }
    let graph = pb::GraphProto {
        name: "embed".into(),
        node: vec![gather, node("Relu", &["emb"], "y")],
        initializer: vec![table, zp, scales],
        input: vec![ids],
        output: vec![value("y", &[3, 32])],
        ..Default::default()
    };
    let mut m = model_proto(graph, 21);
    m.opset_import.push(pb::OperatorSetIdProto {
        domain: "com.microsoft".into(),
        version: 1,
    });
    let path = dir.path().join("embed.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut t = i64_tensor("ids", vec![3], vec![4, 0, 5]);
    t.name = "ids".into();
    std::fs::write(data.join("input_0.pb"), t.encode_to_vec()).unwrap();
    let dump = dir.path().join("dump");
    let (code, out, err) = phantom(&[
        "onnx",
        path.to_str().unwrap(),
        "--input",
        data.to_str().unwrap(),
        "--dump",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let got = read_npy(&dump.join("reference/emb.npy"))
        .unwrap()
        .to_f64_array();
    for (k, &row) in [4usize, 0, 5].iter().enumerate() {
        for c in 0..32 {
            let want = (q(row, c) as f64 - z(row, c / 16) as f64) * s(row, c / 16) as f64;
            assert_eq!(got[[k, c]], want, "row {row} column {c}");
        }
    }
}

/// `x` [3, 3] quantized to `q` of ONNX type `code` (scale 0.5, zero point 0) and dequantized to `y`; both outputs.
fn quantized_output_model(dir: &Path, code: i32) -> std::path::PathBuf {
    let mut q = value("q", &[3, 3]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        q.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = code;
    }
    let zero = pb::TensorProto {
        name: "z".into(),
        data_type: code,
        int32_data: vec![0],
        ..Default::default()
    };
    let g = pb::GraphProto {
        name: "narrow_out".into(),
        node: vec![
            node("QuantizeLinear", &["x", "s", "z"], "q"),
            node("DequantizeLinear", &["q", "s", "z"], "y"),
        ],
        initializer: vec![f32_tensor("s", vec![], vec![0.5]), zero],
        input: vec![value("x", &[3, 3])],
        output: vec![q, value("y", &[3, 3])],
        ..Default::default()
    };
    write_model(&dir.join(format!("q{code}.onnx")), g, 21)
}

/// ONNX Runtime's int4 (9 elements: an odd count, packed in halves of bytes) and float8 outputs are decoded and
/// compared element by element, not left out; the levels are the spec's.
#[test]
fn narrow_outputs_of_the_target_are_decoded_and_compared() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let x = [-3.9f64, -1.2, -0.2, 0.0, 0.26, 0.74, 1.3, 2.6, 9.0];
    let input = dir.path().join("x.npy");
    let t = phantom::tensor::Tensor::from_f64(
        phantom::tensor::DType::F32,
        ndarray::ArrayD::from_shape_vec(vec![3, 3], x.to_vec()).unwrap(),
    )
    .unwrap();
    phantom::model::npy::write_npy(&input, &t).unwrap();
    // x/s = [-7.8, -2.4, -0.4, 0, 0.52, 1.48, 2.6, 5.2, 18]: int4 rounds half to even and saturates at −8 and 7;
    // float8 e4m3fn rounds to its grid (spacing 1/32 in [0.25, 0.5), 1/16 in [0.5, 1), 1/8 in [1, 2), 1/4 in
    // [2, 4), 1/2 in [4, 8), 2 in [16, 32)).
    let int4: Vec<f64> = vec![-8.0, -2.0, 0.0, 0.0, 1.0, 1.0, 3.0, 5.0, 7.0];
    let f8: Vec<f64> = vec![-8.0, -2.5, -0.40625, 0.0, 0.5, 1.5, 2.5, 5.0, 18.0];
    for (code, want) in [(22, int4), (17, f8)] {
        let m = quantized_output_model(dir.path(), code);
        let (dump, json) = (
            dir.path().join(format!("d{code}")),
            dir.path().join(format!("r{code}.json")),
        );
        let arg = format!("x={}", input.display());
        let (status, out, err) = phantom(&[
            "onnx",
            m.to_str().unwrap(),
            "--input",
            &arg,
            "--dump",
            dump.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(status, 0, "{out}{err}");
        let r = read_json(&json);
        assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
        let index = read_json(&dump.join("index.json"));
        let q = (index["values"].as_array().unwrap().iter())
            .find(|v| v["name"] == "q")
            .unwrap_or_else(|| panic!("q not compared: {index}"));
        let target = read_npy(&dump.join(q["targets"][0][1].as_str().unwrap())).unwrap();
        let got: Vec<f64> = target.to_f64_array().iter().copied().collect();
        assert_eq!(got, want, "type {code}");
    }
}

/// A float8 value one grid step from the reference where its float32 input sits on a rounding boundary is judged
/// on float8's grid: `1.0625 + 1e-9` is a tie in float32 (the 1e-9 is lost), rounded to even, 1.0; in f64 it lies
/// above the tie and rounds up to 1.125. One step is a correct rounding of the target's input: it passes, where
/// float32's tolerance read it as drift.
#[test]
fn a_float8_value_is_judged_on_its_grid() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut y = value("y", &[4]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        y.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 17;
    }
    let cast = pb::NodeProto {
        attribute: vec![attr_int("to", 17)],
        ..node("Cast", &["s"], "y")
    };
    let g = pb::GraphProto {
        name: "f8_tie".into(),
        node: vec![node("Add", &["a", "b"], "s"), cast],
        input: vec![value("a", &[4]), value("b", &[4])],
        output: vec![y],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("f8.onnx"), g, 19);
    let (a, b) = tie_inputs(dir.path());
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &a,
        "--input",
        &b,
        "--json",
        json.to_str().unwrap(),
        // Its own rounding kept (not the target's, see the next test): judged on the grid.
        "--own-decisions",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    let v = value_reports(&r).find(|v| v["name"] == "y").unwrap();
    assert_eq!(v["status"], "pass", "{v}");
    assert_eq!(v["metrics"]["max_abs"], 0.125, "one float8 step apart: {v}");
    assert_eq!(v["tolerance"]["rtol"], 0.125, "float8 e4m3's step: {v}");
}

/// a + b → Cast to float8 e4m3fn → Cast to float → × 3 (`offset`: the target model adds it before its Cast).
fn f8_chain(dir: &Path, name: &str, offset: Option<f32>) -> std::path::PathBuf {
    let mut nodes = vec![node("Add", &["a", "b"], "s")];
    let mut cast_in = "s";
    if offset.is_some() {
        nodes.push(node("Add", &["s", "off"], "s_off"));
        cast_in = "s_off";
    }
    let cast = |input: &str, out: &str, to: i64| pb::NodeProto {
        attribute: vec![attr_int("to", to)],
        ..node("Cast", &[input], out)
    };
    nodes.extend([
        cast(cast_in, "q", 17),
        cast("q", "f", 1),
        node("Mul", &["f", "three"], "z"),
    ]);
    let mut initializer = vec![f32_tensor("three", vec![], vec![3.0])];
    initializer.extend(offset.map(|o| f32_tensor("off", vec![], vec![o])));
    let g = pb::GraphProto {
        name: "f8_chain".into(),
        node: nodes,
        initializer,
        input: vec![value("a", &[4]), value("b", &[4])],
        output: vec![value("z", &[4])],
        ..Default::default()
    };
    write_model(&dir.join(name), g, 19)
}

/// A Cast onto float8 is a rounding: where its input lies within its noise of a boundary (1.0625 + 1e-9, which
/// float32 rounds to the tie 1.0625 and then to even), the reference takes the target's level and what follows is
/// compared like for like. A target whose level differs where the input lies far from any boundary is still drift.
#[test]
fn a_cast_onto_float8_is_a_decision_taken_within_its_input_s_noise() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = f8_chain(dir.path(), "f8_chain.onnx", None);
    let (a, b) = tie_inputs(dir.path());
    let json = dir.path().join("r.json");
    let args = ["onnx", m.to_str().unwrap(), "--input", &a, "--input", &b];
    let (code, out, err) = phantom(&[&args[..], &["--json", json.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 flip(s)"), "{out}");
    let r = read_json(&json);
    for name in ["q", "f", "z"] {
        let v = value_reports(&r).find(|v| v["name"] == name).unwrap();
        assert_eq!(v["metrics"]["max_abs"], 0.0, "compared like for like: {v}");
    }
    // The target adds 0.2 before its Cast: 2.2 rounds to 2.25 where the reference's 2.0 lies far from 2.125.
    let t = f8_chain(dir.path(), "f8_off.onnx", Some(0.2));
    let (code, out, err) = phantom(&[&args[..], &["--target-model", t.to_str().unwrap()]].concat());
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("DRIFT"), "{out}");
}

/// `--input` arguments for a and b of the float8 models: 1.0625 + 1e-9 (float32 rounds it to the tie 1.0625, which
/// float8 e4m3 rounds to even, 1.0; f64 rounds it up, 1.125), then values on the grid.
fn tie_inputs(dir: &Path) -> (String, String) {
    let npy = |name: &str, v: &[f64]| {
        let p = dir.join(format!("{name}.npy"));
        let t = phantom::tensor::Tensor::from_f64(
            phantom::tensor::DType::F32,
            ndarray::ArrayD::from_shape_vec(vec![4], v.to_vec()).unwrap(),
        )
        .unwrap();
        phantom::model::npy::write_npy(&p, &t).unwrap();
        format!("{name}={}", p.display())
    };
    (
        npy("a", &[1.0625, 1.0625, 2.0, -3.0]),
        npy("b", &[1e-9, 0.0, 0.0, 0.0]),
    )
}
