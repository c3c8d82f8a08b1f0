//! ONNX Runtime's NHWC quantized ops: what its `NhwcTransformer` writes at `ORT_ENABLE_ALL` for a statically
//! quantized model (`QLinearConv` and `QLinearGlobalAveragePool` in `com.microsoft` with `channels_last`, between
//! `Transpose`s; a per-tensor `DequantizeLinear` keeping `axis` 1 on a 1-D input), made here by ONNX Runtime itself
//! from the QDQ convnet of `tests/data/qdq/`. The model is valid and the reference runs it: it computes the function
//! of the model it came from (`equiv` pairs every value, the channels-last ones read channels-first), and every
//! value is compared with ONNX Runtime's. Before, the model was refused as invalid (exit 2), the reference read the
//! NHWC input as NCHW, and channels-last values paired with nothing.

use crate::common::{phantom, read_json, root};
use crate::contrib::onnx_report;
use crate::nchwc::optimized_all_of;

/// The nodes of `model` as (domain, op, channels_last).
fn nodes(model: &std::path::Path) -> Vec<(String, String, i64)> {
    use prost::Message;
    let m = tract_onnx::pb::ModelProto::decode(std::fs::read(model).unwrap().as_slice()).unwrap();
    (m.graph.unwrap().node.into_iter())
        .map(|n| {
            let last = n.attribute.iter().find(|a| a.name == "channels_last");
            (n.domain, n.op_type, last.map_or(0, |a| a.i))
        })
        .collect()
}

fn cpu_has_vnni() -> bool {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    (info.split_whitespace()).any(|f| f == "avx512_vnni" || f == "avx_vnni")
}

#[test]
fn onnx_runtime_s_nhwc_quantized_model_runs_in_the_reference_and_computes_the_model_s_function() {
    let dir = tempfile::tempdir().unwrap();
    let (src, all) = optimized_all_of(&root().join("tests/data/qdq/convnet_qdq.onnx"), dir.path());
    let ops = nodes(&all);
    for op in ["QLinearConv", "QLinearGlobalAveragePool"] {
        assert!(
            (ops.iter()).any(|(d, o, last)| d == "com.microsoft" && o == op && *last == 1),
            "no channels-last {op}: {ops:?}"
        );
    }
    // The reference computes the NHWC model's function as the model's: equal in f64, value for value at the end.
    let json = dir.path().join("e.json");
    let (code, out, err) = phantom(&[
        "equiv",
        src.to_str().unwrap(),
        all.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let e = read_json(&json);
    assert_eq!(e["same_function"], true, "{e}");
    // Every value of the NHWC model pairs with one of the model's, the channels-last ones read channels-first.
    let c = &e["counts"];
    assert_eq!(c["own"], 0, "{c}");
    let last = e["channels_last"].as_array().unwrap();
    for v in ["conv1", "conv2", "dwconv3"] {
        assert!(
            last.iter().any(|x| x == v),
            "{v} not paired channels-last: {e}"
        );
        assert!(e["paired"][v].is_string(), "{v}: {e}");
    }
    // Every value compared with ONNX Runtime's; where its u8×s8 kernels saturate (no VNNI), the drift is named at
    // the QLinearConv by its int16 pairs.
    let (code, out, r) = onnx_report(&all, &[]);
    assert_ne!(code, 2, "{out}");
    let c = &r["coverage"];
    assert_eq!(c["unchecked"], 0, "{c}");
    assert!(c["compared"].as_u64().unwrap() >= 20, "{c}");
    let conv = (r["nodes"].as_array().unwrap().iter())
        .find(|n| n["op_type"] == "QLinearConv")
        .unwrap();
    assert!(
        conv["reference"]["kind"]
            .as_str()
            .unwrap()
            .starts_with("f64"),
        "{conv}"
    );
    let status = r["verdict"]["status"].as_str().unwrap();
    if status == "clean" {
        return;
    }
    assert!(!cpu_has_vnni(), "drift on a CPU with VNNI: {out}");
    assert_eq!(status, "drift", "{out}");
    let culprit = &r["verdict"]["culprits"][0];
    assert_eq!(culprit["op_type"], "QLinearConv", "{out}");
    let first = &culprit["causes"][0];
    assert_eq!(first["kind"], "quantization_saturation", "{culprit}");
    let summary = first["summary"].as_str().unwrap();
    assert!(
        summary.contains("product pairs sum beyond int16"),
        "{summary}"
    );
}
