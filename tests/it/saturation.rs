//! A QDQ convolution ONNX Runtime fuses into `QLinearConv`: on an x86 CPU without VNNI its kernel adds int8
//! activations (shifted to uint8) times int8 weights in pairs in saturating int16 arithmetic, so the fused run's
//! output moves far beyond the variation of faithful integer kernels. The fused output's note counts the pairs beyond
//! int16 on the reference's levels and names the convolution; on a CPU with VNNI nothing saturates and the model is
//! clean.

use crate::common::{ensure_runtime, f32_tensor, node, value, write_model};
use crate::contrib::onnx_report;
use tract_onnx::pb;

/// An int8 scalar or tensor initializer.
fn int8(name: &str, dims: Vec<i64>, v: Vec<i32>) -> pb::TensorProto {
    pb::TensorProto {
        name: name.into(),
        data_type: 3,
        dims,
        int32_data: v,
        ..Default::default()
    }
}

/// `x` [1, 4, 2, 2] quantized (scale 1), a 1×1 convolution by four int8 weights of 127, quantized (scale 1000).
fn qdq_conv(dir: &std::path::Path) -> std::path::PathBuf {
    let graph = pb::GraphProto {
        name: "g".into(),
        node: vec![
            node("QuantizeLinear", &["x", "one", "zero"], "xq"),
            node("DequantizeLinear", &["xq", "one", "zero"], "xd"),
            node("DequantizeLinear", &["wq", "one", "zero"], "wd"),
            node("Conv", &["xd", "wd"], "conv"),
            node("QuantizeLinear", &["conv", "out_scale", "zero"], "yq"),
            node("DequantizeLinear", &["yq", "out_scale", "zero"], "y"),
        ],
        initializer: vec![
            f32_tensor("one", vec![], vec![1.0]),
            f32_tensor("out_scale", vec![], vec![1000.0]),
            int8("zero", vec![], vec![0]),
            int8("wq", vec![1, 4, 1, 1], vec![127; 4]),
        ],
        input: vec![value("x", &[1, 4, 2, 2])],
        output: vec![value("y", &[1, 1, 2, 2])],
        ..Default::default()
    };
    write_model(&dir.join("qdq_conv.onnx"), graph, 17)
}

#[test]
fn a_fused_convolution_that_saturates_is_counted_at_its_pairs() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = qdq_conv(dir.path());
    let npy = dir.path().join("x.npy");
    crate::samples::write_npy_f32(&npy, &[1, 4, 2, 2], &[127.0; 16]);
    let input = format!("x={}", npy.display());
    let (code, out, r) = onnx_report(&m, &["--input", &input]);
    if crate::corpus::cpu_has_vnni() {
        assert_eq!(
            (code, &r["verdict"]["status"]),
            (0, &serde_json::json!("clean")),
            "{out}"
        );
        return;
    }
    // Exactly 4 · 127 · 127 / 1000 = 64.5 levels; the shifted pairs saturate at 2 · 32767 − 128 · 508: about 1.
    assert_eq!(
        (code, &r["verdict"]["status"]),
        (1, &serde_json::json!("drift")),
        "{out}"
    );
    assert!(
        out.contains("pairs beyond int16 in 1 of the 1 convolutions and matrix products it fuses (8 of 8 pairs checked")
            && out.contains("most in `conv`"),
        "{out}"
    );
    let causes = r["verdict"]["culprits"][0]["causes"].as_array().unwrap();
    let cause = (causes.iter())
        .find(|c| c["kind"] == "quantization_saturation")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(cause["evidence"]["pairs_over"], 8.0, "{cause}");
    // Unfused, ONNX Runtime computes the spec's product: clean.
    let (code, out, _) = onnx_report(&m, &["--input", &input, "--ort-opt-level", "disable"]);
    assert_eq!(code, 0, "{out}");
}
