//! Model-local functions (as onnxscript and `onnx.helper.make_function` write them): inlined at import, so every
//! node inside a function — nested calls included — is a value both runtimes expose and phantom compares.

use tract_onnx::pb;

use crate::common::*;

fn ref_attr(name: &str, refers_to: &str, ty: i32) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        ref_attr_name: refers_to.into(),
        r#type: ty,
        ..Default::default()
    }
}

fn function(name: &str, attrs: &[&str], nodes: Vec<pb::NodeProto>) -> pb::FunctionProto {
    pb::FunctionProto {
        name: Some(name.into()),
        domain: Some("custom.fn".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        attribute: attrs.iter().map(|s| s.to_string()).collect(),
        node: nodes,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: 18,
        }],
        ..Default::default()
    }
}

fn call(f: &str, name: &str, ins: &[&str], out: &str) -> pb::NodeProto {
    let mut n = node(f, ins, out);
    n.name = name.into();
    n.domain = "custom.fn".into();
    n
}

/// x → Block (Mul by 0.5, then the nested Act: LeakyRelu with the caller's slope, Tanh) → Block again → y.
fn model(dir: &std::path::Path) -> std::path::PathBuf {
    let mut leaky = node("LeakyRelu", &["a"], "t");
    leaky.attribute = vec![ref_attr("alpha", "slope", 1)];
    let act = function("Act", &["slope"], vec![leaky, node("Tanh", &["t"], "b")]);
    let mut half = node("Constant", &[], "h");
    half.attribute = vec![pb::AttributeProto {
        name: "value_float".into(),
        f: 0.5,
        r#type: 1,
        ..Default::default()
    }];
    let mut inner = call("Act", "act", &["m"], "b");
    inner.attribute = vec![ref_attr("slope", "slope", 1)];
    let block = function(
        "Block",
        &["slope"],
        vec![half, node("Mul", &["a", "h"], "m"), inner],
    );
    let slope = |v: f32| pb::AttributeProto {
        name: "slope".into(),
        f: v,
        r#type: 1,
        ..Default::default()
    };
    let mut b1 = call("Block", "block1", &["x"], "y1");
    b1.attribute = vec![slope(0.1)];
    let mut b2 = call("Block", "block2", &["y1"], "y");
    b2.attribute = vec![slope(0.3)];
    let graph = pb::GraphProto {
        name: "functions".into(),
        node: vec![b1, b2],
        input: vec![value("x", &[2, 3])],
        output: vec![value("y", &[2, 3])],
        ..Default::default()
    };
    let mut m = model_proto(graph, 18);
    m.opset_import.push(pb::OperatorSetIdProto {
        domain: "custom.fn".into(),
        version: 1,
    });
    m.functions = vec![act, block];
    let path = dir.join("functions.onnx");
    std::fs::write(&path, prost::Message::encode_to_vec(&m)).unwrap();
    path
}

#[test]
fn every_node_inside_nested_functions_is_compared_under_its_callers_name() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path());
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    let names: Vec<&str> = r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    // Inner nodes keep their own names (here, their outputs'), prefixed by the calls that hold them.
    for want in ["block1/m", "block1/act/t", "block2/act/b"] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }
    let compared: Vec<&serde_json::Value> = value_reports(&r).collect();
    assert!(compared.len() >= 8, "{} values compared", compared.len());
    assert!(out.contains("inlined"), "{out}");
}
