//! A few real exports from `scripts/corpus/make.py` (the toolchains themselves at their defaults, small seeded
//! configs), kept in `tests/data/corpus/`: each compares with no flags and reads clean. The whole corpus (45 models,
//! PyTorch needed) is swept by `scripts/corpus/sweep.sh`; its table is in the book.

use crate::common::{ensure_runtime, root};
use crate::contrib::onnx_report;

/// (file, what wrote it)
const MODELS: [(&str, &str); 6] = [
    ("optimum_bert.onnx", "optimum-onnx main_export, feature-extraction"),
    (
        "optimum_t5_decoder_merged.onnx",
        "optimum-onnx main_export, text2text-generation-with-past (decoder_model_merged.onnx)",
    ),
    (
        "optimum_whisper_decoder_merged.onnx",
        "optimum-onnx main_export, automatic-speech-recognition-with-past (decoder_model_merged.onnx)",
    ),
    ("ortopt_bert_fp32.onnx", "onnxruntime.transformers.optimizer on optimum_bert"),
    (
        "ortopt_bert_fp16.onnx",
        "onnxruntime.transformers.optimizer, then convert_float_to_float16(keep_io_types=True)",
    ),
    ("qdyn_bert.onnx", "onnxruntime.quantization.quantize_dynamic on optimum_bert"),
];

/// Whether this CPU has VNNI (`avx512_vnni` or `avx_vnni`): without it, ONNX Runtime's x86 u8×s8 integer kernels
/// (AVX2 `vpmaddubsw`) sum adjacent products in 16 bits and saturate.
pub(crate) fn cpu_has_vnni() -> bool {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    (info.split_whitespace()).any(|f| f == "avx512_vnni" || f == "avx_vnni")
}

/// Where ONNX Runtime's integer kernels saturate (a CPU without VNNI), `quantize_dynamic`'s full-range activations
/// make pair sums beyond int16: phantom reports that drift, and names it, at the integer MatMuls.
fn saturation_named(r: &serde_json::Value) -> bool {
    let culprits = r["verdict"]["culprits"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let integer = |c: &&serde_json::Value| c["op_type"] == "MatMulInteger";
    let saturates = |c: &serde_json::Value| c["causes"][0]["kind"] == "quantization_saturation";
    r["verdict"]["status"] == "drift"
        && culprits.first().is_some_and(saturates)
        && culprits.iter().filter(integer).all(saturates)
}

#[test]
fn real_exports_compare_clean_with_no_flags() {
    ensure_runtime();
    for (file, what) in MODELS {
        let m = root().join("tests/data/corpus").join(file);
        let (code, out, r) = onnx_report(&m, &[]);
        if file == "qdyn_bert.onnx" && !cpu_has_vnni() && code == 1 {
            assert!(saturation_named(&r), "{file} ({what}): {out}");
            continue;
        }
        assert_eq!(code, 0, "{file} ({what}): {out}");
        assert_eq!(r["verdict"]["status"], "clean", "{file} ({what}): {out}");
        let c = &r["coverage"];
        assert_eq!(c["unchecked_hiding"], 0, "{file}: {c}");
        assert!(c["compared"].as_u64().unwrap() >= 19, "{file}: {c}");
    }
}

/// `--steps` drives a merged decoder as generation does: the first step on the branch with no past (which computes
/// the cross-attention cache), the later ones on the with-past branch, fed the self-attention cache of the step
/// before and the cross-attention cache of the first (the with-past branch passes it on empty). The prompt leaves
/// room in the 64-row position table for the steps.
#[test]
fn real_merged_decoders_decode_steps_on_both_branches() {
    ensure_runtime();
    for file in [
        "optimum_t5_decoder_merged.onnx",
        "optimum_whisper_decoder_merged.onnx",
    ] {
        let m = root().join("tests/data/corpus").join(file);
        let (code, out, r) = onnx_report(&m, &["--steps", "3"]);
        assert_eq!(code, 0, "{file}: {out}");
        assert_eq!(r["verdict"]["status"], "clean", "{file}: {out}");
        let notes = r["notes"].to_string();
        for step in 0..3 {
            assert!(
                notes.contains(&format!("step {step}: clean")),
                "{file}: {notes}"
            );
        }
        let input = |name: &str| {
            (r["inputs"].as_array().unwrap().iter())
                .find(|i| i["name"] == name)
                .unwrap_or_else(|| panic!("{file}: no input {name}"))
                .clone()
        };
        let branch = input("use_cache_branch");
        assert!(
            branch["origin"].as_str().unwrap().starts_with("true"),
            "{branch}"
        );
        // Step 2 reads the prompt and the token of step 1 from the self-attention cache.
        let past = input("past_key_values.0.decoder.key");
        assert!(past["shape"][2].as_u64().unwrap() >= 2, "{file}: {past}");
        let cross = input("past_key_values.0.encoder.key");
        assert!(cross["shape"][2].as_u64().unwrap() > 0, "{file}: {cross}");
    }
}

/// onnxruntime-genai's model builder (`-p fp32 -e cpu`, GroupQueryAttention): the cache's head size comes from the
/// `genai_config.json` beside the model (the builder names that dim `kv_cache_dim`, which phantom guessed as an image
/// side, 320, and ONNX Runtime refused), and the decoder compares with no flags and decodes steps.
#[test]
fn an_onnxruntime_genai_decoder_compares_with_no_flags() {
    ensure_runtime();
    let m = root().join("tests/data/corpus/genai_llama_fp32/model.onnx");
    for steps in ["1", "3"] {
        let (code, out, r) = onnx_report(&m, &["--steps", steps]);
        assert_eq!(code, 0, "--steps {steps}: {out}");
        assert_eq!(r["verdict"]["status"], "clean", "--steps {steps}: {out}");
        let past = (r["inputs"].as_array().unwrap().iter())
            .find(|i| i["name"] == "past_key_values.0.key")
            .unwrap();
        assert_eq!(past["shape"][3], 16, "{past}");
    }
    let (_, out, _) = onnx_report(&m, &[]);
    assert!(
        out.contains("`kv_cache_dim` = 16: the head size in genai_config.json"),
        "{out}"
    );
}

/// The builder's int4 model for the CPU asks for `accuracy_level = 4`: ONNX Runtime's kernel quantizes the
/// activations to int8, as the model asks. That is its precision, not a fault: the correctly rounded run quantizes
/// them too, so the verdict is precision-insufficient (never drift or anomalous), the culprit's cause is
/// `accuracy_level` with the numbers, and the fix named is the attribute (not `--keep-fp32`, which is for phantom's
/// own conversion).
#[test]
fn an_onnxruntime_genai_int4_decoder_reads_as_its_chosen_precision() {
    ensure_runtime();
    let m = root().join("tests/data/corpus/genai_llama_int4/model.onnx");
    let (code, out, r) = onnx_report(&m, &[]);
    assert_eq!(r["verdict"]["status"], "precision_insufficient", "{out}");
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        r["verdict"]["anomalies"].as_array().unwrap().len(),
        0,
        "{out}"
    );
    let culprit = &r["verdict"]["culprits"][0];
    assert_eq!(culprit["causes"][0]["kind"], "accuracy_level", "{culprit}");
    assert!(
        out.contains("set accuracy_level to 0 or 1") && !out.contains("--keep-fp32"),
        "{out}"
    );
    assert!(out.contains("at accuracy_level 4 are off, alone"), "{out}");
}

/// NNCF's QDQ RepViT-M0.9 (`scripts/zoo/make.py`), cut at its second block's `token_mixer.conv1` QDQ pair with
/// `onnx.utils.extract_model`.
/// At ONNX Runtime's default optimization level its NCHWc kernels compute the 1×1 depthwise `conv1` about 2e-5 away
/// from the unfused run (within float32's tolerance), and the `QuantizeLinear` after it lands on the other neighbour
/// of the exact level at a few hundred elements. A QDQ pair's level is judged in quanta on both of the pair's values
/// (before, the `QuantizeLinear`'s own output read as drift while its `DequantizeLinear` took the same levels). A 2%
/// fault in that convolution's weight scale is still named at its node.
#[test]
fn an_nncf_qdq_pairs_level_is_judged_in_quanta_on_both_of_its_values() {
    ensure_runtime();
    let m = root().join("tests/data/corpus/nncf_repvit_stem.onnx");
    let (code, out, r) = onnx_report(&m, &[]);
    assert_eq!(
        (code, &r["verdict"]["status"]),
        (0, &serde_json::json!("clean")),
        "{out}"
    );
    let q = (r["nodes"].as_array().unwrap().iter())
        .flat_map(|n| n["values"].as_array().unwrap())
        .find(|v| {
            v["name"]
                == "q_output_/stages/stages.0/blocks/blocks.1/token_mixer/conv1/Conv_output_0_1"
        })
        .unwrap();
    assert!(q["adopted"]["faithful"].as_u64().unwrap() > 0, "{q}");
    let dir = tempfile::tempdir().unwrap();
    let faulty = dir.path().join("faulty.onnx");
    let scale = "scale_stages.0.blocks.1.token_mixer.conv1.weight_1";
    crate::common::scaled_weights_copy(&m, scale, 1.02, &faulty);
    let (code, out, r) = onnx_report(&m, &["--target-model", faulty.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        r["verdict"]["first_divergence"]["node"],
        "DequantizeLinear_stages.0.blocks.1.token_mixer.conv1.weight_1",
        "{out}"
    );
}

/// The same cut with one activation's `DequantizeLinear` reading a zero point one level off (the zoo's fault): every
/// level moves by one quantum, and about half of them land on the other neighbour of the exact level, as a faithful
/// rounding may. The largest error equals the one-quantum flips of the correctly rounded run; its RMS does not.
#[test]
fn a_zero_point_off_by_one_is_drift_at_its_node_not_precision() {
    ensure_runtime();
    let m = root().join("tests/data/corpus/nncf_repvit_stem.onnx");
    let dir = tempfile::tempdir().unwrap();
    let faulty = dir.path().join("faulty.onnx");
    let dq = "DequantizeLinear_/stages/stages.0/blocks/blocks.0/channel_mixer/act/Gelu_output_0_1";
    crate::common::shifted_zero_point_copy(&m, dq, &faulty);
    let (code, out, r) = onnx_report(&m, &["--target-model", faulty.to_str().unwrap()]);
    assert_eq!(
        (code, &r["verdict"]["status"]),
        (1, &serde_json::json!("drift")),
        "{out}"
    );
    let culprit = &r["verdict"]["culprits"][0];
    assert_eq!(culprit["node"], dq, "{out}");
    assert_eq!(culprit["causes"][0]["kind"], "weights_differ", "{culprit}");
}

/// onnxconverter-common's fp16 RepViT-M0.9 (`scripts/zoo/make.py`, `keep_io_types`), cut after its first stage with
/// `onnx.utils.extract_model`. A bias shifted by 1% of its Conv's output RMS (0.002 on an RMS of 0.21) stays within
/// fp16's tolerance everywhere, and fp16's epsilon is too coarse for the rounding test; alone and in the graph the
/// Conv's RMS error is many times the correctly rounded run's (about 27×; below 1.5 on every pristine fp16 value of
/// the zoo). The pristine cut reads clean.
#[test]
fn a_bias_shift_within_fp16_tolerance_is_anomalous_at_its_node() {
    ensure_runtime();
    let m = root().join("tests/data/corpus/occ_fp16_repvit_stage0.onnx");
    let (code, out, r) = onnx_report(&m, &[]);
    assert_eq!(
        (code, &r["verdict"]["status"]),
        (0, &serde_json::json!("clean")),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let faulty = dir.path().join("faulty.onnx");
    crate::common::shifted_f16_copy(&m, "onnx::Conv_1118", 0.002, &faulty);
    let (code, out, r) = onnx_report(&m, &["--target-model", faulty.to_str().unwrap()]);
    assert_eq!(
        (code, &r["verdict"]["status"]),
        (1, &serde_json::json!("anomalous")),
        "{out}"
    );
    let a = &r["verdict"]["anomalies"][0];
    assert_eq!(
        a["node"], "/stages/stages.0/blocks/blocks.0/channel_mixer/conv2/c/Conv",
        "{out}"
    );
    assert!(a["noise_ratio"].as_f64().unwrap() > 16.0, "{a}");
    assert_eq!(a["causes"][0]["kind"], "weights_differ", "{a}");
}

/// ultralytics' YOLO11 exported with `nms=True` at its defaults (a tiny width, made by `scripts/corpus/make.py`, whose
/// head keeps boxes): the detections it returns are compared. Its `NonMaxSuppression` reads the boxes a `NonZero`
/// filtered, whose count only the run decides, so tract cannot type it; it stands in with the target's shapes and
/// is computed in f64 on the run's inputs. Many anchors score alike in float32, and in f64 the ties fall otherwise
/// (the reference alone keeps 14 boxes, ONNX Runtime 17): the target's selection is taken, every choice of it within
/// the inputs' noise, and counted. Everything after it, the boxes kept, is computed in f64 and compared; so too in
/// bounded memory, where the target's values of such a node are exposed before the reference types the model
/// (before, that run stopped with exit 2).
#[test]
fn a_yolo_exported_with_nms_compares_the_boxes_it_keeps() {
    ensure_runtime();
    let m = root().join("tests/data/corpus/ultralytics_yolo11t_nms_boxes.onnx");
    for flags in [&[][..], &["--max-memory", "64MiB"]] {
        let (code, out, r) = onnx_report(&m, flags);
        assert_eq!(code, 0, "{flags:?}: {out}");
        assert_eq!(r["verdict"]["status"], "clean", "{flags:?}: {out}");
        boxes_compared(&r, &out);
    }
}

/// The report's `NonMaxSuppression` is computed in f64 with the target's tied choices, and the boxes it keeps are
/// compared.
fn boxes_compared(r: &serde_json::Value, out: &str) {
    let nodes = r["nodes"].as_array().unwrap();
    let nms = (nodes.iter())
        .find(|n| n["op_type"] == "NonMaxSuppression")
        .unwrap();
    assert_eq!(nms["reference"]["kind"], "f64_phantom", "{nms}");
    let selection = &nms["values"][0];
    assert_eq!(selection["status"], "pass", "{nms}");
    let adopted = &selection["adopted"];
    assert!(adopted["flips"].as_u64().unwrap() > 0, "{nms}");
    assert_eq!(adopted["beyond"], 0, "{nms}");
    let readers: Vec<&serde_json::Value> = (nodes.iter())
        .filter(|n| n["inputs"].as_array().unwrap().contains(&selection["name"]))
        .collect();
    assert!(!readers.is_empty(), "{out}");
    for n in readers {
        let v = &n["values"][0];
        assert_eq!(v["status"], "pass", "{v}");
        assert!(v["shape"][0].as_u64().unwrap() >= 1, "no box kept: {v}");
    }
    let output = (nodes.iter())
        .flat_map(|n| n["values"].as_array().unwrap())
        .find(|v| v["name"] == "output0")
        .unwrap();
    assert_eq!(output["status"], "pass", "{output}");
    assert_eq!(output["shape"], serde_json::json!([1, 300, 6]), "{output}");
}

/// The same YOLO against a copy whose NMS reads an IoU threshold of 0.3 for 0.7: the target's selection is no tie
/// the f64 inputs allow, so it is not taken. The node is compared as the reference selects, and the drift starts
/// there, its cause the changed threshold.
#[test]
fn a_yolo_whose_nms_threshold_changed_drifts_at_its_nms() {
    ensure_runtime();
    let m = root().join("tests/data/corpus/ultralytics_yolo11t_nms_boxes.onnx");
    let dir = tempfile::tempdir().unwrap();
    let faulty = dir.path().join("faulty.onnx");
    crate::common::scaled_weights_copy(&m, "/Constant_29_output_0", 0.3 / 0.7, &faulty);
    let (code, out, r) = onnx_report(&m, &["--target-model", faulty.to_str().unwrap()]);
    assert_eq!(
        (code, &r["verdict"]["status"]),
        (1, &serde_json::json!("drift")),
        "{out}"
    );
    let first = &r["verdict"]["first_divergence"];
    assert_eq!(first["op_type"], "NonMaxSuppression", "{out}");
    let nms = (r["nodes"].as_array().unwrap().iter())
        .find(|n| n["op_type"] == "NonMaxSuppression")
        .unwrap();
    assert_eq!(nms["reference"]["kind"], "f64_phantom", "{nms}");
    assert!(
        nms["values"][0]["adopted"]["beyond"].as_u64().unwrap() > 0,
        "{nms}"
    );
    assert!(
        out.contains("weights_differ") && out.contains("/Constant_29_output_0"),
        "{out}"
    );
}
