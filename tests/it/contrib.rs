//! ONNX Runtime's contrib ops in the reference: on one-node models of each op (tests/data/contrib/make_cases.py),
//! phantom's f64 kernel matches an independent float64 numpy implementation at rtol 1e-9 and is marked as
//! phantom's own f64; ORT's fp32 CPU kernel matches the same expected values at the fp32 tolerance (which checks
//! that phantom read the op as ORT does).

use std::path::Path;

use phantom::model::inputs::Inputs;
use phantom::report::model::RefPrecision;
use phantom::runner::{ort::OrtRunner, reference::ReferenceRunner};
use phantom::tensor::Tensor;

use crate::common::ensure_runtime;
use crate::oracle::files;

/// Ops ORT has no CPU kernel for (CUDA/ROCm only): compared with the numpy definition alone.
const NO_CPU_KERNEL: &[&str] = &["BiasAdd", "BiasSplitGelu"];

/// Ops ONNX Runtime computes with its u8×s8 integer GEMM. On x86-64 without VNNI (AVX2, AVX-512 without VNNI) that
/// kernel sums pairs of products in int16 with saturation (`vpmaddubsw`), a documented ORT limitation (its
/// quantization guide's `reduce_range`): there ORT itself leaves the definition by up to 0.8 of the output's scale
/// (measured on an AMD EPYC with AVX2 only), so the ORT half of the check runs only where the kernel is exact.
const U8S8_GEMM: &[&str] = &[
    "DynamicQuantizeMatMul",
    "MatMulIntegerToFloat",
    "DynamicQuantizeLSTM",
];

/// Whether ORT's u8×s8 GEMM is exact here: not x86-64, or a CPU with VNNI.
fn exact_u8s8() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return true;
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    flags
        .split_whitespace()
        .any(|f| f == "avx512_vnni" || f == "avx_vnni")
}

fn load(
    dir: &Path,
) -> (
    phantom::model::Graph,
    Inputs,
    Vec<(String, ndarray::ArrayD<f64>)>,
) {
    let graph = phantom::model::load(&dir.join("model.onnx")).unwrap();
    let mut inputs = Inputs::default();
    for ((_, path), info) in files(dir, "input_").into_iter().zip(&graph.inputs) {
        inputs.tensors.push((
            info.name.clone(),
            phantom::model::npy::read_npy(&path).unwrap(),
        ));
    }
    let expected = files(dir, "expected_")
        .into_iter()
        .map(|(name, path)| {
            let t: Tensor = phantom::model::npy::read_npy(&path).unwrap();
            (name, t.to_f64_array())
        })
        .collect();
    (graph, inputs, expected)
}

/// The largest |got − want| relative to the largest |want|.
pub(crate) fn rel_err(got: &Tensor, want: &ndarray::ArrayD<f64>, what: &str) -> f64 {
    let got = got.to_f64_array();
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    got.iter()
        .zip(want.iter())
        .map(|(g, w)| (g - w).abs() / scale)
        .fold(0.0, f64::max)
}

#[test]
fn contrib_kernels_match_float64_definitions_and_ort() {
    ensure_runtime();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/contrib/cases");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("contrib cases: run python3 tests/data/contrib/make_cases.py")
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 37,
        "contrib cases missing: run python3 tests/data/contrib/make_cases.py"
    );
    let lib = phantom::runner::ort_lib::locate(None, false).unwrap();
    let mut failures = vec![];
    for dir in &dirs {
        let case = dir.file_name().unwrap().to_string_lossy().to_string();
        let (graph, inputs, expected) = load(dir);
        let op = graph.nodes[0].op_type.clone();
        let out = ReferenceRunner::default()
            .run(&graph, &inputs)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let node = &graph.nodes[0].name;
        assert_eq!(
            out.precision.get(node),
            Some(&RefPrecision::F64Phantom),
            "{case}: {op} must run on phantom's own f64 kernel"
        );
        for (name, want) in &expected {
            let got = out
                .values
                .get(name)
                .unwrap_or_else(|| panic!("{case}: no reference value {name}"));
            let e = rel_err(got, want, &case);
            if e > 1e-9 {
                failures.push(format!("{case} {name}: reference off by {e:.2e} of scale"));
            }
        }
        if NO_CPU_KERNEL.contains(&op.as_str())
            || (U8S8_GEMM.contains(&op.as_str()) && !exact_u8s8())
        {
            continue;
        }
        let ort = OrtRunner::cpu(&lib)
            .unwrap()
            .run(&graph, &inputs)
            .unwrap_or_else(|e| panic!("{case}: ORT: {e}"));
        for (name, want) in &expected {
            let e = rel_err(&ort.values[name], want, &case);
            if e > 2e-6 {
                failures.push(format!("{case} {name}: ORT fp32 off by {e:.2e} of scale"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

pub(crate) fn contrib_model(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/contrib")
        .join(name)
}

/// Runs `phantom onnx` with `extra` arguments; returns (exit code, terminal output, JSON report).
pub(crate) fn onnx_report(model: &Path, extra: &[&str]) -> (i32, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut args = vec![
        "onnx",
        model.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = crate::common::phantom(&args);
    assert!(json.exists(), "no report\n{out}\n{err}");
    (
        code,
        format!("{out}\n{err}"),
        crate::common::read_json(&json),
    )
}

/// Every contrib node of the report ran on phantom's own f64 kernel; every value was compared.
fn assert_contrib_nodes_are_f64(r: &serde_json::Value, want_ops: &[&str]) {
    let mut seen = std::collections::BTreeSet::new();
    for n in r["nodes"].as_array().unwrap() {
        let op = n["op_type"].as_str().unwrap();
        if n["domain"] == "com.microsoft" || op.starts_with("Simplified") {
            assert_eq!(
                n["reference"]["kind"], "f64_phantom",
                "{op} `{}`: {}",
                n["name"], n["reference"]
            );
            seen.insert(op.to_string());
        }
    }
    for op in want_ops {
        assert!(seen.contains(*op), "no {op} node in the report: {seen:?}");
    }
    let cov = &r["coverage"];
    assert_eq!(
        cov["compared"], cov["values"],
        "every value compared: {cov}"
    );
}

#[test]
fn ort_optimized_bert_compares_clean_on_phantom_kernels() {
    ensure_runtime();
    let (code, out, r) = onnx_report(
        &contrib_model("bert_opt.onnx"),
        &["--dim", "sequence_length=16"],
    );
    assert_eq!(code, 0, "{out}");
    assert_contrib_nodes_are_f64(
        &r,
        &[
            "EmbedLayerNormalization",
            "Attention",
            "SkipLayerNormalization",
            "BiasGelu",
        ],
    );
}

#[test]
fn genai_style_decoder_is_clean_with_an_empty_and_a_filled_cache() {
    ensure_runtime();
    for past in ["0", "5"] {
        let (code, out, r) = onnx_report(
            &contrib_model("decoder_int4.onnx"),
            &["--past", past, "--dim", "sequence_length=12"],
        );
        assert_eq!(code, 0, "--past {past}\n{out}");
        assert!(
            out.contains(&format!(
                "`total_sequence_length` = {}",
                12 + past.parse::<usize>().unwrap()
            )),
            "{out}"
        );
        assert_contrib_nodes_are_f64(
            &r,
            &[
                "MatMulNBits",
                "GroupQueryAttention",
                "SkipSimplifiedLayerNormalization",
                "SimplifiedLayerNormalization",
            ],
        );
    }
}

#[test]
fn drift_inside_a_decoder_is_found_at_its_attention_node() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("perturbed.onnx");
    crate::common::perturbed_copy(
        &contrib_model("decoder_int4.onnx"),
        "layers.1.attn.gqa_node",
        1.01,
        &target,
    );
    let (code, out, r) = onnx_report(
        &contrib_model("decoder_int4.onnx"),
        &[
            "--target-model",
            target.to_str().unwrap(),
            "--past",
            "3",
            "--dim",
            "sequence_length=8",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        r["verdict"]["first_divergence"]["node"], "layers.1.attn.gqa_node",
        "{out}"
    );
    assert_eq!(
        r["verdict"]["first_divergence"]["value"], "layers.1.attn.gqa",
        "{out}"
    );
}

#[test]
fn fp16_decoder_runs_and_scan_names_the_rms_norm_statistics_overflow() {
    ensure_runtime();
    // The fp16 conversion keeps the KV cache's I/O in fp32 behind casts; ORT must accept it (its planner needs
    // the casts' shapes to keep GroupQueryAttention's present from reusing the past's buffer).
    let (code, out, _) = onnx_report(
        &contrib_model("decoder_int4.onnx"),
        &[
            "--precision",
            "fp16",
            "--past",
            "5",
            "--dim",
            "sequence_length=8",
        ],
    );
    assert_eq!(code, 0, "{out}");
    // A large activation into the residual stream: rows whose mean of squares exceeds 65504 (elements do not).
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.onnx");
    crate::common::scaled_weights_copy(
        &contrib_model("decoder_int4.onnx"),
        "layers.0.attn.o_proj.scales",
        400.0,
        &big,
    );
    let json = dir.path().join("scan.json");
    let (code, out, err) = crate::common::phantom(&[
        "scan",
        big.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let s = crate::common::read_json(&json);
    let risk = s["risks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["node"] == "layers.0.post_attention_layernorm_node")
        .unwrap_or_else(|| {
            panic!(
                "the SkipSimplifiedLayerNormalization is not at risk: {:#}",
                s["risks"]
            )
        });
    let cause = &risk["causes"][0];
    assert_eq!(cause["kind"], "overflow_inside", "{cause:#}");
    let ms = cause["evidence"]["row_mean_square"].as_f64().unwrap();
    assert!(ms > 65504.0, "{cause:#}");
    assert!(
        cause["summary"].as_str().unwrap().contains("input + skip"),
        "{cause:#}"
    );
}

#[test]
fn decoder_steps_feed_each_side_its_own_cache() {
    ensure_runtime();
    let m = contrib_model("decoder_int4.onnx");
    let (code, out, r) = onnx_report(&m, &["--steps", "4", "--dim", "sequence_length=6"]);
    assert_eq!(code, 0, "{out}");
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for k in 0..4 {
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with(&format!("step {k}: clean"))),
            "step {k}: {notes:#?}"
        );
    }
    // The report shown is the last step's: one new token on a cache of 6 + 2 tokens.
    let inputs = r["inputs"].as_array().unwrap();
    let shape = |name: &str| inputs.iter().find(|i| i["name"] == name).unwrap()["shape"].clone();
    assert_eq!(shape("input_ids"), serde_json::json!([1, 1]));
    assert_eq!(shape("attention_mask"), serde_json::json!([1, 9]));
    assert_eq!(
        shape("past_key_values.0.key"),
        serde_json::json!([1, 2, 8, 16])
    );
    // A fault in the attention shows at every step, and the first failing step is the one reported.
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("perturbed.onnx");
    crate::common::perturbed_copy(&m, "layers.0.attn.gqa_node", 1.02, &target);
    let (code, out, r) = onnx_report(
        &m,
        &[
            "--steps",
            "3",
            "--dim",
            "sequence_length=6",
            "--target-model",
            target.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        r["verdict"]["first_divergence"]["node"],
        "layers.0.attn.gqa_node"
    );
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("step 2: drift")),
        "{notes:#?}"
    );
    assert!(notes[0].contains("this report is step 0"), "{notes:#?}");
}

/// A length computed from the data (NonZero's count, as a VITS duration predictor's) reaches Softplus, one of
/// phantom's own kernels, as a symbol while tract types the model: the kernel's shape passes the symbol through,
/// the model runs, and the values are Softplus of the indices in f64.
#[test]
fn own_kernels_take_a_length_computed_from_the_data() {
    use crate::common::{attr_int, node, value, write_model};
    use tract_onnx::pb;
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut cast = node("Cast", &["idx"], "f");
    cast.attribute.push(attr_int("to", 1));
    let g = pb::GraphProto {
        name: "data_length".into(),
        node: vec![
            node("NonZero", &["x"], "idx"),
            cast,
            node("Softplus", &["f"], "o"),
        ],
        input: vec![value("x", &[6])],
        output: vec![pb::ValueInfoProto {
            name: "o".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let model = write_model(&dir.path().join("m.onnx"), g, 17);
    let graph = phantom::model::load(&model).unwrap();
    let mut inputs = Inputs::default();
    let x = ndarray::arr1(&[0.5, 0.0, -1.0, 2.0, 0.0, 3.0]).into_dyn();
    let x = Tensor::from_f64(phantom::tensor::DType::F32, x).unwrap();
    inputs.tensors.push(("x".into(), x));
    let out = ReferenceRunner::default().run(&graph, &inputs).unwrap();
    let got: Vec<f64> = out.values["o"].to_f64_array().iter().copied().collect();
    let want: Vec<f64> = [0.0f64, 2.0, 3.0, 5.0]
        .iter()
        .map(|&i| i.exp().ln_1p())
        .collect();
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-15 * w, "got {got:?}, want {want:?}");
    }
    let (code, out, r) = onnx_report(&model, &[]);
    assert_eq!(code, 0, "{out}");
    let softplus = (r["nodes"].as_array().unwrap().iter())
        .find(|n| n["op_type"] == "Softplus")
        .unwrap();
    assert_eq!(softplus["reference"]["kind"], "f64_phantom", "{softplus}");
}
