//! Real-world file features: external data, inputs from .npy / .npz / test_data_set directories.

use prost::Message;
use tract_onnx::pb;

use crate::common::*;

/// A copy of convnet.onnx whose largest initializer lives in an external file next to it.
fn with_external_data(dir: &std::path::Path) -> std::path::PathBuf {
    let bytes = std::fs::read(model("convnet.onnx")).unwrap();
    let mut m = pb::ModelProto::decode(bytes.as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    let t = g
        .initializer
        .iter_mut()
        .max_by_key(|t| t.raw_data.len())
        .unwrap();
    std::fs::write(
        dir.join("weights.bin"),
        [vec![0u8; 16], t.raw_data.clone()].concat(),
    )
    .unwrap();
    let entry = |k: &str, v: String| pb::StringStringEntryProto {
        key: k.into(),
        value: v,
    };
    t.external_data = vec![
        entry("location", "weights.bin".into()),
        entry("offset", "16".into()),
        entry("length", t.raw_data.len().to_string()),
    ];
    t.raw_data.clear();
    t.data_location = Some(1);
    let p = dir.join("external.onnx");
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    p
}

#[test]
fn external_data_is_read_by_both_sides() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let p = with_external_data(dir.path());
    let other = tempfile::tempdir().unwrap();
    // Run from another directory: external data resolves against the model's folder, not the cwd.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_phantom"))
        .args(["onnx", p.to_str().unwrap(), "--quiet"])
        .current_dir(other.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("clean: all 13 compared values"), "{text}");
}

#[test]
fn inputs_from_npy_npz_and_test_data_set_give_the_same_report() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let t = phantom::tensor::Tensor::from_f64(
        phantom::tensor::DType::F32,
        ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[1, 3, 32, 32]), |i| {
            ((i[1] * 7 + i[2] * 3 + i[3]) % 11) as f64 / 5.0 - 1.0
        }),
    )
    .unwrap();
    let npy = dir.path().join("image.npy");
    phantom::model::npy::write_npy(&npy, &t).unwrap();
    let set = dir.path().join("test_data_set_0");
    std::fs::create_dir(&set).unwrap();
    let proto = phantom::model::proto::tensor_to_proto("image", &t);
    std::fs::write(set.join("input_0.pb"), proto.encode_to_vec()).unwrap();
    let npz = dir.path().join("inputs.npz");
    {
        let f = std::fs::File::create(&npz).unwrap();
        let mut z = zip::ZipWriter::new(f);
        z.start_file("image.npy", zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut z, &phantom::model::npy::to_npy(&t)).unwrap();
        z.finish().unwrap();
    }
    let mut maxima = vec![];
    for arg in [
        format!("image={}", npy.display()),
        set.display().to_string(),
        npz.display().to_string(),
    ] {
        let json = dir.path().join("r.json");
        let (code, out, err) = phantom(&[
            "onnx",
            model("convnet.onnx").to_str().unwrap(),
            "--input",
            &arg,
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{arg}: {out}{err}");
        let r = read_json(&json);
        assert!(
            r["inputs"][0]["origin"]
                .as_str()
                .unwrap()
                .starts_with("file "),
            "{}",
            r["inputs"][0]
        );
        let first = r["nodes"][0]["values"][0]["reference_stats"]["max"]
            .as_f64()
            .unwrap();
        maxima.push(first);
    }
    assert!(
        maxima.windows(2).all(|w| w[0] == w[1]),
        "same input, same values: {maxima:?}"
    );
}

/// An image model `x[batch, 3, h, w] → Reshape([1, 3·h₀·w₀]) → Relu` whose Reshape only works at h₀×w₀, with
/// `imgsz` metadata when given.
fn image_model(dir: &std::path::Path, hw: (i64, i64), imgsz: Option<&str>) -> std::path::PathBuf {
    let dim = |v: pb::tensor_shape_proto::dimension::Value| pb::tensor_shape_proto::Dimension {
        value: Some(v),
        ..Default::default()
    };
    use pb::tensor_shape_proto::dimension::Value::{DimParam, DimValue};
    let x = pb::ValueInfoProto {
        name: "x".into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: 1,
                shape: Some(pb::TensorShapeProto {
                    dim: vec![
                        dim(DimParam("batch".into())),
                        dim(DimValue(3)),
                        dim(DimParam("h".into())),
                        dim(DimParam("w".into())),
                    ],
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let y = pb::ValueInfoProto {
        name: "y".into(),
        ..x.clone()
    };
    let node = |op: &str, i: Vec<&str>, o: &str| pb::NodeProto {
        name: o.into(),
        op_type: op.into(),
        input: i.into_iter().map(String::from).collect(),
        output: vec![o.into()],
        ..Default::default()
    };
    let m = pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        metadata_props: imgsz
            .map(|v| {
                vec![pb::StringStringEntryProto {
                    key: "imgsz".into(),
                    value: v.into(),
                }]
            })
            .unwrap_or_default(),
        graph: Some(pb::GraphProto {
            name: "g".into(),
            node: vec![
                node("Reshape", vec!["x", "shape"], "flat"),
                node("Relu", vec!["flat"], "y"),
            ],
            initializer: vec![pb::TensorProto {
                name: "shape".into(),
                data_type: 7,
                dims: vec![2],
                int64_data: vec![1, 3 * hw.0 * hw.1],
                ..Default::default()
            }],
            input: vec![x],
            output: vec![pb::ValueInfoProto { r#type: None, ..y }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let p = dir.join(format!("image_{}x{}.onnx", hw.0, hw.1));
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    p
}

/// An image given for an input whose height and width are symbolic keeps its own size (a 40x56 page fed to a model
/// that only runs at 40x56), where no guess would find it.
#[test]
fn an_image_given_for_symbolic_dims_keeps_its_own_size() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = image_model(dir.path(), (40, 56), None);
    // A TIFF page: the formats the reference's ImageDecoder reads are given inputs too.
    let png = dir.path().join("page.tiff");
    image::RgbImage::from_fn(56, 40, |x, y| image::Rgb([x as u8 * 4, y as u8 * 6, 128]))
        .save(&png)
        .unwrap();
    let json = dir.path().join("r.json");
    let arg = format!("x={}", png.display());
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &arg,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("(56x40) at its own size"), "{out}");
    assert_eq!(
        read_json(&json)["inputs"][0]["shape"],
        serde_json::json!([1, 3, 40, 56])
    );
}

/// Symbolic image dims: the model's `imgsz` metadata first; without it, a guess checked against ONNX Runtime and
/// replaced by a size real models use when rejected; the header says where each dim came from.
#[test]
fn symbolic_image_dims_get_realistic_sizes() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let j = json.to_str().unwrap();
    let m = image_model(dir.path(), (64, 96), Some("[64, 96]"));
    let (code, out, err) = phantom(&["onnx", m.to_str().unwrap(), "--json", j]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("dim `h` = 64: the model's imgsz metadata"),
        "{out}"
    );
    assert_eq!(
        read_json(&json)["inputs"][0]["shape"],
        serde_json::json!([1, 3, 64, 96])
    );
    let m = image_model(dir.path(), (48, 320), None);
    let (code, out, err) = phantom(&["onnx", m.to_str().unwrap(), "--json", j]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("48x320: ONNX Runtime rejected 320x320, accepted this"),
        "{out}"
    );
    assert_eq!(
        read_json(&json)["inputs"][0]["shape"],
        serde_json::json!([1, 3, 48, 320])
    );
    // No size real models use fits: the error names the dims phantom chose and the flags that set them.
    let m = image_model(dir.path(), (7, 9), None);
    let (code, _, err) = phantom(&["onnx", m.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("phantom chose these input dims: x `batch` = 1")
            && err.contains("x `h` = 320")
            && err.contains("--shape INPUT=1x3xHxW")
            && !err.contains("failed: ONNX Runtime failed"),
        "{err}"
    );
    let (code, _, err) = phantom(&["onnx", m.to_str().unwrap(), "--shape", "x=1x3x7x9"]);
    assert_eq!(code, 0, "{err}");
}

/// An unnamed dim (an audio model's sample axis, as Silero VAD v6 has it) gets the sequence lengths real models use
/// when ONNX Runtime rejects 1, as named ones do: `x[1, ?] → Reshape([1, -1, 64])` runs at 512 with no flags.
#[test]
fn unnamed_dims_get_the_fallback_lengths() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let unnamed = |name: &str, dims: &[i64]| {
        let mut v = value(name, dims);
        if let Some(pb::type_proto::Value::TensorType(t)) =
            v.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            t.shape.as_mut().unwrap().dim[1].value = None; // unnamed: no dim_value, no dim_param
        }
        v
    };
    let out = |name: &str| pb::ValueInfoProto {
        name: name.into(),
        ..Default::default()
    };
    // `state[2, ?]` beside it must stay 1 (Reshape to [2]), as Silero's state does: each dim is tried alone first.
    let graph = pb::GraphProto {
        name: "g".into(),
        node: vec![
            node("Reshape", &["x", "shape"], "y"),
            node("Reshape", &["state", "two"], "s"),
        ],
        initializer: vec![
            i64_tensor("shape", vec![3], vec![1, -1, 64]),
            i64_tensor("two", vec![1], vec![2]),
        ],
        input: vec![unnamed("x", &[1, 1]), unnamed("state", &[2, 1])],
        output: vec![out("y"), out("s")],
        ..Default::default()
    };
    let p = write_model(&dir.path().join("unnamed.onnx"), graph, 17);
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        p.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("x axis 1 = 512: ONNX Runtime rejected 1, accepted this"),
        "{out}"
    );
    assert_eq!(
        read_json(&json)["inputs"][0]["shape"],
        serde_json::json!([1, 512])
    );
    assert_eq!(
        read_json(&json)["inputs"][1]["shape"],
        serde_json::json!([2, 1])
    );
}
