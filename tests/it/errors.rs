//! Bad input gets a clear message and exit code 2, never a panic.

use std::process::Command;

use crate::common::*;

fn assert_error(code: i32, err: &str, needle: &str) {
    assert_eq!(code, 2, "expected exit 2, stderr:\n{err}");
    assert!(
        err.contains(needle),
        "stderr should mention `{needle}`:\n{err}"
    );
    assert!(!err.contains("panicked"), "panic:\n{err}");
}

#[test]
fn truncated_model() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.onnx");
    let bytes = std::fs::read(model("convnet.onnx")).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 3]).unwrap();
    let (code, _, err) = phantom(&["onnx", p.to_str().unwrap()]);
    assert_error(code, &err, "is not a valid ONNX model");
}

#[test]
fn garbage_and_empty_and_missing_model() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.onnx");
    std::fs::write(&p, b"this is not protobuf at all \xff\xfe").unwrap();
    let (code, _, err) = phantom(&["onnx", p.to_str().unwrap()]);
    assert_error(code, &err, "g.onnx");
    std::fs::write(&p, b"").unwrap();
    let (code, _, err) = phantom(&["info", p.to_str().unwrap()]);
    assert_error(code, &err, "empty");
    let (code, _, err) = phantom(&["onnx", "/nonexistent/model.onnx"]);
    assert_error(code, &err, "/nonexistent/model.onnx");
}

#[test]
fn missing_input_file() {
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--input",
        "image=/nope/x.npy",
    ]);
    assert_error(code, &err, "/nope/x.npy");
}

#[test]
fn wrong_shape_from_file_and_flag() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.npy");
    let t = phantom::tensor::Tensor::zeros(phantom::tensor::DType::F32, &[1, 3, 16, 16]).unwrap();
    phantom::model::npy::write_npy(&p, &t).unwrap();
    let arg = format!("image={}", p.display());
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--input",
        &arg,
    ]);
    assert_error(code, &err, "wrong shape");
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--shape",
        "image=1x4x32x32",
    ]);
    assert_error(code, &err, "wrong shape");
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--input",
        "nosuch=x.npy",
    ]);
    assert_error(code, &err, "x.npy");
}

#[test]
fn op_the_reference_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("custom.onnx");
    use prost::Message;
    use tract_onnx::pb;
    let vi = |n: &str| pb::ValueInfoProto {
        name: n.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: 1,
                shape: Some(pb::TensorShapeProto {
                    dim: vec![pb::tensor_shape_proto::Dimension {
                        value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(4)),
                        ..Default::default()
                    }],
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let m = pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: "".into(),
            version: 17,
        }],
        graph: Some(pb::GraphProto {
            node: vec![pb::NodeProto {
                name: "mystery".into(),
                op_type: "FrobnicateNotAnOp".into(),
                input: vec!["x".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            input: vec![vi("x")],
            output: vec![vi("y")],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    let (code, _, err) = phantom(&["onnx", p.to_str().unwrap(), "--no-install"]);
    assert_error(code, &err, "mystery");
}

#[test]
fn no_runtime_with_no_install() {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_phantom"))
        .args(["runtimes", "--no-install"])
        .current_dir(empty.path())
        .env_remove("ORT_DYLIB_PATH")
        .env("PATH", empty.path())
        .env("PHANTOM_CACHE_DIR", empty.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_error(
        out.status.code().unwrap_or(-1),
        &err,
        "pip install onnxruntime",
    );
}

#[test]
fn bad_flags() {
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--val-range",
        "3,1",
    ]);
    assert_error(code, &err, "--val-range");
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--ep",
        "tpu",
    ]);
    assert_error(code, &err, "tpu");
}

/// NaN and ±inf in a given input are values, not errors (an attention mask carries −inf): the run compares them
/// (a masked softmax is 0 where the mask is −inf, on both sides), and the report counts them.
#[test]
fn non_finite_inputs_are_values() {
    use tract_onnx::pb;
    let dir = tempfile::tempdir().unwrap();
    let mut softmax = node("Softmax", &["s"], "y");
    softmax.attribute = vec![crate::common::attr_int("axis", -1)];
    let g = pb::GraphProto {
        name: "masked".into(),
        node: vec![node("Add", &["x", "mask"], "s"), softmax],
        input: vec![value("x", &[2, 4]), value("mask", &[2, 4])],
        output: vec![value("y", &[2, 4])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("masked.onnx"), g, 17);
    let p = dir.path().join("mask.npy");
    let mut a = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[2, 4]));
    a[[0, 3]] = f32::NEG_INFINITY;
    a[[1, 0]] = f32::NEG_INFINITY;
    a[[1, 1]] = f32::NEG_INFINITY;
    phantom::model::npy::write_npy(&p, &phantom::tensor::Tensor::F32(a)).unwrap();
    let arg = format!("mask={}", p.display());
    let (json, dump) = (dir.path().join("r.json"), dir.path().join("d"));
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &arg,
        "--json",
        json.to_str().unwrap(),
        "--dump",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r = crate::common::read_json(&json);
    assert_eq!(r["verdict"]["status"], "clean");
    let mask = r["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "mask");
    assert_eq!(mask.unwrap()["non_finite"], 3);
    let y = phantom::model::npy::read_npy(&dump.join("reference/y.npy")).unwrap();
    let y = y.as_f64();
    assert_eq!((y[[0, 3]], y[[1, 0]], y[[1, 1]]), (0.0, 0.0, 0.0));
    for row in 0..2 {
        let sum: f64 = (0..4).map(|k| y[[row, k]]).sum();
        assert!((sum - 1.0).abs() < 1e-15, "row {row} sums to {sum}");
    }
    assert!(y[[1, 2]] > 0.0 && y[[0, 0]] > 0.0);
}

/// Options of one kind of target are refused on the other (exit 2), never silently ignored.
#[test]
fn target_options_that_do_not_apply_are_refused() {
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--ep", "wgpu", "--precision", "bf16"],
            "bf16 is for ONNX Runtime",
        ),
        (
            vec![
                "--ep",
                "wgpu",
                "--precision",
                "fp16",
                "--keep-fp32",
                "conv1",
            ],
            "--keep-fp32",
        ),
        (
            vec!["--ep", "wgpu", "--accumulate", "f16"],
            "--accumulate f16 needs --precision fp16",
        ),
        (vec!["--accumulate", "f16"], "options of --ep wgpu"),
        (vec!["--adapter", "llvmpipe"], "options of --ep wgpu"),
    ] {
        let mut all = vec!["onnx", m];
        all.extend(args);
        let (code, _, err) = phantom(&all);
        assert_error(code, &err, needle);
    }
}

/// An operating system's error reaches the user with the file and what phantom was doing, once, and a full
/// standard output is the OS's error, not an internal one.
#[test]
fn os_errors_name_the_file_and_the_action_once() {
    let (code, _, err) = phantom(&["onnx", "/nonexistent/model.onnx"]);
    assert_error(
        code,
        &err,
        "cannot read /nonexistent/model.onnx: No such file",
    );
    assert_eq!(err.matches("os error 2").count(), 1, "said twice:\n{err}");
    // run.json a directory (EISDIR): the OS's reason, not "it has no run.json".
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("run.json")).unwrap();
    let (code, _, err) = phantom(&["replay", dir.path().to_str().unwrap()]);
    assert_error(code, &err, "cannot read its run.json");
    assert!(!err.contains("has no run.json"), "{err}");
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_phantom"))
        .args(["info", model("convnet.onnx").to_str().unwrap()])
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_error(
        out.status.code().unwrap_or(-1),
        &err,
        "cannot write to standard output",
    );
    assert!(!err.contains("internal error"), "{err}");
}

/// onnxconverter-common's float16 conversion of a model that casts to float32 itself (timm's EfficientViT-B0 casts
/// its attention to float32) declares the cast's output float16: ONNX Runtime refuses the file with a type error.
/// phantom names the node, both types and what to change.
#[test]
fn a_cast_whose_output_is_declared_of_another_type_is_refused_with_what_to_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut cast = node("Cast", &["x"], "y");
    cast.attribute.push(attr_int("to", 1));
    let mut declared = value("y", &[2]);
    if let Some(tract_onnx::pb::type_proto::Value::TensorType(t)) =
        declared.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 10;
    }
    let mut x = value("x", &[2]);
    if let Some(tract_onnx::pb::type_proto::Value::TensorType(t)) =
        x.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 10;
    }
    let g = tract_onnx::pb::GraphProto {
        node: vec![cast, node("Identity", &["y"], "z")],
        input: vec![x],
        output: vec![value("z", &[2])],
        value_info: vec![declared],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("cast.onnx"), g, 17);
    refused(
        &["onnx", m.to_str().unwrap()],
        &[
            "node `y` (Cast)",
            "casts to float",
            "`y` float16 (value_info)",
            "remove its value_info entry",
        ],
    );
}
