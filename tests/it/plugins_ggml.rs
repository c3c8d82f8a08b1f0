//! A second real runtime on the CPU: onnxruntime-ggml (PyPI; ggml's CPU kernels behind ONNX Runtime's plugin
//! interface), its library loaded into phantom's ONNX Runtime. Where it runs no node, phantom refuses to name it; where
//! it runs, it is compared beside ONNX Runtime's CPU provider in one run, with f64 as the arbiter.

use std::path::PathBuf;

use crate::common::{ensure_runtime, model, phantom, phantom_env, read_json, root};

/// `target/test-plugins-ggml/onnxruntime_ggml/lib/libonnxruntime_ggml.so`, installed once from its lock.
fn ggml() -> PathBuf {
    let dir = root().join("target/test-plugins-ggml");
    let _lock = crate::common::file_lock(&root().join("target/test-plugins-ggml.lock"));
    crate::locks::target("python3", &dir, "ggml-plugin-nodeps");
    let lib = dir.join("onnxruntime_ggml/lib/libonnxruntime_ggml.so");
    assert!(lib.is_file(), "{} is not in the wheel", lib.display());
    lib
}

/// `phantom onnx MODEL --ep-library ggml=… ARGS`: (exit code, stdout, stderr).
fn onnx_with_ggml(model: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let spec = format!("ggml={}", ggml().display());
    let mut all = vec!["onnx", model.to_str().unwrap(), "--ep-library", &spec];
    all.extend_from_slice(args);
    phantom(&all)
}

/// On the demo convnet ggml claims nothing (it lacks MaxPool and GlobalAveragePool and takes graphs whole by
/// default), and ONNX Runtime would run every node on its CPU provider: `--ep ggml` is refused, naming the provider
/// that ran them and the option that changes it.
#[test]
fn a_plugin_that_runs_no_node_is_refused() {
    ensure_runtime();
    let (code, _, err) = onnx_with_ggml(&model("convnet.onnx"), &["--ep", "ggml"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--ep ggml: the provider ran none of the")
            && err.contains("CPUExecutionProvider ran all")
            && err.contains("partial=1"),
        "{err}"
    );
}

/// On the encoder ggml runs the whole graph (one fused node, as ONNX Runtime's placement says): beside the CPU
/// provider in one comparison, the CPU is clean and ggml drifts from the first MatMul (ggml holds MatMul weights in
/// fp16 by default), and f64 names ggml as the target that goes wrong.
#[test]
fn ggml_and_the_cpu_provider_are_compared_in_one_run() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args = [
        "--ep",
        "cpu",
        "--ep",
        "ggml",
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, out, err) = onnx_with_ggml(&model("encoder.onnx"), &args);
    assert_eq!(code, 1, "{out}\n{err}");
    let r = read_json(&json);
    let (cpu, gg) = (&r["targets"][0], &r["targets"][1]);
    assert_eq!(cpu["verdict"]["status"], "clean", "{}", cpu["verdict"]);
    assert_eq!(gg["verdict"]["status"], "drift", "{}", gg["verdict"]);
    let placement = &gg["target"]["details"]["placement"];
    assert_eq!(placement[0]["provider"], "ggml", "{placement}");
    assert!(
        placement
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["provider"] == "ggml"),
        "{placement}"
    );
    let cpu_placed = &cpu["target"]["details"]["placement"];
    assert_eq!(
        cpu_placed[0]["provider"], "CPUExecutionProvider",
        "{cpu_placed}"
    );
    let first = &r["agreement"]["first_disagreement"];
    assert_eq!(first["wrong"], "ort-ggml", "{first}");
    assert_eq!(first["at"]["op_type"], "MatMul", "{first}");
    // Why: ggml holds MatMul weights in fp16, and the weights rounded to fp16 alone move each culprit's output by
    // as much as its error (0.5 to 2 times); the CPU provider holds them as the model does, so it is never said.
    let culprits = gg["verdict"]["culprits"].as_array().unwrap();
    let narrowed: Vec<&serde_json::Value> = (culprits.iter())
        .filter(|c| c["op_type"] == "MatMul")
        .filter_map(|c| c["causes"].as_array().unwrap().first())
        .filter(|k| k["kind"] == "weights_narrowed")
        .collect();
    assert!(narrowed.len() >= 2, "{}", gg["verdict"]);
    for k in narrowed {
        let ratio = k["evidence"]["ratio"].as_f64().unwrap();
        assert!(
            (0.5..=2.0).contains(&ratio) && k["fix"].as_str().unwrap().contains("weights=F32"),
            "{k}"
        );
    }
}

/// ggml with its weights kept in float32 (`--ep-option weights=F32`): the MatMuls agree with f64, nothing is
/// blamed on narrowed weights.
#[test]
fn ggml_with_float32_weights_has_no_narrowed_weights() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args = [
        "--ep",
        "ggml",
        "--ep-option",
        "weights=F32",
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, out, err) = onnx_with_ggml(&model("encoder.onnx"), &args);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    assert!(!out.contains("weights_narrowed"), "{out}");
    let r = read_json(&json);
    assert_ne!(r["verdict"]["status"], "drift", "{out}");
}

/// Found by what it is: with its package importable (here through `PYTHONPATH`) and no `--ep-library`, the library
/// that exports ONNX Runtime's plugin entry point is found, though the package is not named `onnxruntime_ep_*`:
/// `phantom runtimes` lists it with its device, and `--ep ggml` runs on it.
#[test]
fn the_ggml_plugin_is_found_by_its_entry_point() {
    ensure_runtime();
    let lib = ggml();
    let site = root().join("target/test-plugins-ggml");
    let env = [("PYTHONPATH", site.to_str().unwrap())];
    let (code, out, err) = phantom_env(&["runtimes"], &env);
    assert_eq!(code, 0, "{err}");
    let line = format!("plugin    ggml ({}", lib.display());
    assert!(
        out.contains(&line) && out.contains("by its entry point"),
        "{out}"
    );
    assert!(out.contains("ggml on"), "no device listed:\n{out}");
    let m = model("encoder.onnx");
    let (code, out, err) = phantom_env(&["onnx", m.to_str().unwrap(), "--ep", "ggml"], &env);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("· ggml ·") && out.contains("DRIFT"), "{out}");
}

/// Where ggml runs part of the graph (`partial=1`; it lacks GlobalAveragePool), the placement says which provider
/// ran which node, in the JSON and on the terminal's `placement` line, and the culprit or anomaly says where it ran.
#[test]
fn a_partial_placement_is_reported_per_provider_and_node() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let m = root().join("tests/data/plugins/gap_fc.onnx");
    // ONNX Runtime's extended level: `ORT_ENABLE_ALL` puts the pooling in NCHWc blocks on CPUs whose block size
    // its 8 channels fill (8, without AVX-512), which moves the placement this test reads.
    let args = [
        "--ep",
        "ggml",
        "--ep-option",
        "partial=1",
        "--ort-opt-level",
        "extended",
        "--json",
        json.to_str().unwrap(),
    ];
    let (code, out, err) = onnx_with_ggml(&m, &args);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    assert!(
        out.contains("placement     ggml 1 of 2 nodes; CPUExecutionProvider 1: GlobalAveragePool"),
        "{out}"
    );
    // ggml's MatMul holds its weights in fp16: the node that shows it says where it ran.
    assert!(
        out.contains("MatMul `fc` → `mm` (ran on ggml, inside a node it fused)"),
        "{out}"
    );
    let r = read_json(&json);
    let placement = &r["target"]["details"]["placement"];
    let cpu = (placement.as_array().unwrap().iter())
        .find(|p| p["provider"] == "CPUExecutionProvider")
        .unwrap_or_else(|| panic!("{placement}"));
    assert_eq!(cpu["nodes"][0], "GlobalAveragePool (gap)", "{placement}");
    // Per node, in the JSON and in the HTML node table.
    let ran_on = |name: &str| {
        (r["nodes"].as_array().unwrap().iter())
            .find(|n| n["name"] == name)
            .map(|n| n["ran_on"].clone())
            .unwrap()
    };
    assert_eq!(ran_on("gap"), "CPUExecutionProvider");
    assert_eq!(ran_on("fc"), "ggml, inside a node it fused");
    let html = dir.path().join("r.html");
    let args = [
        "--ep",
        "ggml",
        "--ep-option",
        "partial=1",
        "--ort-opt-level",
        "extended",
        "--html",
        html.to_str().unwrap(),
    ];
    let (code, out, err) = onnx_with_ggml(&m, &args);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<th data-k=\"ran\">ran on</th>")
            && page.contains("<td>CPUExecutionProvider</td>")
    );
}
