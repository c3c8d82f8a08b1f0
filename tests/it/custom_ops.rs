//! Custom-op libraries: a model onnxruntime-extensions' own pre-processing tool wrote (`DecodeImage` in
//! `com.microsoft.extensions` first, then resize, crop and normalisation around a classifier) runs in phantom's ONNX
//! Runtime with the extensions' library, found through python3 or given with `--custom-op-library`. The reference
//! takes the custom op's values from the target (marked on the node, never compared) and computes everything after it
//! in f64.

use std::path::{Path, PathBuf};

use crate::common::{ensure_runtime, read_json, root};

/// `bin/` of a virtual environment holding onnxruntime-extensions (from its lock).
fn extensions_bin() -> PathBuf {
    let dir = root().join("target/test-extensions-venv");
    let _lock = crate::common::file_lock(&root().join("target/test-extensions-venv.lock"));
    crate::locks::venv(&dir, "extensions")
}

/// The library's path, as the package says.
fn extensions_library(bin: &Path) -> PathBuf {
    let out = std::process::Command::new(bin.join("python"))
        .args([
            "-c",
            "import onnxruntime_extensions as e; print(e.get_library_path())",
        ])
        .output()
        .unwrap();
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn model() -> PathBuf {
    root().join("tests/data/toolchains/ext_mobilenet_ppp.onnx")
}

/// `phantom onnx MODEL ARGS --json` with `PATH` led by `path_head`: (exit code, output, report).
fn run(path_head: Option<&Path>, args: &[&str]) -> (i32, String, serde_json::Value) {
    run_model(&model(), path_head, args)
}

/// [`run`] on model `m`.
fn run_model(
    m: &Path,
    path_head: Option<&Path>,
    args: &[&str],
) -> (i32, String, serde_json::Value) {
    run_env(m, path_head, &[], args)
}

/// [`run_model`] with environment variables `env` set.
fn run_env(
    m: &Path,
    path_head: Option<&Path>,
    env: &[(&str, &str)],
    args: &[&str],
) -> (i32, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let path = match path_head {
        Some(bin) => format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        None => std::env::var("PATH").unwrap(),
    };
    let mut all = vec![
        "onnx",
        m.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let mut vars = vec![("PATH", path.as_str())];
    vars.extend_from_slice(env);
    let (code, out, err) = crate::common::phantom_env(&all, &vars);
    let r = match json.exists() {
        true => read_json(&json),
        false => serde_json::Value::Null,
    };
    (code, format!("{out}{err}"), r)
}

fn node<'r>(r: &'r serde_json::Value, op: &str) -> &'r serde_json::Value {
    (r["nodes"].as_array().unwrap().iter())
        .find(|n| n["op_type"] == op)
        .unwrap_or_else(|| panic!("no {op} node"))
}

/// The custom op's values come from the target, said on its node and never compared; the classifier after it is
/// computed in f64 from them and compared, and the input is an image phantom drew and encoded for the decoder.
fn assert_seeded_and_compared(out: &str, r: &serde_json::Value) {
    let decode = node(r, "DecodeImage");
    assert_eq!(decode["reference"]["kind"], "seeded", "{decode}");
    let why = decode["reference"]["reason"].as_str().unwrap();
    assert!(
        why.contains("custom op of domain `com.microsoft.extensions`")
            && why.contains("taken from the target, not computed in f64"),
        "{why}"
    );
    assert_eq!(decode["values"][0]["status"], "unchecked", "{decode}");
    for op in ["Conv", "MatMul", "Softmax"] {
        let n = node(r, op);
        let kind = n["reference"]["kind"].as_str().unwrap();
        assert!(kind == "f64" || kind == "f64_phantom", "{op}: {n}");
        assert_eq!(n["values"][0]["status"], "pass", "{op}: {out}");
    }
    // What the softmax read was computed in f64 from the decoded image, not copied: it differs from the target's
    // by rounding, not zero.
    let probs = &node(r, "Softmax")["values"][0]["metrics"];
    assert!(probs["max_abs"].as_f64().unwrap() > 0.0, "{probs}");
    let input = &r["inputs"][0];
    assert!(
        input["origin"].as_str().unwrap().contains("PNG-encoded"),
        "{input}"
    );
}

/// Found through python3 (the package is importable): no flag. The uint8 resize ONNX Runtime computes with
/// fixed-point weights lands a level off the exact value's truncation at thousands of pixels: faithful, taken as
/// decisions, and the verdict is clean.
#[test]
fn an_extensions_model_runs_with_the_library_python_finds() {
    ensure_runtime();
    let bin = extensions_bin();
    let (code, out, r) = run(Some(&bin), &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["verdict"]["status"], "clean", "{out}");
    assert_seeded_and_compared(&out, &r);
    let resize = &node(&r, "Resize")["values"][0];
    let flips = resize["adopted"]["flips"].as_u64().unwrap_or(0);
    assert!(flips > 1000, "{resize}");
    assert_eq!(resize["adopted"]["beyond"], 0, "{resize}");
}

/// A tokenizer onnxruntime-extensions builds (`BertTokenizer`) in front of a classifier, with no flags: the text
/// input is drawn as sentences of the tokenizer's own whole words, phantom's kernel computes the tokens as the
/// extensions' kernel does, and everything is compared: clean. Text a user brings too: punctuation, capitals,
/// accents, CJK, a control character, words WordPiece cuts or cannot, and a pair of strings.
#[test]
fn a_tokenizer_model_is_computed_and_compared_whole() {
    ensure_runtime();
    let bin = extensions_bin();
    let m = root().join("tests/data/toolchains/ext_bert_tokenizer_classifier.onnx");
    let (code, out, r) = run_model(&m, Some(&bin), &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["verdict"]["status"], "clean", "{out}");
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    let origin = r["inputs"][0]["origin"].as_str().unwrap();
    assert!(
        origin.contains("words of `BertTokenizer_1` (15 strings)"),
        "{origin}"
    );
    let tok = node(&r, "BertTokenizer");
    assert_eq!(tok["reference"]["kind"], "f64_phantom", "{tok}");
    for v in tok["values"].as_array().unwrap() {
        assert_eq!(v["status"], "pass", "{v}");
        assert_eq!(v["metrics"]["max_abs"], 0.0, "{v}");
    }
    let probs = &node(&r, "Softmax")["values"][0]["metrics"];
    assert!(
        probs["max_abs"].as_f64().unwrap() > 0.0,
        "computed, not copied: {probs}"
    );
    let dir = tempfile::tempdir().unwrap();
    let texts = [
        r#"["Ça va? The MODEL runs-on GPU!! 测试 abcd\u0007 quantized fp16s"]"#,
        r#"["the model", "Numbers DIFFER by one level."]"#,
    ];
    for (k, json) in texts.iter().enumerate() {
        let npy = dir.path().join(format!("text{k}.npy"));
        let code = "import json, sys, numpy as np; np.save(sys.argv[1], np.array(json.loads(sys.argv[2])))";
        let made = std::process::Command::new(bin.join("python"))
            .args(["-c", code, npy.to_str().unwrap(), json])
            .status()
            .unwrap();
        assert!(made.success());
        let given = format!("text={}", npy.display());
        let (code, out, r) = run_model(&m, Some(&bin), &["--input", &given]);
        assert_eq!(code, 0, "{json}: {out}");
        assert_eq!(r["coverage"]["unchecked"], 0, "{json}: {out}");
    }
}

/// A resize that interpolates otherwise (another coordinate transformation, given as `--target-model`) is far more
/// than a level off: drift, first at the Resize.
#[test]
fn a_resize_computed_otherwise_is_drift() {
    ensure_runtime();
    let bin = extensions_bin();
    let dir = tempfile::tempdir().unwrap();
    let other = asymmetric_copy(&bin.join("python"), dir.path());
    let (code, out, r) = run(Some(&bin), &["--target-model", other.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(r["verdict"]["status"], "drift", "{out}");
    let first = &r["verdict"]["first_divergence"];
    assert_eq!(first["op_type"], "Resize", "{first}");
}

/// The Resize-computed-otherwise model made by `python` (onnxruntime-extensions' venv) in `dir`.
fn asymmetric_copy(python: &Path, dir: &Path) -> PathBuf {
    let other = dir.join("asymmetric.onnx");
    let script = "import onnx, sys\nm = onnx.load(sys.argv[1])\nfor n in m.graph.node:\n    if n.op_type == 'Resize':\n        n.attribute.append(onnx.helper.make_attribute('coordinate_transformation_mode', 'asymmetric'))\nonnx.save(m, sys.argv[2])";
    let status = std::process::Command::new(python)
        .args([
            "-c",
            script,
            model().to_str().unwrap(),
            other.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    other
}

/// Given on the command line, with no python3 that imports the package.
#[test]
fn an_extensions_model_runs_with_the_library_given() {
    ensure_runtime();
    let lib = extensions_library(&extensions_bin());
    let (code, out, r) = run(None, &["--custom-op-library", lib.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert_seeded_and_compared(&out, &r);
}

/// With neither, phantom installs the pinned onnxruntime-extensions into its cache with pip, once, as it does ONNX
/// Runtime, and the model runs; the next run finds it there. With `--no-install` (or `PHANTOM_NO_INSTALL=1`) and
/// nothing in the cache, nothing is installed and the model is refused with what to do.
#[test]
fn an_extensions_model_with_no_library_around_gets_one_installed() {
    ensure_runtime();
    let ort = crate::common::runtime_library();
    let cache = tempfile::tempdir().unwrap();
    let env = [
        ("PHANTOM_CACHE_DIR", cache.path().to_str().unwrap()),
        ("ORT_DYLIB_PATH", ort.as_str()),
    ];
    let installed = cache.path().join("onnxruntime-extensions-0.15.2");
    let (code, out, _) = run_env(&model(), None, &env, &["--no-install"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("com.microsoft.extensions")
            && out.contains("automatic install is off")
            && out.contains("pip install onnxruntime-extensions"),
        "{out}"
    );
    let mut off = env.to_vec();
    off.push(("PHANTOM_NO_INSTALL", "1"));
    let (code, out, _) = run_env(&model(), None, &off, &[]);
    assert_eq!(code, 2, "{out}");
    assert!(!installed.exists(), "{out}");
    let (code, out, r) = run_env(&model(), None, &env, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("installing onnxruntime-extensions==0.15.2"),
        "{out}"
    );
    assert!(installed.join("onnxruntime_extensions").is_dir(), "{out}");
    assert_seeded_and_compared(&out, &r);
    // The report says which library ran, and where it came from.
    let libs = r["target"]["details"]["custom_op_libraries"].to_string();
    assert!(
        libs.contains("onnxruntime-extensions-0.15.2") && libs.contains("phantom cache"),
        "{libs}"
    );
    assert!(out.contains("custom ops    "), "{out}");
    let (code, out, _) = run_env(&model(), None, &off, &[]);
    assert_eq!(code, 0, "found in the cache with installs off: {out}");
    assert!(!out.contains("installing"), "{out}");
}

/// A library path that is not there is refused with what to do.
#[test]
fn a_custom_op_library_that_is_not_there_is_refused() {
    let (code, out, _) = run(None, &["--custom-op-library", "/no/such/libcustom.so"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("/no/such/libcustom.so"), "{out}");
}

/// A plan records the library given to `phantom plan`: its segment jobs, given no flag and no python3 that imports
/// the package, register it, and the merged report is the whole run's (the custom op seeded, the rest compared).
#[test]
fn a_plans_segment_jobs_register_the_library_the_plan_was_given() {
    ensure_runtime();
    let lib = extensions_library(&extensions_bin());
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan");
    let (p, m, json) = (
        plan.to_str().unwrap(),
        model(),
        dir.path().join("merged.json"),
    );
    let given = ["--custom-op-library", lib.to_str().unwrap()];
    let planned = ["plan", m.to_str().unwrap(), "-o", p, "--segments", "2"];
    let (code, out, err) = crate::common::phantom(&[&planned[..], &given[..]].concat());
    assert_eq!(code, 0, "{out}{err}");
    let manifest = std::fs::read_to_string(plan.join("plan.json")).unwrap();
    assert!(manifest.contains("custom_op_libraries"), "{manifest}");
    for job in [
        vec!["segment", p, "--boundary"],
        vec!["segment", p, "--index", "0"],
        vec!["segment", p, "--index", "1"],
    ] {
        let (code, out, err) = crate::common::phantom(&job);
        assert_eq!(code, 0, "{job:?}: {out}{err}");
    }
    let (code, out, err) = crate::common::phantom(&["merge", p, "--json", json.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let r = read_json(&json);
    assert_eq!(r["verdict"]["status"], "clean", "{out}");
    assert_seeded_and_compared(&out, &r);
    // A recorded library that is not on the job's machine is an error naming it, not a model refused for its domain.
    let moved = manifest.replace(lib.to_str().unwrap(), "/no/such/place/libortextensions.so");
    std::fs::write(plan.join("plan.json"), moved).unwrap();
    let (code, out, err) = crate::common::phantom(&["segment", p, "--index", "0"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("/no/such/place/libortextensions.so") && err.contains("the plan in"),
        "{err}"
    );
}

/// `phantom reduce` on a model whose first node is a custom op: the reference takes that node's values from the
/// target (as a whole run does), the Resize computed otherwise is cut out, and the bundle records the library its
/// script registers with ONNX Runtime; the script reproduces the failure.
#[test]
fn a_reduce_bundle_registers_the_library_phantom_used() {
    ensure_runtime();
    let bin = extensions_bin();
    let lib = extensions_library(&bin);
    let dir = tempfile::tempdir().unwrap();
    let other = asymmetric_copy(&bin.join("python"), dir.path());
    let bundle = dir.path().join("bundle");
    let (code, out, err) = crate::common::phantom(&[
        "reduce",
        model().to_str().unwrap(),
        "--target-model",
        other.to_str().unwrap(),
        "--custom-op-library",
        lib.to_str().unwrap(),
        "-o",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let cfg = read_json(&bundle.join("bundle.json"));
    assert_eq!(
        cfg["custom_op_libraries"][0],
        lib.to_str().unwrap(),
        "{cfg}"
    );
    let readme = std::fs::read_to_string(bundle.join("README.md")).unwrap();
    assert!(readme.contains("--custom-op-library"), "{readme}");
    let repro = std::process::Command::new(bin.join("python"))
        .arg(bundle.join("repro.py"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&repro.stdout);
    assert_eq!(repro.status.code(), Some(1), "{said}");
    assert!(said.contains("REPRODUCED"), "{said}");
}
