//! `phantom reduce`: bundles whose script reproduces the failure with plain onnxruntime, whose cut is a few nodes,
//! and whose expected outputs are phantom's f64 reference values; the wgpu target's bundle; refusals.

use std::path::Path;

use crate::common::{ensure_runtime, model, perturbed_copy, phantom, read_json, root};

fn fp16_case(name: &str) -> String {
    let p = root().join("tests/data/fp16").join(format!("{name}.onnx"));
    p.display().to_string()
}

/// Runs `phantom reduce ARGS -o DIR`; the bundle's reduce.json.
fn reduce(args: &[&str], dir: &Path) -> serde_json::Value {
    let mut all = vec!["reduce"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", dir.to_str().unwrap()]);
    let (code, out, err) = phantom(&all);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("reproduced: bundle in"), "{out}");
    read_json(&dir.join("reduce.json"))
}

/// Runs the bundle's repro.py with the onnxruntime Python package phantom used; (exit code, stdout).
fn repro(dir: &Path, r: &serde_json::Value) -> (i32, String) {
    let lib = r["facts"]["library"].as_str().unwrap();
    let site = lib.split("/onnxruntime/capi/").next().unwrap();
    assert!(
        lib.contains("/onnxruntime/capi/"),
        "not a Python package: {lib}"
    );
    let path = match numpy_dir() {
        Some(np) => format!("{site}:{}", np.display()),
        None => site.to_string(),
    };
    let out = std::process::Command::new("python3")
        .arg(dir.join("repro.py"))
        .env("PYTHONPATH", path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some(), "{text}\n{err}");
    (out.status.code().unwrap(), format!("{text}{err}"))
}

/// Where numpy (which repro.py imports, beside onnxruntime) is installed for these tests when `python3` lacks it: a
/// fresh machine's python has neither, and phantom provisions onnxruntime alone (`--no-deps`).
fn numpy_dir() -> Option<&'static Path> {
    static DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let has = |path: Option<&Path>| {
            let mut c = std::process::Command::new("python3");
            c.args(["-c", "import numpy"]);
            if let Some(p) = path {
                c.env("PYTHONPATH", p);
            }
            c.output().is_ok_and(|o| o.status.success())
        };
        if has(None) {
            return None;
        }
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from)?;
        let dir = home.join(".cache/phantom/test-numpy");
        crate::locks::target("python3", &dir, "repro-numpy");
        Some(dir)
    })
    .as_deref()
}

/// The float64 values of a TensorProto file (raw_data, as phantom writes it).
fn pb_f64(path: &Path) -> (String, Vec<f64>) {
    use prost::Message;
    let t = tract_onnx::pb::TensorProto::decode(std::fs::read(path).unwrap().as_slice()).unwrap();
    assert_eq!(t.data_type, 11, "expected outputs are float64");
    let v = t
        .raw_data
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (t.name, v)
}

/// The expected output of the bundle against `phantom onnx --dump`'s reference value of `value`.
fn assert_expected_is_reference(bundle: &Path, value: &str, onnx_args: &[&str]) {
    let dump = tempfile::tempdir().unwrap();
    let d = dump.path().join("d");
    let mut args = vec!["onnx"];
    args.extend_from_slice(onnx_args);
    args.extend_from_slice(&["--dump", d.to_str().unwrap()]);
    let (code, out, err) = phantom(&args);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let index = read_json(&d.join("index.json"));
    let entry = index["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == value)
        .unwrap_or_else(|| panic!("{value} not in the dump"));
    let r = phantom::model::npy::read_npy(&d.join(entry["reference"].as_str().unwrap())).unwrap();
    let want: Vec<f64> = r.to_f64_array().iter().copied().collect();
    let (_, got) = pb_f64(&bundle.join("test_data_set_0/output_0.pb"));
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(
            g.to_bits() == w.to_bits() || (g - w).abs() <= 1e-12 * w.abs().max(1.0),
            "{g} vs {w}"
        );
    }
}

#[test]
fn fp16_culprits_reduce_to_a_few_nodes_that_plain_onnxruntime_reproduces() {
    ensure_runtime();
    for (case, node, most) in [
        ("ln_variance_overflow", "ln/pow", 1),
        ("bn_var_overflow", "bn", 1),
        ("small_epsilon", "ln/div", 4),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bundle");
        let m = fp16_case(case);
        let r = reduce(&[&m, "--precision", "fp16"], &dir);
        assert_eq!(r["node"], node, "{case}");
        assert_eq!(r["reproduced"], true, "{case}");
        let nodes = r["nodes"].as_array().unwrap();
        let model_nodes = nodes
            .iter()
            .filter(|n| !n.as_str().unwrap().starts_with("phantom_cast"))
            .count();
        assert!((1..=most).contains(&model_nodes), "{case}: {nodes:?}");
        let (code, out) = repro(&dir, &r);
        assert_eq!(code, 1, "{case}: {out}");
        assert!(out.contains("REPRODUCED"), "{case}: {out}");
        let value = r["outputs"][0]["value"].as_str().unwrap();
        assert_expected_is_reference(&dir, value, &[&m, "--precision", "fp16"]);
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(readme.contains("ONNX Runtime 1.") && readme.contains("CPUExecutionProvider"));
    }
}

#[test]
fn an_injected_fault_reduces_to_its_node_and_the_fix_makes_the_script_pass() {
    ensure_runtime();
    let tmp = tempfile::tempdir().unwrap();
    let faulty = tmp.path().join("faulty.onnx");
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &faulty);
    let dir = tmp.path().join("bundle");
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    let r = reduce(&[m, "--target-model", faulty.to_str().unwrap()], &dir);
    assert_eq!(r["node"], "conv2");
    // The fault is the Mul after conv2 (it computes `c2` in the target model): the cut takes both.
    assert_eq!(
        r["nodes"],
        serde_json::json!(["conv2", "phantom_perturbation"])
    );
    assert_eq!(
        r["reference_passes"], true,
        "fp32 inputs: exact arithmetic passes"
    );
    let (code, out) = repro(&dir, &r);
    assert_eq!(code, 1, "{out}");
    assert_expected_is_reference(&dir, "c2", &[m]);
    // The script judges what it runs: with the fault undone in the bundle's model, it passes.
    use prost::Message;
    let path = dir.join("model.onnx");
    let mut mp =
        tract_onnx::pb::ModelProto::decode(std::fs::read(&path).unwrap().as_slice()).unwrap();
    let g = mp.graph.as_mut().unwrap();
    let f = g
        .initializer
        .iter_mut()
        .find(|t| t.name == "phantom_perturbation_factor")
        .unwrap();
    f.float_data = vec![1.0];
    std::fs::write(&path, mp.encode_to_vec()).unwrap();
    let (code, out) = repro(&dir, &r);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("NOT REPRODUCED"), "{out}");
}

#[test]
fn a_wgpu_culprit_bundle_names_the_phantom_command() {
    if !crate::wgpu::have_adapter() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    let m = fp16_case("resize_scale_flip");
    let r = reduce(&[&m, "--ep", "wgpu", "--precision", "fp16"], &dir);
    assert_eq!(r["node"], "upsample");
    assert_eq!(r["facts"]["kind"], "wgpu");
    assert!(
        !dir.join("repro.py").exists(),
        "no ONNX Runtime script for wgpu"
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme
            .contains("phantom onnx model.onnx --input test_data_set_0 --ep wgpu --precision fp16"),
        "{readme}"
    );
}

#[test]
fn reduce_refuses_clean_runs_unknown_nodes_and_existing_bundles() {
    ensure_runtime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    let d = dir.to_str().unwrap();
    let (code, _, err) = phantom(&["reduce", m, "-o", d]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nothing to reduce"), "{err}");
    assert!(!dir.exists());
    // fp16 on ORT's CPU provider computes the Sub behind casts in fp32: no NaN on this target. The culprit phantom
    // names there (basis `ideal`, what a true fp16 device would do) is not this target's failure.
    let (code, _, err) = phantom(&[
        "reduce",
        &fp16_case("nan_division"),
        "--precision",
        "fp16",
        "-o",
        d,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nothing fails on ort-cpu-fp16") && err.contains("basis `ideal`"),
        "{err}"
    );
    assert!(!dir.exists());
    let (code, _, err) = phantom(&["reduce", m, "--node", "nope", "-o", d]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no node `nope`"), "{err}");
    std::fs::create_dir_all(&dir).unwrap();
    let (code, _, err) = phantom(&["reduce", m, "--node", "conv2", "-o", d]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--force"), "{err}");
    // A clean node named with --node: it passes when cut out, so there is nothing to bundle.
    let (code, _, err) = phantom(&["reduce", m, "--node", "conv2", "-o", d, "--force"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("does not fail"), "{err}");
    assert!(
        dir.exists() && std::fs::read_dir(&dir).unwrap().next().is_none(),
        "left as it was"
    );
}

#[test]
fn a_real_model_with_a_wrong_epsilon_reduces_to_that_batch_norm() {
    ensure_runtime();
    let tmp = tempfile::tempdir().unwrap();
    let (real, faulty, out) = crate::common::wrong_epsilon_copy(tmp.path());
    let dir = tmp.path().join("bundle");
    let r = reduce(
        &[
            real.to_str().unwrap(),
            "--target-model",
            faulty.to_str().unwrap(),
        ],
        &dir,
    );
    assert_eq!(r["node"], "BatchNormalization@8");
    assert_eq!(r["nodes"], serde_json::json!(["BatchNormalization@8"]));
    assert_eq!(r["reference_passes"], true);
    let (code, out_text) = repro(&dir, &r);
    assert_eq!(code, 1, "{out_text}");
    assert_expected_is_reference(&dir, &out, &[real.to_str().unwrap()]);
}

#[test]
fn inherited_error_is_reproduced_with_the_targets_own_inputs_and_said_so() {
    ensure_runtime();
    // In fp16 the PP-OCR classifier's first failing node passes when fed the reference's values: it amplifies the
    // (in-tolerance) error of the values the target computed upstream.
    let real = root().join("tests/data/real/ppocr_cls_v2.onnx");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    let r = reduce(&[real.to_str().unwrap(), "--precision", "fp16"], &dir);
    assert_eq!(r["inputs_from"], "target", "{r:#}");
    assert_eq!(r["nodes"].as_array().unwrap().len(), 1);
    let attempts = r["attempts"].as_array().unwrap();
    assert!(attempts[..attempts.len() - 1]
        .iter()
        .all(|a| a["fed"] == "reference" && a["reproduced"] == false));
    assert_eq!(attempts.last().unwrap()["fed"], "target");
    let (code, out) = repro(&dir, &r);
    assert_eq!(code, 1, "{out}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains("Reproduced with the target's own inputs only"),
        "{readme}"
    );
}
