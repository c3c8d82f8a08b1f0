//! `--precision fp16|bf16` conversion on models built to trip it: declared I/O types, IR-3 initializers and Loop
//! bodies, constants read only in float32, external data, and outputs the precision destroys.

use prost::Message;
use tract_onnx::pb;

use std::path::Path;

use super::precision::case;
use crate::common::{ensure_runtime, model, phantom, read_json};

/// Declared element type of a graph input or output, from the saved model.
fn declared(vi: &pb::ValueInfoProto) -> i32 {
    match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(pb::type_proto::Value::TensorType(t)) => t.elem_type,
        _ => 0,
    }
}

/// IR-3 models list initializers as graph inputs too, and Loop bodies read float initializers of the outer graph:
/// the conversion keeps both consistent (fp16 initializers declared fp16 wherever they are declared, the body's
/// float values in fp16), and the converted model loads and runs in ONNX Runtime.
#[test]
fn ir3_initializers_and_loop_bodies_convert_consistently() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    for name in ["ir3_initializers", "loop_body"] {
        let saved = dir.path().join(format!("{name}.fp16.onnx"));
        let m = case(name);
        let (code, out, err) = phantom(&[
            "onnx",
            m.as_str(),
            "--precision",
            "fp16",
            "--save-target-model",
            saved.to_str().unwrap(),
            "--keep-control-flow",
        ]);
        if name == "loop_body" {
            // The kept Loop runs on phantom's f64 Loop kernel; the converted model loads and runs in ONNX Runtime
            // with outputs close to the float32 model's.
            assert_eq!(code, 0, "{name}\n{out}\n{err}");
            assert!(out.contains("phantom's own f64 kernels (Loop)"), "{out}");
            let run = |p: &str| {
                let (code, out, err) = phantom(&["run", p, "--runner", "ort"]);
                assert_eq!(code, 0, "{p}\n{out}\n{err}");
                let line = out
                    .lines()
                    .find(|l| l.starts_with("y "))
                    .unwrap()
                    .to_string();
                let nums: Vec<f64> = line
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                (line, nums)
            };
            let (l32, n32) = run(&m);
            let (l16, n16) = run(saved.to_str().unwrap());
            assert!(l16.contains(" f32 "), "outputs keep float32: {l16}");
            for (a, b) in n32.iter().zip(&n16) {
                assert!((a - b).abs() < 1e-2, "{l32} vs {l16}");
            }
        } else {
            assert_eq!(code, 0, "{name}\n{out}\n{err}");
        }
        let model = pb::ModelProto::decode(std::fs::read(&saved).unwrap().as_slice()).unwrap();
        let g = model.graph.unwrap();
        // Top-level initializers become fp16; those a Loop body reads from the outer scope stay float32 and the
        // body casts them (checked below).
        let want = if name == "loop_body" { 1 } else { 10 };
        for init in g
            .initializer
            .iter()
            .filter(|t| t.name == "w" || t.name == "b")
        {
            assert_eq!(init.data_type, want, "{name}: initializer {}", init.name);
        }
        for i in g.input.iter().filter(|i| i.name == "w" || i.name == "b") {
            assert_eq!(
                declared(i),
                10,
                "{name}: graph input {} still declared float32",
                i.name
            );
        }
        // Graph inputs and outputs keep their types.
        assert_eq!(declared(g.input.iter().find(|i| i.name == "x").unwrap()), 1);
        assert_eq!(declared(&g.output[0]), 1);
        if name == "loop_body" {
            let lp = g.node.iter().find(|n| n.op_type == "Loop").unwrap();
            let body = lp.attribute.iter().find_map(|a| a.g.as_ref()).unwrap();
            assert_eq!(declared(&body.input[2]), 10, "loop-carried h in fp16");
            assert_eq!(declared(&body.output[1]), 10, "loop-carried h out in fp16");
            let mm = body.node.iter().find(|n| n.op_type == "MatMul").unwrap();
            let cast = body
                .node
                .iter()
                .find(|n| n.output.contains(&mm.input[1]))
                .unwrap();
            assert_eq!(
                (cast.op_type.as_str(), cast.input[0].as_str()),
                ("Cast", "w")
            );
        }
    }
}

/// A model whose fp16 output is destroyed by its precision never exits 0 (`precision_insufficient`, the culprit and
/// the `--keep-fp32` fix in the headline), in every report format; one whose fp16 intermediates fail while its
/// outputs pass stays precision-limited (exit 0, 1 with `--strict`).
#[test]
fn a_destroyed_fp16_output_is_precision_insufficient_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let out = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    let m = case("bn_var_overflow");
    let (code, text, err) = phantom(&[
        "onnx",
        &m,
        "--precision",
        "fp16",
        "--json",
        &out("r.json"),
        "--junit",
        &out("r.xml"),
        "--summary-md",
        &out("r.md"),
        "--html",
        &out("r.html"),
    ]);
    assert_eq!(code, 1, "{text}\n{err}");
    assert!(
        text.contains("✗ PRECISION-INSUFFICIENT") && text.contains("--keep-fp32 bn"),
        "{text}"
    );
    let r = read_json(Path::new(&out("r.json")));
    assert_eq!(r["verdict"]["status"], "precision_insufficient");
    assert_eq!(r["verdict"]["outputs_pass"], false);
    let junit = std::fs::read_to_string(out("r.xml")).unwrap();
    assert!(
        junit.contains("<failure") && junit.contains("failures=\"1\""),
        "{junit}"
    );
    let md = std::fs::read_to_string(out("r.md")).unwrap();
    assert!(md.contains("❌ **precision-insufficient**"), "{md}");
    let html = std::fs::read_to_string(out("r.html")).unwrap();
    assert!(html.contains("class=\"verdict precision_insufficient\""));
    // Intermediates fail, outputs pass: precision-limited, a gate passes unless --strict.
    let m = case("ln_variance_overflow");
    let (code, text, _) = phantom(&["onnx", &m, "--precision", "fp16", "-q"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("precision-limited"), "{text}");
}

/// T5's relative-position buckets in miniature: int64 distances cast to float, divided by a `Constant`
/// (log(max_distance / max_exact) = 2.7725887), then Log, Mul and Cast back to int64 to index a bias table. The
/// converter keeps that integer arithmetic in float32; its Constant must stay float32 too (as initializers read
/// only in float32 do): stored in fp16 and cast back it became 2.773, and fed the reference's inputs the Div was
/// "anomalous" (3.7e4× correct rounding) on a torch T5 encoder.
#[test]
fn constants_read_only_in_float32_stay_float32() {
    use crate::common::{attr_int, f32_tensor, node, value, write_model};
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let cast = |from: &str, to: &str, code: i64| {
        let mut n = node("Cast", &[from], to);
        n.attribute = vec![attr_int("to", code)];
        n
    };
    let mut constant = node("Constant", &[], "c");
    constant.attribute = vec![pb::AttributeProto {
        name: "value".into(),
        r#type: pb::attribute_proto::AttributeType::Tensor as i32,
        t: Some(crate::common::f32_tensor("c", vec![], vec![2.772_588_7])),
        ..Default::default()
    }];
    let mut distance = value("d", &[16]);
    if let Some(pb::type_proto::Value::TensorType(t)) =
        distance.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 7;
    }
    let g = pb::GraphProto {
        name: "buckets".into(),
        node: vec![
            cast("d", "df", 1),
            node("Add", &["df", "one"], "d1"),
            constant,
            node("Log", &["d1"], "l"),
            node("Div", &["l", "c"], "q"),
            node("Mul", &["q", "eight"], "s"),
            cast("s", "bucket", 7),
            node("Gather", &["bias", "bucket"], "y"),
        ],
        initializer: vec![
            f32_tensor("one", vec![], vec![1.0]),
            f32_tensor("eight", vec![], vec![8.0]),
            f32_tensor("bias", vec![32], (0..32).map(|i| i as f32 * 0.5).collect()),
        ],
        input: vec![distance],
        output: vec![value("y", &[16])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("buckets.onnx"), g, 17);
    let (json, saved) = (dir.path().join("r.json"), dir.path().join("fp16.onnx"));
    let m = m.to_str().unwrap();
    let (code, out, err) = phantom(&[
        "onnx",
        m,
        "--precision",
        "fp16",
        "--val-range",
        "0,30",
        "--json",
        json.to_str().unwrap(),
        "--save-target-model",
        saved.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(read_json(&json)["verdict"]["status"], "clean", "{out}");
    let p = pb::ModelProto::decode(std::fs::read(&saved).unwrap().as_slice()).unwrap();
    let c = (p.graph.unwrap().node.into_iter())
        .find(|n| n.op_type == "Constant")
        .and_then(|n| n.attribute[0].t.clone())
        .unwrap();
    assert_eq!(c.data_type, 1, "the Constant became {:?}", c);
}

/// A model that keeps its weights in external data is converted to one that does too (protobuf caps an inline
/// model at 2 GiB, so a converted decoder of a billion parameters cannot be inline), computing the same numbers
/// as the inline model's conversion; `--save-target-model` writes the data beside the saved model, and the
/// temporary directory holding it during the run is gone afterwards.
#[test]
fn conversion_of_an_external_data_model_keeps_its_weights_outside() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let src = model("convnet.onnx");
    let mut proto = pb::ModelProto::decode(std::fs::read(&src).unwrap().as_slice()).unwrap();
    let ext = dir.path().join("convnet.onnx");
    phantom::model::external::externalize(&mut proto, src.parent(), &ext).unwrap();
    std::fs::write(&ext, proto.encode_to_vec()).unwrap();
    let run = |m: &Path, tag: &str| {
        let json = dir.path().join(format!("{tag}.json"));
        let saved = dir.path().join(format!("{tag}.fp16.onnx"));
        let args = [
            "onnx",
            m.to_str().unwrap(),
            "--precision",
            "fp16",
            "--save-target-model",
            saved.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ];
        let (code, out, err) =
            crate::common::phantom_env(&args, &[("PHANTOM_SPILL_DIR", spill.to_str().unwrap())]);
        assert_eq!(code, 0, "{out}{err}");
        (read_json(&json), saved)
    };
    let (inline, inline_saved) = run(&src, "inline");
    let (external, saved) = run(&ext, "external");
    let worst = |r: &serde_json::Value| -> Vec<f64> {
        r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["values"][0]["metrics"]["max_abs"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(worst(&inline), worst(&external), "same numbers either way");
    assert!(!phantom::model::external::data_path(&inline_saved).exists());
    let data = phantom::model::external::data_path(&saved);
    let m = pb::ModelProto::decode(std::fs::read(&saved).unwrap().as_slice()).unwrap();
    let big: Vec<_> = m
        .graph
        .unwrap()
        .initializer
        .into_iter()
        .filter(|t| t.dims.iter().product::<i64>() >= 512)
        .collect();
    assert!(!big.is_empty());
    for t in &big {
        assert_eq!(t.data_type, 10, "{} in fp16", t.name);
        let loc = t
            .external_data
            .iter()
            .find(|e| e.key == "location")
            .unwrap();
        assert_eq!(loc.value, "external.fp16.onnx.data", "{}", t.name);
    }
    assert!(std::fs::metadata(&data).unwrap().len() >= 1024 * big.len() as u64);
    assert_eq!(
        std::fs::read_dir(&spill).unwrap().count(),
        0,
        "temporary data removed"
    );
}
