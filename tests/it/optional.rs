//! Optional values (`optional(tensor(float))`): a graph input declared optional and given a tensor (written as the
//! ONNX backend suite writes it, an `OptionalProto`) is that tensor to the reference, `OptionalHasElement` of it is
//! true and of nothing false, `OptionalGetElement` is the tensor; an empty optional is refused by name.

use std::path::{Path, PathBuf};

use phantom::model::npy::read_npy;
use prost::Message;
use tract_onnx::pb;

use crate::common::*;

/// `ModelProto` down to graph inputs whose type is an optional (tract's protobuf types cannot write one): appended
/// to a model's bytes, protobuf merges its inputs into the model's graph.
#[derive(Clone, PartialEq, prost::Message)]
struct ModelInputs {
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphInputs>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GraphInputs {
    #[prost(message, repeated, tag = "11")]
    input: Vec<OptionalInput>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct OptionalInput {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    r#type: Option<OptionalTypeProto>,
}

/// `TypeProto` with its `optional_type`.
#[derive(Clone, PartialEq, prost::Message)]
struct OptionalTypeProto {
    #[prost(message, optional, tag = "9")]
    optional_type: Option<OptionalOf>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct OptionalOf {
    #[prost(message, optional, tag = "1")]
    elem_type: Option<pb::TypeProto>,
}

/// ONNX's `OptionalProto` of a tensor (elem_type 1), or empty.
#[derive(Clone, PartialEq, prost::Message)]
struct OptionalProto {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(int32, tag = "2")]
    elem_type: i32,
    #[prost(message, optional, tag = "3")]
    tensor_value: Option<pb::TensorProto>,
}

const X: [f32; 3] = [-1.5, 0.0, 2.25];

/// x: optional(tensor(float, [3])) → has = OptionalHasElement(x), y = Relu(OptionalGetElement(x)), and
/// none = OptionalHasElement() of nothing.
fn optional_model(dir: &Path) -> PathBuf {
    let mut none = node("OptionalHasElement", &[], "none");
    none.input = vec![];
    let graph = pb::GraphProto {
        name: "optional".into(),
        node: vec![
            node("OptionalHasElement", &["x"], "has"),
            node("OptionalGetElement", &["x"], "v"),
            node("Relu", &["v"], "y"),
            none,
        ],
        output: vec![bool_value("has"), value("y", &[3]), bool_value("none")],
        ..Default::default()
    };
    let tensor = value("x", &[3]).r#type;
    let inputs = ModelInputs {
        graph: Some(GraphInputs {
            input: vec![OptionalInput {
                name: "x".into(),
                r#type: Some(OptionalTypeProto {
                    optional_type: Some(OptionalOf { elem_type: tensor }),
                }),
            }],
        }),
    };
    let mut bytes = model_proto(graph, 18).encode_to_vec();
    bytes.extend(inputs.encode_to_vec());
    let path = dir.join("optional.onnx");
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A scalar boolean graph output.
fn bool_value(name: &str) -> pb::ValueInfoProto {
    let mut v = value(name, &[]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        v.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 9;
    }
    v
}

/// A test_data_set directory whose input_0.pb is `x` as an OptionalProto (`value` none: an empty optional).
fn data(dir: &Path, value: Option<&[f32]>) -> PathBuf {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let o = OptionalProto {
        name: "x".into(),
        elem_type: 1,
        tensor_value: value.map(|v| f32_tensor("", vec![v.len() as i64], v.to_vec())),
    };
    std::fs::write(data.join("input_0.pb"), o.encode_to_vec()).unwrap();
    data
}

#[test]
fn an_optional_input_given_a_tensor_is_that_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let m = optional_model(dir.path());
    let data = data(dir.path(), Some(&X));
    let dump = dir.path().join("dump");
    let (code, out, err) = phantom(&[
        "run",
        m.to_str().unwrap(),
        "--input",
        data.to_str().unwrap(),
        "--dump",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let read = |name: &str| read_npy(&dump.join(format!("reference/{name}.npy"))).unwrap();
    let flag = |name: &str| {
        let t = read(name);
        assert!(t.shape().is_empty(), "{name}: shape {:?}", t.shape());
        t.to_f64_array().iter().next().copied().unwrap()
    };
    assert_eq!(flag("has"), 1.0);
    assert_eq!(flag("none"), 0.0);
    let y = read("y").to_f64_array();
    let want: Vec<f64> = X.iter().map(|&x| x.max(0.0) as f64).collect();
    assert_eq!(y.iter().copied().collect::<Vec<_>>(), want);
}

#[test]
fn an_empty_optional_input_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let m = optional_model(dir.path());
    let data = data(dir.path(), None);
    refused(
        &[
            "run",
            m.to_str().unwrap(),
            "--input",
            data.to_str().unwrap(),
        ],
        &["input_0.pb", "empty optional `x`"],
    );
}

/// The models phantom derives keep an optional input's type (tract's protobuf types drop it): the fp16 conversion of
/// the optional model loads in ONNX Runtime and compares.
#[test]
fn an_optional_input_keeps_its_type_in_the_fp16_conversion() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = optional_model(dir.path());
    let data = data(dir.path(), Some(&X));
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        data.to_str().unwrap(),
        "--precision",
        "fp16",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 1, "{out}{err}");
    let r = read_json(&json);
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    let y = (r["nodes"].as_array().unwrap().iter())
        .flat_map(|n| n["values"].as_array().unwrap())
        .find(|v| v["name"] == "y")
        .unwrap();
    assert_eq!(y["status"], "pass", "{y}");
}
