//! ONNX Runtime's contrib ops in the reference: on one-node models of each op (tests/data/contrib/make_cases.py),
//! phantom's f64 kernel matches an independent float64 numpy implementation at rtol 1e-9 and is marked as
//! phantom's own f64; ORT's fp32 CPU kernel matches the same expected values at the fp32 tolerance (which checks
//! that phantom read the op as ORT does).

use std::path::Path;

use phantom::model::inputs::Inputs;
use phantom::report::model::RefPrecision;
use phantom::runner::{ort::OrtRunner, reference::ReferenceRunner, Runner};
use phantom::tensor::Tensor;

use crate::common::ensure_runtime;
use crate::oracle::files;

/// Ops ORT has no CPU kernel for (CUDA/ROCm only): compared with the numpy definition alone.
const NO_CPU_KERNEL: &[&str] = &["BiasAdd", "BiasSplitGelu"];

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
fn rel_err(got: &Tensor, want: &ndarray::ArrayD<f64>, what: &str) -> f64 {
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
    assert!(dirs.len() >= 14, "contrib cases missing");
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
        if NO_CPU_KERNEL.contains(&op.as_str()) {
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
