//! A `Loop` its own condition stops, with scan outputs (what tf2onnx writes for a Keras RNN: a while loop whose
//! stacked outputs only the run can size): tract cannot type it, so it stands in with the target's shapes and
//! phantom's f64 Loop runs on the run's inputs; every value is compared, and a fault inside its body is found at it.

use crate::common::{attr_int, ensure_runtime, f32_tensor, i64_tensor, node, value, write_model};
use crate::contrib::onnx_report;
use tract_onnx::pb;

/// `value` with element type `elem` (ONNX's code).
fn typed(name: &str, elem: i32, dims: &[i64]) -> pb::ValueInfoProto {
    let mut v = value(name, dims);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        v.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = elem;
    }
    v
}

/// `h ← tanh(k · (h + x[i]))` for each row `i` of `x` [20, 3] while `i + 1 < n`, `n` the count of
/// elements of `x` above 1 (only the data says how many iterations run); `hs` stacks every step's `h`, `y = 2 · hs`.
fn recurrence(dir: &std::path::Path, name: &str, k: f32) -> std::path::PathBuf {
    let mut gather = node("Gather", &["x", "i"], "xi");
    gather.attribute.push(attr_int("axis", 0));
    let body = pb::GraphProto {
        name: "body".into(),
        node: vec![
            gather,
            node("Add", &["hin", "xi"], "s"),
            node("Mul", &["s", "k"], "sk"),
            node("Tanh", &["sk"], "hout"),
            node("Add", &["i", "one"], "i1"),
            node("Less", &["i1", "n"], "cout"),
            node("Identity", &["hout"], "scan"),
        ],
        initializer: vec![
            i64_tensor("one", vec![], vec![1]),
            f32_tensor("k", vec![], vec![k]),
        ],
        input: vec![typed("i", 7, &[]), typed("cin", 9, &[]), value("hin", &[3])],
        output: vec![
            typed("cout", 9, &[]),
            value("hout", &[3]),
            value("scan", &[3]),
        ],
        ..Default::default()
    };
    let mut cast = node("Cast", &["pos"], "posi");
    cast.attribute.push(attr_int("to", 7));
    let mut reduce = node("ReduceSum", &["posi"], "n");
    reduce.attribute.push(attr_int("keepdims", 0));
    let mut first = node("Gather", &["shp", "zi"], "m");
    first.attribute.push(attr_int("axis", 0));
    let mut looped = node("Loop", &["m", "go", "h0"], "h_last");
    looped.output.push("hs".into());
    looped.attribute.push(pb::AttributeProto {
        name: "body".into(),
        r#type: pb::attribute_proto::AttributeType::Graph as i32,
        g: Some(body),
        ..Default::default()
    });
    let mut go = i64_tensor("go", vec![], vec![]);
    go.data_type = 9;
    go.int32_data = vec![1];
    let graph = pb::GraphProto {
        name: "g".into(),
        node: vec![
            node("Greater", &["x", "bar"], "pos"),
            cast,
            reduce,
            node("Shape", &["x"], "shp"),
            first,
            looped,
            node("Mul", &["hs", "two"], "y"),
        ],
        initializer: vec![
            f32_tensor("bar", vec![], vec![1.0]),
            i64_tensor("zi", vec![], vec![0]),
            go,
            f32_tensor("h0", vec![3], vec![0.0; 3]),
            f32_tensor("two", vec![], vec![2.0]),
        ],
        input: vec![value("x", &[20, 3])],
        output: vec![value("y", &[-1, 3]), value("h_last", &[3])],
        ..Default::default()
    };
    write_model(&dir.join(name), graph, 17)
}

#[test]
fn a_loop_its_condition_stops_computes_its_scan_outputs_in_f64() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = recurrence(dir.path(), "loop.onnx", 1.0);
    let (code, out, r) = onnx_report(&m, &[]);
    assert_eq!(
        (code, &r["verdict"]["status"]),
        (0, &serde_json::json!("clean")),
        "{out}"
    );
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    let nodes = r["nodes"].as_array().unwrap();
    let looped = nodes.iter().find(|n| n["op_type"] == "Loop").unwrap();
    assert_eq!(looped["reference"]["kind"], "f64_phantom", "{looped}");
    let y = (nodes.iter().flat_map(|n| n["values"].as_array().unwrap()))
        .find(|v| v["name"] == "y")
        .unwrap();
    assert_eq!(y["status"], "pass", "{y}");
    let steps = y["shape"][0].as_u64().unwrap();
    assert!((2..20).contains(&steps), "the data decides the steps: {y}");

    // The body's scale 1.0 → 1.01 in the target: the loop's values drift, first at the loop, whose body is named as the cause.
    let faulty = recurrence(dir.path(), "faulty.onnx", 1.01);
    let (code, out, r) = onnx_report(&m, &["--target-model", faulty.to_str().unwrap()]);
    assert_eq!(
        (code, &r["verdict"]["status"]),
        (1, &serde_json::json!("drift")),
        "{out}"
    );
    assert_eq!(r["verdict"]["first_divergence"]["op_type"], "Loop", "{out}");
    assert!(
        out.contains("the `body` graph of Loop `h_last` differs: its initializer `k` is 1.01 in the target model, 1 in"),
        "{out}"
    );
}

/// tf2onnx's export of a Keras GRU at its defaults (`tests/data/toolchains/make_tf2onnx.py`): its while loop stacks
/// the steps in a scan output. With no flags (one step) and over 6 steps, every value is compared, the loop's in
/// f64. Before, the loop and all after it were not computed (INCOMPLETE).
#[test]
fn a_keras_gru_exported_by_tf2onnx_compares_every_value() {
    ensure_runtime();
    let m = crate::common::root().join("tests/data/toolchains/tf2onnx_gru.onnx");
    for flags in [&[][..], &["--shape", "x=1x6x8"]] {
        let (code, out, r) = onnx_report(&m, flags);
        assert_eq!(code, 0, "{flags:?}: {out}");
        assert_eq!(r["coverage"]["unchecked"], 0, "{flags:?}: {out}");
        let nodes = r["nodes"].as_array().unwrap();
        let looped = nodes.iter().find(|n| n["op_type"] == "Loop").unwrap();
        assert_eq!(looped["reference"]["kind"], "f64_phantom", "{looped}");
        let dense = (nodes.iter().flat_map(|n| n["values"].as_array().unwrap()))
            .find(|v| v["name"] == "dense")
            .unwrap();
        assert_eq!(dense["status"], "pass", "{dense}");
    }
}
