//! Snapshot tests of the terminal, JSON, JUnit and Markdown renderings (paths, hashes, timings and the machine
//! redacted). The model is element-wise only (Mul, Add, Relu, and a perturbing Mul), so every figure is exactly
//! rounded IEEE arithmetic and identical on any CPU.

use prost::Message;
use tract_onnx::pb;

use crate::common::*;

fn vi(name: &str) -> pb::ValueInfoProto {
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: 1,
                shape: Some(pb::TensorShapeProto {
                    dim: [1, 8]
                        .iter()
                        .map(|&d| pb::tensor_shape_proto::Dimension {
                            value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn scalar(name: &str, v: f32) -> pb::TensorProto {
    pb::TensorProto {
        name: name.into(),
        data_type: 1,
        float_data: vec![v],
        ..Default::default()
    }
}

fn node(name: &str, op: &str, inputs: &[&str], output: &str) -> pb::NodeProto {
    pb::NodeProto {
        name: name.into(),
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        ..Default::default()
    }
}

fn elementwise_model(dir: &std::path::Path) -> std::path::PathBuf {
    let m = pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: "".into(),
            version: 17,
        }],
        graph: Some(pb::GraphProto {
            node: vec![
                node("scale", "Mul", &["x", "three"], "scaled"),
                node("shift", "Add", &["scaled", "half"], "shifted"),
                node("relu", "Relu", &["shifted"], "y"),
            ],
            initializer: vec![scalar("three", 3.0), scalar("half", 0.5)],
            input: vec![vi("x")],
            output: vec![vi("y")],
            ..Default::default()
        }),
        ..Default::default()
    };
    let p = dir.join("elementwise.onnx");
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    p
}

/// Replaces run-specific text (paths, hashes, times, machine, library) with placeholders.
fn redact(s: &str, dir: &std::path::Path) -> String {
    let mut out = s.replace(&dir.display().to_string(), "[dir]");
    for key in ["sha256 ", "time: "] {
        let mut from = 0;
        while let Some(rel) = out[from..].find(key) {
            let start = from + rel + key.len();
            let end = out[start..]
                .find([')', '\n', '…'])
                .map_or(out.len(), |e| start + e);
            out.replace_range(start..end, "[redacted]");
            from = start + "[redacted]".len();
        }
    }
    out
}

fn redact_json(mut v: serde_json::Value) -> String {
    for (k, f) in [
        ("timings", "[redacted]"),
        ("environment", "[redacted]"),
        ("command", "[redacted]"),
    ] {
        v[k] = f.into();
    }
    v["model"]["path"] = "[dir]/elementwise.onnx".into();
    v["model"]["sha256"] = "[redacted]".into();
    v["target_model"]["path"] = "[dir]/perturbed.onnx".into();
    v["target_model"]["sha256"] = "[redacted]".into();
    v["target"]["spec"]["model"] = "[dir]/perturbed.onnx".into();
    for k in [
        "library",
        "library_source",
        "build_info",
        "model",
        "version",
        "ep_used",
    ] {
        v["target"]["details"][k] = "[redacted]".into();
    }
    v["target"]["version"] = "[redacted]".into();
    v["inputs"][0]["origin"] = "[redacted]".into();
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn renderings() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let model = elementwise_model(dir.path());
    let target = dir.path().join("perturbed.onnx");
    perturbed_copy(&model, "shift", 1.01, &target);
    let x = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[1, 8]), |i| i[1] as f32 * 0.25 - 1.0);
    let npy = dir.path().join("x.npy");
    phantom::model::npy::write_npy(&npy, &phantom::tensor::Tensor::F32(x)).unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let (code, out, err) = phantom(&[
        "onnx",
        model.to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--input",
        &format!("x={}", npy.display()),
        "--json",
        &p("r.json"),
        "--junit",
        &p("r.xml"),
        "--summary-md",
        &p("r.md"),
    ]);
    assert_eq!(code, 1, "{err}");
    // The ORT version line and library path differ between machines.
    let terminal: String = out
        .lines()
        .filter(|l| !l.starts_with("target  ") && !l.starts_with("input "))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("terminal", redact(&terminal, dir.path()));
    insta::assert_snapshot!("json", redact_json(read_json(&dir.path().join("r.json"))));
    insta::assert_snapshot!(
        "junit",
        redact(&std::fs::read_to_string(p("r.xml")).unwrap(), dir.path())
    );
    let md = std::fs::read_to_string(p("r.md")).unwrap();
    let md: String = md
        .lines()
        .filter(|l| !l.starts_with("<sub>"))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("markdown", redact(&md, dir.path()));
}
