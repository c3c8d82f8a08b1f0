//! Models as the toolchains write them (`tests/data/toolchains/`, made by its `make.sh` with the tools themselves,
//! locked), compared with no flags: each must get a verdict, not exit 2.

use std::path::{Path, PathBuf};

use crate::common::{ensure_runtime, root};
use crate::contrib::onnx_report;

fn toolchain(name: &str) -> PathBuf {
    root().join("tests/data/toolchains").join(name)
}

/// `.npy` (version 1) of one boolean.
fn npy_bool(path: &Path, v: bool) {
    let header = "{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }";
    let mut h = format!("{header:<117}");
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((h.len() as u16).to_le_bytes());
    bytes.extend(h.as_bytes());
    bytes.push(v as u8);
    std::fs::write(path, bytes).unwrap();
}

/// optimum's merged decoder (one `If` on `use_cache_branch` whose branches write the names the `If` writes): the
/// branch the input selects is compared whole, on either branch.
#[test]
fn an_optimum_merged_decoder_compares_on_either_branch() {
    ensure_runtime();
    let m = toolchain("optimum_merged_decoder.onnx");
    let dir = root().join("target/toolchains-test");
    std::fs::create_dir_all(&dir).unwrap();
    for cache in [false, true] {
        let flag = dir.join(format!("use_cache_{cache}.npy"));
        npy_bool(&flag, cache);
        let input = format!("use_cache_branch={}", flag.display());
        let (code, out, r) = onnx_report(&m, &["--input", &input]);
        assert_eq!(code, 0, "use_cache_branch={cache}: {out}");
        assert_eq!(r["verdict"]["status"], "clean", "{}", r["verdict"]);
        let names: Vec<&str> = (r["nodes"].as_array().unwrap().iter())
            .flat_map(|n| n["values"].as_array().unwrap())
            .filter(|v| v["status"] == "pass")
            .filter_map(|v| v["name"].as_str())
            .collect();
        assert!(
            names.contains(&"logits") && names.contains(&"present.0.key"),
            "{names:?}"
        );
        // The with-past branch's own values (the mean over the past) are compared only where it ran; the values a
        // branch writes under the `If`'s own names are renamed after the `If`.
        assert_eq!(names.contains(&"/ReduceMean_output_0"), cache, "{names:?}");
        assert!(names.contains(&"optimum::if/logits"), "{names:?}");
    }
}

/// ONNX Runtime's QOperator quantizer writes QLinearConcat (output scale and zero point first, then each tensor
/// with its own): its axis counts the tensors' axes, and the model compares clean.
#[test]
fn an_onnx_runtime_qoperator_model_with_qlinear_concat_compares() {
    ensure_runtime();
    let (code, out, r) = onnx_report(&toolchain("qop_concat.onnx"), &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["verdict"]["status"], "clean", "{}", r["verdict"]);
    let concat = (r["nodes"].as_array().unwrap().iter())
        .find(|n| n["op_type"] == "QLinearConcat")
        .expect("the QLinearConcat node is in the report");
    assert_ne!(concat["reference"]["kind"], "unavailable", "{concat}");
}
