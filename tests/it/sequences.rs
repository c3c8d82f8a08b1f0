//! Sequences built inside a model (`SplitToSequence`, `SequenceAt`, `SequenceInsert`, `SequenceLength`,
//! `ConcatFromSequence`) are followed element by element: each element is a value both sides compute and phantom
//! compares, and the reference's results are the spec's. Sequence inputs and outputs are covered by the conformance
//! suite's sequence cases.

use std::collections::HashMap;

use tract_onnx::pb;

use crate::common::*;

/// x [2, 3] → SplitToSequence(axis 1) → seq; r = Relu(seq[-1]); seq2 = [r] + seq; n = len(seq2); y = concat(seq2).
fn model(dir: &std::path::Path) -> std::path::PathBuf {
    let mut split = node("SplitToSequence", &["x"], "seq");
    split.attribute.push(attr_int("axis", 1));
    let mut insert = node("SequenceInsert", &["seq", "r", "zero"], "seq2");
    insert.name = "insert".into();
    let mut cat = node("ConcatFromSequence", &["seq2"], "y");
    cat.attribute.push(attr_int("axis", 1));
    let g = pb::GraphProto {
        name: "sequences".into(),
        node: vec![
            split,
            node("SequenceAt", &["seq", "last"], "at"),
            node("Relu", &["at"], "r"),
            insert,
            node("SequenceLength", &["seq2"], "n"),
            cat,
        ],
        initializer: vec![
            i64_tensor("last", vec![], vec![-1]),
            i64_tensor("zero", vec![], vec![0]),
        ],
        input: vec![value("x", &[2, 3])],
        output: vec![value("y", &[2, 4]), {
            let mut n = value("n", &[]);
            if let Some(pb::type_proto::Value::TensorType(t)) =
                n.r#type.as_mut().and_then(|t| t.value.as_mut())
            {
                t.elem_type = 7;
            }
            n
        }],
        ..Default::default()
    };
    write_model(&dir.join("seq.onnx"), g, 18)
}

#[test]
fn sequence_elements_are_computed_and_compared() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path());
    let x = [0.5f64, -1.0, -2.0, 3.0, 4.0, 5.0];
    let input = dir.path().join("x.npy");
    let t = phantom::tensor::Tensor::from_f64(
        phantom::tensor::DType::F32,
        ndarray::ArrayD::from_shape_vec(vec![2, 3], x.to_vec()).unwrap(),
    )
    .unwrap();
    phantom::model::npy::write_npy(&input, &t).unwrap();
    let (d, json) = (dir.path().join("dump"), dir.path().join("r.json"));
    let arg = format!("x={}", input.display());
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &arg,
        "--dump",
        d.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("sequence node(s) rewritten"), "{out}");
    let index = read_json(&d.join("index.json"));
    let values: HashMap<String, Vec<f64>> = (index["values"].as_array().unwrap().iter())
        .map(|v| {
            let t = phantom::model::npy::read_npy(&d.join(v["reference"].as_str().unwrap()));
            let t = t.unwrap().to_f64_array();
            (
                v["name"].as_str().unwrap().to_string(),
                t.iter().copied().collect(),
            )
        })
        .collect();
    // Each element of the split is a compared value, as are the picked element and the results.
    assert_eq!(values["seq[2]"], [-2.0, 5.0]);
    assert_eq!(values["at"], [-2.0, 5.0]);
    assert_eq!(values["n"], [4.0]);
    assert_eq!(values["y"], [0.0, 0.5, -1.0, -2.0, 5.0, 3.0, 4.0, 5.0]);
    let report = read_json(&json);
    assert_eq!(report["verdict"]["status"], "clean");
    assert_eq!(report["coverage"]["unchecked"], 0, "{report:#}");
}

#[test]
fn a_position_outside_the_sequence_is_refused_with_the_node_named() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path());
    let mut proto =
        <pb::ModelProto as prost::Message>::decode(std::fs::read(&m).unwrap().as_slice()).unwrap();
    let g = proto.graph.as_mut().unwrap();
    g.initializer[1] = i64_tensor("zero", vec![], vec![7]);
    std::fs::write(&m, prost::Message::encode_to_vec(&proto)).unwrap();
    refused(
        &["run", m.to_str().unwrap(), "--runner", "reference"],
        &["SequenceInsert", "insert", "position 7"],
    );
}

/// A `Loop` whose body builds and concatenates a sequence (none at the top level): once the loop is unrolled, the
/// sequences its copies build are followed too. y = x · 2³ after three steps of v ← sum(stack(v, v)).
#[test]
fn sequences_inside_an_unrolled_loop_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let mut cat = node("ConcatFromSequence", &["s"], "c");
    cat.attribute
        .extend([attr_int("axis", 0), attr_int("new_axis", 1)]);
    let mut sum = node("ReduceSum", &["c", "ax"], "v_out");
    sum.attribute.push(attr_int("keepdims", 0));
    let scalar = |name: &str, ty: i32| {
        let mut v = value(name, &[]);
        if let Some(pb::type_proto::Value::TensorType(t)) =
            v.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            t.elem_type = ty;
        }
        v
    };
    let body = pb::GraphProto {
        name: "body".into(),
        node: vec![
            node("SequenceConstruct", &["v_in", "v_in"], "s"),
            cat,
            sum,
            node("Identity", &["cond_in"], "cond_out"),
        ],
        initializer: vec![i64_tensor("ax", vec![1], vec![0])],
        input: vec![scalar("i", 7), scalar("cond_in", 9), value("v_in", &[3])],
        output: vec![scalar("cond_out", 9), value("v_out", &[3])],
        ..Default::default()
    };
    let mut lp = node("Loop", &["n", "", "x"], "y");
    lp.attribute.push(pb::AttributeProto {
        name: "body".into(),
        r#type: pb::attribute_proto::AttributeType::Graph as i32,
        g: Some(body),
        ..Default::default()
    });
    let g = pb::GraphProto {
        name: "loop_seq".into(),
        node: vec![lp],
        initializer: vec![i64_tensor("n", vec![], vec![3])],
        input: vec![value("x", &[3])],
        output: vec![value("y", &[3])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("loop_seq.onnx"), g, 18);
    let x = dir.path().join("x.npy");
    let t = phantom::tensor::Tensor::from_f64(
        phantom::tensor::DType::F32,
        ndarray::ArrayD::from_shape_vec(vec![3], vec![1.0, 2.0, 3.0]).unwrap(),
    )
    .unwrap();
    phantom::model::npy::write_npy(&x, &t).unwrap();
    let d = dir.path().join("dump");
    let arg = format!("x={}", x.display());
    let (code, out, err) = phantom(&[
        "run",
        m.to_str().unwrap(),
        "--runner",
        "reference",
        "--input",
        &arg,
        "--dump",
        d.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let y = phantom::model::npy::read_npy(&d.join("reference/y.npy")).unwrap();
    assert_eq!(
        y.to_f64_array().iter().copied().collect::<Vec<_>>(),
        [8.0, 16.0, 24.0]
    );
}

/// An `optional(seq(tensor))` input threaded through a Loop whose body asks `OptionalHasElement` and picks the
/// given sequence in an `If` (`tests/data/sequences/make_sequences.py`): the optional is held as the sequence it
/// holds, the Loop unrolls with its `If` inside, and every step is computed and compared. y's rows are the given
/// element, then h ← tanh(x[i] + h) per row of x.
#[test]
fn an_optional_sequence_input_is_followed_through_a_loop_and_its_branches() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = root().join("tests/data/sequences/optional_sequence_loop.onnx");
    let x: Vec<f64> = (0..12).map(|v| f64::from(v as f32 / 10.0)).collect();
    let first = [0.5f64, -0.5, 1.0];
    let npy = |name: &str, shape: Vec<usize>, v: &[f64]| {
        let path = dir.path().join(format!("{name}.npy"));
        let t = phantom::tensor::Tensor::from_f64(
            phantom::tensor::DType::F32,
            ndarray::ArrayD::from_shape_vec(shape, v.to_vec()).unwrap(),
        )
        .unwrap();
        phantom::model::npy::write_npy(&path, &t).unwrap();
        format!("{name}={}", path.display())
    };
    let (xs, s0) = (npy("x", vec![4, 3], &x), npy("opt_seq[0]", vec![3], &first));
    let (d, json) = (dir.path().join("dump"), dir.path().join("r.json"));
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--input",
        &xs,
        "--input",
        &s0,
        "--dump",
        d.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let mut want = first.to_vec();
    let mut h = first.to_vec();
    for row in x.chunks(3) {
        h = (0..3).map(|j| (row[j] + h[j]).tanh()).collect();
        want.extend(&h);
    }
    let y = phantom::model::npy::read_npy(&d.join("reference/y.npy")).unwrap();
    let y: Vec<f64> = y.to_f64_array().iter().copied().collect();
    assert_eq!(y.len(), want.len());
    for (g, w) in y.iter().zip(&want) {
        assert!((g - w).abs() < 1e-6, "{y:?} vs {want:?}");
    }
    let report = read_json(&json);
    assert_eq!(report["verdict"]["status"], "clean");
    assert_eq!(report["coverage"]["unchecked"], 0, "{report:#}");
    // With nothing given, two elements are generated and the verdict is as complete.
    let (code, out, err) = phantom(&["onnx", m.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("0 unchecked"), "{out}");
}
