//! `--precision fp16|bf16`: phantom's conversion, introduced error, expected noise, culprits and causes, on
//! models built to fail in float16 in known ways (tests/data/fp16/make_cases.py) and on the demo models.

use prost::Message;
use tract_onnx::pb;

use crate::common::{ensure_runtime, model, phantom, read_json, root};

pub(crate) fn case(name: &str) -> String {
    root()
        .join("tests/data/fp16")
        .join(format!("{name}.onnx"))
        .display()
        .to_string()
}

/// Runs `phantom onnx CASE --precision fp16` and returns the JSON report.
fn fp16_report(name: &str, extra: &[&str]) -> serde_json::Value {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let m = case(name);
    let mut args = vec![
        "onnx",
        m.as_str(),
        "--precision",
        "fp16",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = phantom(&args);
    assert!(code == 0 || code == 1, "{name}: {out}\n{err}");
    let r = read_json(&json);
    // fp16 failing where fp16 itself cannot meet the tolerance is precision-limited (exit 0) while the final
    // outputs pass, precision-insufficient (exit 1) when they fail; anything else that fails is drift (exit 1).
    // Either way the culprit is named.
    let status = r["verdict"]["status"].as_str().unwrap().to_string();
    let want = if status == "precision_limited" { 0 } else { 1 };
    assert!(
        ["drift", "precision_limited", "precision_insufficient"].contains(&status.as_str()),
        "{name}: {out}"
    );
    assert_eq!(
        status == "precision_insufficient",
        status != "drift" && r["verdict"]["outputs_pass"] == false,
        "{name}: a precision verdict is insufficient exactly when the final outputs fail\n{out}"
    );
    assert_eq!(code, want, "{name}: {status}\n{out}");
    // Ops that only copy elements cannot round: the blame (and `--keep-fp32`) belongs to their producers.
    for c in r["verdict"]["culprits"].as_array().unwrap() {
        let op = c["op_type"].as_str().unwrap();
        assert!(
            ![
                "Reshape",
                "Transpose",
                "Concat",
                "Slice",
                "Squeeze",
                "Unsqueeze",
                "Flatten"
            ]
            .contains(&op),
            "{name}: a copy is blamed: {c}"
        );
    }
    r
}

fn assert_culprit(name: &str, extra: &[&str], node: &str, kind: &str) -> serde_json::Value {
    let r = fp16_report(name, extra);
    let c = &r["verdict"]["culprits"][0];
    assert_eq!(c["node"], node, "{name}: culprit\n{:#}", r["verdict"]);
    let kinds: Vec<&str> = c["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&kind),
        "{name}: causes {kinds:?} lack {kind}\n{:#}",
        r["verdict"]
    );
    r
}

fn cause<'a>(r: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    r["verdict"]["culprits"][0]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == kind)
        .unwrap()
}

#[test]
fn layernorm_variance_overflow_is_blamed_on_the_square() {
    let r = assert_culprit("ln_variance_overflow", &[], "ln/pow", "overflow");
    assert_eq!(r["verdict"]["status"], "precision_limited");
    // Precision-limited passes a CI gate only without --strict.
    let m = case("ln_variance_overflow");
    let (code, out, _) = phantom(&["onnx", &m, "--precision", "fp16", "--strict", "-q"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("precision-limited: 3 of 9 values"), "{out}");
    let c = cause(&r, "overflow");
    assert!(c["evidence"]["reference_max_abs"].as_f64().unwrap() > 65504.0);
    assert!(c["summary"].as_str().unwrap().contains("variance"), "{c}");
    assert_eq!(c["confidence"], "high");
}

#[test]
fn batchnorm_running_variance_beyond_fp16_is_named() {
    let r = assert_culprit("bn_var_overflow", &[], "bn", "initializer_range");
    let c = cause(&r, "initializer_range");
    assert_eq!(c["evidence"]["extreme"], 1e5);
    let c = &r["verdict"]["culprits"][0];
    assert_eq!(
        c["spoils"],
        serde_json::json!(["y"]),
        "the output it spoils"
    );
    assert_eq!(c["path"], serde_json::json!(["bn"]));
    let issues = &r["conversion"]["range_issues"][0];
    assert_eq!(issues["tensor"], "var");
    assert_eq!(issues["kind"], "overflow");
}

#[test]
fn long_matmul_reduction_overflows() {
    let r = assert_culprit(
        "long_matmul",
        &["--val-range", "1,2"],
        "long_matmul",
        "overflow",
    );
    assert_eq!(
        cause(&r, "overflow")["evidence"]["reduction_length"],
        16384.0
    );
}

#[test]
fn epsilon_too_small_for_fp16_makes_nan() {
    let r = assert_culprit("small_epsilon", &[], "ln/div", "epsilon");
    let c = cause(&r, "epsilon");
    assert_eq!(c["evidence"]["stored"], 0.0, "{c}");
    assert!(c["summary"].as_str().unwrap().contains("ln/add_eps"));
    let kinds: Vec<&str> = r["verdict"]["culprits"][0]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"nan_inf"), "{kinds:?}");
}

#[test]
fn softmax_over_large_logits() {
    let r = assert_culprit("softmax_large_logits", &[], "softmax", "softmax_range");
    let c = &r["verdict"]["culprits"][0];
    assert_eq!(c["basis"], "introduced");
    assert!(c["noise_ratio"].as_f64().unwrap() > 100.0, "{c}");
    assert_eq!(cause(&r, "softmax_range")["evidence"]["spacing"], 16.0);
}

#[test]
fn first_node_making_nan_is_named_with_the_cancellation_behind_it() {
    let r = assert_culprit("nan_division", &["--val-range", "1,2"], "ratio", "nan_inf");
    assert!(cause(&r, "cancellation")["summary"]
        .as_str()
        .unwrap()
        .contains("`diff`"));
}

#[test]
fn keeping_the_culprits_in_fp32_fixes_the_model() {
    ensure_runtime();
    let m = case("small_epsilon");
    let (code, out, err) = phantom(&[
        "onnx",
        &m,
        "--precision",
        "fp16",
        "--keep-fp32",
        "ln/add_eps,ln/sqrt,ln/div",
        "-q",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = phantom(&["onnx", &m, "--precision", "fp16", "--keep-fp32", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("--keep-fp32 nope"), "{err}");
}

#[test]
fn conversion_keeps_io_types_and_reports_introduced_error_per_node() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("convnet.fp16.onnx");
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--precision",
        "fp16",
        "--attribute-all",
        "--save-target-model",
        saved.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let m = pb::ModelProto::decode(std::fs::read(&saved).unwrap().as_slice()).unwrap();
    let g = m.graph.unwrap();
    let elem = |vi: &pb::ValueInfoProto| {
        let pb::type_proto::Value::TensorType(t) =
            vi.r#type.as_ref().unwrap().value.as_ref().unwrap();
        t.elem_type
    };
    assert!(g.input.iter().all(|i| elem(i) == 1), "inputs stay float32");
    assert!(
        g.output.iter().all(|o| elem(o) == 1),
        "outputs stay float32"
    );
    assert!(
        g.initializer.iter().all(|t| t.data_type == 10),
        "weights in fp16"
    );
    assert!(g.node.iter().any(|n| n.op_type == "Cast"));

    let r = read_json(&json);
    assert_eq!(r["conversion"]["precision"], "f16");
    assert!(r["target"]["details"]["model"]
        .as_str()
        .unwrap()
        .ends_with("convnet.fp16.onnx"));
    let mut measured = 0;
    for n in r["nodes"].as_array().unwrap() {
        for v in n["values"].as_array().unwrap() {
            let intro = &v["introduced"];
            let noise = &v["noise"];
            assert!(
                noise["max_abs"].as_f64().is_some(),
                "noise on {}",
                v["name"]
            );
            if intro.is_null() {
                continue;
            }
            measured += 1;
            let own = intro["metrics"]["max_abs"].as_f64().unwrap();
            let expected = intro["expected"].as_f64().unwrap();
            // A node on its own makes an error of the order of fp16 rounding, never more than a few percent.
            assert!(own < 0.05 && expected > 0.0, "{}: {intro}", v["name"]);
            assert!(own >= expected * 0.5, "{}: {intro}", v["name"]);
        }
    }
    assert_eq!(measured, 13, "every node measured alone");
    assert_eq!(r["coverage"]["introduced"]["all"], true);
    assert_eq!(r["coverage"]["introduced"]["measured"], 13);
}

#[test]
fn bf16_keeps_ops_onnx_runtime_cannot_run_in_bf16() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        model("encoder.onnx").to_str().unwrap(),
        "--precision",
        "bf16",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 1, "{out}{err}");
    let r = read_json(&json);
    assert_eq!(r["conversion"]["precision"], "bf16");
    assert!(!r["conversion"]["kept_for_ort"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn precision_advisor_writes_a_mixed_model_that_meets_the_tolerance() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    for name in ["small_epsilon", "ln_variance_overflow"] {
        let out = dir.path().join(format!("{name}.mixed.onnx"));
        let m = case(name);
        let (code, stdout, err) = phantom(&[
            "precision",
            &m,
            "--precision",
            "fp16",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{name}: {stdout}{err}");
        assert!(stdout.contains("meets the tolerance"), "{stdout}");
        let kept = stdout
            .lines()
            .find(|l| l.contains("kept in fp32:") && !l.starts_with("  "))
            .unwrap()
            .to_string();
        // The mixed model loads in ONNX Runtime and, run as the target, meets fp16 tolerances against f64.
        let (code, o, e) = phantom(&[
            "onnx",
            &m,
            "--target-model",
            out.to_str().unwrap(),
            "--atol",
            "0.01",
            "--rtol",
            "0.01",
            "-q",
        ]);
        assert_eq!(code, 0, "{name}: mixed model ({kept}) drifts: {o}{e}");
        let mm = pb::ModelProto::decode(std::fs::read(&out).unwrap().as_slice()).unwrap();
        let g = mm.graph.unwrap();
        assert!(
            g.initializer.iter().any(|t| t.data_type == 10) || name == "small_epsilon",
            "{name}: still has fp16 weights"
        );
    }
    // OUT is never overwritten without --force.
    let out = dir.path().join("small_epsilon.mixed.onnx");
    let (code, _, err) = phantom(&[
        "precision",
        &case("small_epsilon"),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn argmax_between_near_ties_flips() {
    // By default the reference takes fp16's picks between scores within its noise of each other: clean.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let m = case("argmax_tie");
    let args = [
        "onnx",
        &m,
        "--precision",
        "fp16",
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, out, err) = phantom(&args);
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    assert_eq!(r["verdict"]["status"], "clean", "{out}");
    let adopted = |r: &serde_json::Value| {
        (r["nodes"].as_array().unwrap().iter())
            .flat_map(|n| n["values"].as_array().unwrap().iter())
            .filter_map(|v| v["adopted"]["flips"].as_u64())
            .sum::<u64>()
    };
    assert!(adopted(&r) > 0, "{:#}", r["verdict"]);
    // Kept as the reference's own, the flips are drift and explained as index flips.
    let r = assert_culprit("argmax_tie", &["--own-decisions"], "argmax", "index_flip");
    assert_eq!(r["verdict"]["status"], "drift");
    let margin = cause(&r, "index_flip")["evidence"]["margin_in_spacings"]
        .as_f64()
        .unwrap();
    assert!(
        margin < 0.1,
        "1e-4 apart at 10 is 0.0128 fp16 spacings: {margin}"
    );
}

#[test]
fn quantization_saturation_is_counted() {
    // The reference keeps its own decisions here (by default it adopts the flips, below).
    let r = assert_culprit(
        "quant_saturation",
        &["--own-decisions"],
        "quantize",
        "quantization_saturation",
    );
    let sat = cause(&r, "quantization_saturation")["evidence"]["saturated"]
        .as_f64()
        .unwrap();
    assert!((20.0..=120.0).contains(&sat), "{sat} of 256 saturate");
    // The in-range values that flip a level: those within the fp16 input's error of a half-quantum boundary. The
    // failing elements are among them.
    let flip = &cause(&r, "quantization_flip")["evidence"];
    let near = flip["near_boundary"].as_f64().unwrap();
    let q = r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "quantize")
        .unwrap();
    let failed = q["values"][0]["metrics"]["failed"].as_f64().unwrap();
    assert!((2.0..=60.0).contains(&near), "{flip}");
    assert!(
        failed >= 1.0 && near >= failed,
        "{near} near a boundary, {failed} failed"
    );
    assert!(
        (flip["quantum"].as_f64().unwrap() - 0.1).abs() < 1e-6,
        "{flip}"
    );
    // By default those flips are adopted: both sides saturate alike, so nothing is left to fail.
    let r = clean_fp16("quant_saturation", &[]);
    assert!(
        adopted_flips(&r, "q") >= failed as u64,
        "{:#}",
        r["verdict"]
    );
}

/// An fp16 run phantom finds clean (exit 0).
fn clean_fp16(name: &str, extra: &[&str]) -> serde_json::Value {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let m = case(name);
    let mut args = vec!["onnx", m.as_str(), "--precision", "fp16", "--json"];
    args.push(json.to_str().unwrap());
    args.extend_from_slice(extra);
    let (code, out, err) = phantom(&args);
    assert_eq!(code, 0, "{name}: {out}{err}");
    read_json(&json)
}

/// The flips the reference adopted on value `name`.
fn adopted_flips(r: &serde_json::Value, name: &str) -> u64 {
    let v = (r["nodes"].as_array().unwrap().iter())
        .flat_map(|n| n["values"].as_array().unwrap())
        .find(|v| v["name"] == name)
        .unwrap();
    v["adopted"]["flips"].as_u64().unwrap_or(0)
}

#[test]
fn a_model_already_in_fp16_converts_consistently() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let fp16 = dir.path().join("convnet.fp16.onnx");
    let (code, out, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--precision",
        "fp16",
        "--save-target-model",
        fp16.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    // The saved model holds fp16 weights and Casts; converting it again must load and stay clean.
    let (code, out, err) = phantom(&["onnx", fp16.to_str().unwrap(), "--precision", "fp16", "-q"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn float_index_arithmetic_flips_gather_rows() {
    // The reference keeps its own decisions here; by default it adopts the flip (its input within a few fp16 units
    // in the last place of the boundary), and the gathered rows are compared like for like.
    let r = clean_fp16("index_floor_gather", &["--val-range", "1000,2000"]);
    assert!(adopted_flips(&r, "fl") >= 1, "{:#}", r["verdict"]);
    let r = assert_culprit(
        "index_floor_gather",
        &["--val-range", "1000,2000", "--own-decisions"],
        "to_index",
        "index_flip",
    );
    let c = cause(&r, "index_flip");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("`floor` rounds `scaled`"),
        "{c}"
    );
    assert!(
        c["evidence"]["near_boundary"].as_f64().unwrap() >= 1.0,
        "{c}"
    );
    let nodes: Vec<&str> = c["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["floor", "lookup"]);
}
