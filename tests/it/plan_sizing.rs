//! What `phantom plan` sizes: every value of a model from its structure alone, whatever its IR version.

use crate::common::*;

/// An IR-3 model lists its initializers among its graph inputs (old Caffe2 and CNTK exports): the plan sizes every
/// value from the structure alone all the same (its large weights, made inputs of the sizing model, are declared
/// once), and says nothing about values it could not size.
#[test]
fn an_ir3_model_s_values_are_all_sized_by_the_plan() {
    use prost::Message;
    use tract_onnx::pb;
    let dir = tempfile::tempdir().unwrap();
    let d = 40usize;
    let weight = |name: &str| pb::TensorProto {
        name: name.into(),
        data_type: 1,
        dims: vec![d as i64, d as i64],
        float_data: (0..d * d).map(|k| (k % 7) as f32 / 7.0 - 0.4).collect(),
        ..Default::default()
    };
    let graph = pb::GraphProto {
        name: "ir3".into(),
        node: vec![
            node("MatMul", &["x", "w0"], "m0"),
            node("Relu", &["m0"], "r0"),
            node("MatMul", &["r0", "w1"], "y"),
        ],
        initializer: vec![weight("w0"), weight("w1")],
        input: vec![
            value("x", &[1, d as i64]),
            value("w0", &[d as i64, d as i64]),
            value("w1", &[d as i64, d as i64]),
        ],
        output: vec![value("y", &[1, d as i64])],
        ..Default::default()
    };
    let mut proto = model_proto(graph, 11);
    proto.ir_version = 3;
    let m = dir.path().join("ir3.onnx");
    std::fs::write(&m, proto.encode_to_vec()).unwrap();
    let out = dir.path().join("plan");
    let (m, o) = (m.to_str().unwrap(), out.to_str().unwrap());
    let (code, stdout, err) = phantom(&["plan", m, "-o", o, "--segments", "2"]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(
        !format!("{stdout}{err}").contains("could not size"),
        "{stdout}{err}"
    );
    let plan = read_json(&out.join("plan.json"));
    for s in plan["segments"].as_array().unwrap() {
        assert_eq!(
            s["estimate"]["sized_values"], s["estimate"]["values"],
            "{s}"
        );
    }
}
