//! ONNX Runtime's contrib ops on the wgpu target, on what the toolchains write: a BERT ONNX Runtime's transformer
//! optimizer fused (`onnxruntime.transformers`) and a Llama from onnxruntime-genai's model builder run their
//! SkipLayerNormalization, BiasGelu, SkipSimplifiedLayerNormalization and SimplifiedLayerNormalization nodes on
//! phantom's shaders, and their values agree with the f64 reference to float32's accuracy; each op's single-node
//! cases (tests/data/contrib/cases, FastGelu's too) match their f64 definition in f32 and f16.

use phantom::runner::wgpu::F16Mode;

use crate::common::{ensure_runtime, root};
use crate::wgpu::{close, have_adapter, load_case, runner};

/// The fused ops with shaders, and the ones that still run on the host (and say so).
const ON_DEVICE: &[&str] = &["SkipLayerNormalization", "BiasGelu"];
const ON_HOST: &[&str] = &["Attention", "EmbedLayerNormalization"];

/// The nodes of `ops` (of any domain) in the report of `model` run on wgpu with every node alone, each checked on
/// the device and within float32's accuracy of the reference; returns the report.
fn on_device(model: &str, ops: &[&str], count: usize) -> serde_json::Value {
    let extra = ["--ep", "wgpu", "--attribute-all"];
    let (code, out, r) = crate::contrib::onnx_report(&root().join(model), &extra);
    assert_eq!(code, 0, "{out}");
    let nodes = r["nodes"].as_array().unwrap();
    let of: Vec<&serde_json::Value> = (nodes.iter())
        .filter(|n| ops.contains(&n["op_type"].as_str().unwrap()))
        .collect();
    assert_eq!(of.len(), count, "{ops:?}");
    for n in &of {
        assert!(
            n.get("target_placement").is_none(),
            "{}: {}",
            n["name"],
            n["target_placement"]
        );
        let v = &n["values"][0];
        assert_eq!(v["status"], "pass", "{}", n["name"]);
        // A float32 computation of the op's definition: a few units in the last place of values of order one.
        let max_abs = v["metrics"]["max_abs"].as_f64().unwrap();
        assert!(max_abs < 5e-6, "{}: max |t − r| {max_abs}", n["name"]);
    }
    r
}

#[test]
fn an_onnxruntime_genai_llama_runs_its_simplified_layer_norms_on_the_device() {
    if !have_adapter() {
        return;
    }
    ensure_runtime();
    let m = "tests/data/corpus/genai_llama_fp32/model.onnx";
    let ops = [
        "SkipSimplifiedLayerNormalization",
        "SimplifiedLayerNormalization",
    ];
    let r = on_device(m, &ops, 5);
    assert_eq!(r["target"]["details"]["nodes_on_device"], 23);
}

/// The contrib ops' single-node cases, each written with its f64 definition's values.
const CASES: &[&str] = &[
    "bias_gelu",
    "fast_gelu",
    "fast_gelu_bias",
    "skip_layer_norm",
    "skip_layer_norm_bcast_nobias",
    "skip_simplified_layer_norm",
    "simplified_layer_norm_axis1",
];

#[test]
fn each_contrib_op_s_case_matches_its_definition_on_the_device_in_f32_and_f16() {
    if !have_adapter() {
        return;
    }
    let mut failures = vec![];
    for (f16, (atol, rtol)) in [(false, (1e-5, 1e-4)), (true, (1e-2, 1e-2))] {
        let mut r = runner(f16, F16Mode::Auto, false);
        for case in CASES {
            let (graph, inputs, expected) =
                load_case(&root().join("tests/data/contrib/cases").join(case));
            let out = r.run(&graph, &inputs).unwrap();
            assert!(
                out.placement.is_empty(),
                "{case} (f16 {f16}): {:?}",
                out.placement
            );
            assert!(!expected.is_empty(), "{case}");
            for (o, want) in &expected {
                let got = out
                    .values
                    .get(o)
                    .unwrap_or_else(|| panic!("{case}: no value {o}"));
                if let Err(e) = close(got, want, atol, rtol) {
                    failures.push(format!("{case} (f16 {f16}) {o}: {e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn an_ort_optimized_bert_runs_its_skip_layer_norms_and_bias_gelus_on_the_device() {
    if !have_adapter() {
        return;
    }
    ensure_runtime();
    let r = on_device("tests/data/contrib/bert_opt.onnx", ON_DEVICE, 6);
    let nodes = r["nodes"].as_array().unwrap();
    let host = (nodes.iter()).filter(|n| ON_HOST.contains(&n["op_type"].as_str().unwrap()));
    for n in host {
        let why = n["target_placement"]["reason"].as_str().unwrap();
        assert!(
            why.starts_with("not checked on GPU"),
            "{}: {why}",
            n["name"]
        );
    }
    assert_eq!(r["target"]["details"]["nodes_on_device"], 13);
}

/// SkipLayerNormalization asked for its mean and inverse standard deviation (which no optimizer asks for) runs on
/// the host, and says why; its output is still computed.
#[test]
fn a_skip_layer_norm_asked_for_its_statistics_runs_on_the_host_and_says_so() {
    use prost::Message;
    if !have_adapter() {
        return;
    }
    let case = root().join("tests/data/contrib/cases/skip_layer_norm");
    let bytes = std::fs::read(case.join("model.onnx")).unwrap();
    let mut m = tract_onnx::pb::ModelProto::decode(bytes.as_slice()).unwrap();
    let node = &mut m.graph.as_mut().unwrap().node[0];
    (node.output[1], node.output[2]) = ("mean".into(), "inv_std".into());
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("model.onnx"), m.encode_to_vec()).unwrap();
    for f in ["input_0_x.npy", "input_1_skip.npy", "expected_0_y.npy"] {
        std::fs::copy(case.join(f), tmp.path().join(f)).unwrap();
    }
    let (graph, inputs, expected) = load_case(tmp.path());
    let out = runner(false, F16Mode::Auto, false)
        .run(&graph, &inputs)
        .unwrap();
    let why = &out.placement["skip_layer_norm"].reason;
    assert!(why.contains("mean or inverse standard deviation"), "{why}");
    let (o, want) = &expected[0];
    close(&out.values[o], want, 1e-5, 1e-4).unwrap();
}
