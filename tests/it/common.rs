//! Shared helpers: running the phantom binary, locating demo models, building perturbed models.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Once;

use prost::Message;
use tract_onnx::pb;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn model(name: &str) -> PathBuf {
    root().join("models").join(name)
}

static ORT: Once = Once::new();

/// Makes sure ONNX Runtime is found or installed once before tests run phantom in parallel.
pub fn ensure_runtime() {
    ORT.call_once(|| {
        let out = Command::new(env!("CARGO_BIN_EXE_phantom"))
            .arg("runtimes")
            .output()
            .expect("run phantom");
        assert!(
            out.status.success(),
            "phantom runtimes failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// The ONNX Runtime library phantom finds here (`phantom runtimes`), for tests that change where phantom looks.
pub fn runtime_library() -> String {
    let (code, out, err) = phantom(&["runtimes"]);
    assert_eq!(code, 0, "{out}{err}");
    (out.lines())
        .find_map(|l| l.trim().strip_prefix("library"))
        .map(|p| p.trim().to_string())
        .unwrap_or_else(|| panic!("no library in `phantom runtimes`: {out}"))
}

/// Runs phantom with `args`; returns (exit code, stdout, stderr).
pub fn phantom(args: &[&str]) -> (i32, String, String) {
    phantom_env(args, &[])
}

/// [`phantom`] with environment variables set.
pub fn phantom_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_phantom"))
        .args(args)
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .output()
        .expect("run phantom");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes a copy of `src` where the value produced by node `node` is multiplied by `factor` (an extra `Mul`
/// node takes over the value's name), so the target diverges exactly at that node.
pub fn perturbed_copy(src: &Path, node: &str, factor: f32, dst: &Path) {
    let bytes = std::fs::read(src).unwrap();
    let mut m = pb::ModelProto::decode(bytes.as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    let n = g
        .node
        .iter_mut()
        .find(|n| n.name == node)
        .unwrap_or_else(|| panic!("no node {node}"));
    let value = n.output[0].clone();
    let pre = format!("{value}__before_perturbation");
    n.output[0] = pre.clone();
    g.initializer.push(pb::TensorProto {
        name: "phantom_perturbation_factor".into(),
        data_type: 1,
        float_data: vec![factor],
        ..Default::default()
    });
    g.node.push(pb::NodeProto {
        name: "phantom_perturbation".into(),
        op_type: "Mul".into(),
        input: vec![pre, "phantom_perturbation_factor".into()],
        output: vec![value],
        ..Default::default()
    });
    std::fs::write(dst, m.encode_to_vec()).unwrap();
}

/// The real PP-OCR classifier with an injected fault, written to `dir/faulty.onnx`: a converter that wrote
/// epsilon 0.1 instead of the model's 1e-5 into `BatchNormalization@8`. (the model, the faulty copy, that node's
/// output).
pub fn wrong_epsilon_copy(dir: &Path) -> (PathBuf, PathBuf, String) {
    let real = root().join("tests/data/real/ppocr_cls_v2.onnx");
    let mut m = pb::ModelProto::decode(std::fs::read(&real).unwrap().as_slice()).unwrap();
    let bn = m
        .graph
        .as_mut()
        .unwrap()
        .node
        .iter_mut()
        .find(|n| n.name == "BatchNormalization@8")
        .unwrap();
    let out = bn.output[0].clone();
    bn.attribute
        .iter_mut()
        .find(|a| a.name == "epsilon")
        .unwrap()
        .f = 0.1;
    let faulty = dir.join("faulty.onnx");
    std::fs::write(&faulty, m.encode_to_vec()).unwrap();
    (real, faulty, out)
}

/// Parses a JSON report file.
/// Every value report of a JSON report, node by node.
pub fn value_reports(r: &serde_json::Value) -> impl Iterator<Item = &serde_json::Value> {
    r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["values"].as_array().unwrap().iter())
}

pub fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Writes a chain of three 3×3 convolutions (8 channels, no bias, ReLU between; node names `conv1`..`conv3`) with
/// fixed pseudo-random weights of RMS about 1/√72, so activations keep the scale of the input.
pub fn conv_chain(dst: &Path) {
    let mut seed = 0x9e37_79b9u32;
    let mut weights = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                ((seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 0.4
            })
            .collect()
    };
    let vi = |name: &str| pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: 1,
                shape: Some(pb::TensorShapeProto {
                    dim: [1i64, 8, 12, 12]
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
    };
    let mut nodes = vec![];
    let mut inits = vec![];
    let mut prev = "x".to_string();
    for k in 1..=3 {
        inits.push(pb::TensorProto {
            name: format!("w{k}"),
            data_type: 1,
            dims: vec![8, 8, 3, 3],
            float_data: weights(8 * 8 * 9),
            ..Default::default()
        });
        let out = if k == 3 {
            "y".to_string()
        } else {
            format!("c{k}")
        };
        nodes.push(pb::NodeProto {
            name: format!("conv{k}"),
            op_type: "Conv".into(),
            input: vec![prev.clone(), format!("w{k}")],
            output: vec![out.clone()],
            attribute: vec![pb::AttributeProto {
                name: "pads".into(),
                r#type: 7,
                ints: vec![1, 1, 1, 1],
                ..Default::default()
            }],
            ..Default::default()
        });
        prev = out;
        if k < 3 {
            let relu = format!("r{k}");
            nodes.push(pb::NodeProto {
                name: format!("relu{k}"),
                op_type: "Relu".into(),
                input: vec![prev.clone()],
                output: vec![relu.clone()],
                ..Default::default()
            });
            prev = relu;
        }
    }
    let m = pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(pb::GraphProto {
            name: "conv_chain".into(),
            node: nodes,
            initializer: inits,
            input: vec![vi("x")],
            output: vec![vi("y")],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(dst, m.encode_to_vec()).unwrap();
}

/// Copies the model at `src` to `dst` with the float initializer `name` multiplied by `factor` (a weight fault).
pub fn scaled_weights_copy(src: &Path, name: &str, factor: f32, dst: &Path) {
    edited_copy(src, dst, |g| {
        let t = initializer(g, name);
        if t.float_data.is_empty() {
            let v: Vec<f32> = t
                .raw_data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * factor)
                .collect();
            t.raw_data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        } else {
            t.float_data.iter_mut().for_each(|x| *x *= factor);
        }
    });
}

/// Writes a copy of `src` to `dst` with its graph changed by `edit`.
fn edited_copy(src: &Path, dst: &Path, edit: impl FnOnce(&mut pb::GraphProto)) {
    let bytes = std::fs::read(src).unwrap();
    let mut m = pb::ModelProto::decode(bytes.as_slice()).unwrap();
    edit(m.graph.as_mut().unwrap());
    std::fs::write(dst, m.encode_to_vec()).unwrap();
}

/// The initializer `name` of `g`.
fn initializer<'g>(g: &'g mut pb::GraphProto, name: &str) -> &'g mut pb::TensorProto {
    (g.initializer.iter_mut())
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no initializer {name}"))
}

/// Writes a copy of `src` to `dst` where node `dq` (a `DequantizeLinear` with an 8-bit zero point) reads a zero point
/// of its own, one level above the one it shares with its `QuantizeLinear`: the zoo's zero-point fault.
pub fn shifted_zero_point_copy(src: &Path, dq: &str, dst: &Path) {
    edited_copy(src, dst, |g| {
        let node = (g.node.iter_mut())
            .find(|n| n.name == dq)
            .unwrap_or_else(|| panic!("no node {dq}"));
        let zp = node.input[2].clone();
        node.input[2] = format!("{zp}__fault");
        let mut t = initializer(g, &zp).clone();
        t.name = format!("{zp}__fault");
        t.raw_data = t.raw_data.iter().map(|b| b.wrapping_add(1)).collect();
        t.int32_data.iter_mut().for_each(|z| *z += 1);
        g.initializer.push(t);
    });
}

/// Writes a copy of `src` to `dst` with `delta` added to every element of its float16 initializer `name` (stored as
/// raw data): a bias shifted in a model converted to fp16.
pub fn shifted_f16_copy(src: &Path, name: &str, delta: f32, dst: &Path) {
    edited_copy(src, dst, |g| {
        let t = initializer(g, name);
        assert_eq!(t.data_type, 10, "{name} is not float16");
        t.raw_data = (t.raw_data.chunks_exact(2))
            .map(|b| half::f16::from_f32(half::f16::from_le_bytes([b[0], b[1]]).to_f32() + delta))
            .flat_map(|x| x.to_le_bytes())
            .collect();
    });
}

// Small ONNX builders for purpose-built test models.

pub fn f32_tensor(name: &str, dims: Vec<i64>, data: Vec<f32>) -> pb::TensorProto {
    pb::TensorProto {
        name: name.into(),
        data_type: 1,
        dims,
        float_data: data,
        ..Default::default()
    }
}

pub fn value(name: &str, dims: &[i64]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value::DimValue, Dimension};
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: 1,
                shape: Some(pb::TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|d| Dimension {
                            value: Some(DimValue(*d)),
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

pub fn node(op: &str, inputs: &[&str], out: &str) -> pb::NodeProto {
    pb::NodeProto {
        name: out.into(),
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        ..Default::default()
    }
}

pub fn i64_tensor(name: &str, dims: Vec<i64>, data: Vec<i64>) -> pb::TensorProto {
    pb::TensorProto {
        name: name.into(),
        data_type: 7,
        dims,
        int64_data: data,
        ..Default::default()
    }
}

pub fn attr_ints(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub fn attr_int(name: &str, v: i64) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}

pub fn attr_str(name: &str, v: &str) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// A model of `graph` importing opset `opset` of the default domain.
pub fn model_proto(graph: pb::GraphProto, opset: i64) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

/// Writes a one-graph model to `path`.
pub fn write_model(path: &Path, graph: pb::GraphProto, opset: i64) -> PathBuf {
    std::fs::write(path, model_proto(graph, opset).encode_to_vec()).unwrap();
    path.to_path_buf()
}

/// Runs phantom with `args` and asserts exit 2, no panic text, and that stderr names each of `names`.
pub fn refused(args: &[&str], names: &[&str]) -> String {
    let (code, out, err) = phantom(args);
    if std::env::var_os("PHANTOM_SHOW_ERRORS").is_some() {
        println!("phantom {}\n{err}", args.join(" "));
    }
    assert_eq!(code, 2, "{args:?}\nstdout: {out}\nstderr: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{args:?}: {err}"
    );
    for n in names {
        assert!(
            err.contains(n),
            "{args:?}: stderr does not name `{n}`: {err}"
        );
    }
    err
}

/// An exclusive lock on `path` (created), held until the returned file is dropped: one test at a time does the
/// work it guards (a download into `target/`).
pub fn file_lock(path: &Path) -> std::fs::File {
    use std::os::unix::io::AsRawFd;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap();
    // SAFETY: flock on a descriptor this function owns; released when the file is closed.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    f
}

/// `PYTHON -m pip install`, quietly, without the version check (the tests' own installs).
pub fn pip_install(python: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(python);
    c.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]);
    c
}

/// `python3 -m venv DIR`: a fresh virtual environment (with its own `pip`) for the tests' Python tools.
pub fn python_venv(dir: &Path) {
    let out = Command::new("python3")
        .args(["-m", "venv"])
        .arg(dir)
        .output()
        .expect("start python3");
    assert!(
        out.status.success(),
        "python3 -m venv {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
