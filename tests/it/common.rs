//! Shared helpers: running the phantom binary, locating demo models, building perturbed models.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Once;

use prost::Message;
use tract_onnx::pb;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn model(name: &str) -> PathBuf {
    root().join("models").join(name)
}

static ORT: Once = Once::new();

/// Makes sure ONNX Runtime is found or installed once before tests run phantom in parallel.
pub fn ensure_runtime() {
    ORT.call_once(|| {
        let out = Command::new(env!("CARGO_BIN_EXE_phantom"))
            .arg("runtimes")
            .output()
            .expect("run phantom");
        assert!(
            out.status.success(),
            "phantom runtimes failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// Runs phantom with `args`; returns (exit code, stdout, stderr).
pub fn phantom(args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_phantom"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run phantom");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes a copy of `src` where the value produced by node `node` is multiplied by `factor` (an extra `Mul`
/// node takes over the value's name), so the target diverges exactly at that node.
pub fn perturbed_copy(src: &Path, node: &str, factor: f32, dst: &Path) {
    let bytes = std::fs::read(src).unwrap();
    let mut m = pb::ModelProto::decode(bytes.as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    let n = g
        .node
        .iter_mut()
        .find(|n| n.name == node)
        .unwrap_or_else(|| panic!("no node {node}"));
    let value = n.output[0].clone();
    let pre = format!("{value}__before_perturbation");
    n.output[0] = pre.clone();
    g.initializer.push(pb::TensorProto {
        name: "phantom_perturbation_factor".into(),
        data_type: 1,
        float_data: vec![factor],
        ..Default::default()
    });
    g.node.push(pb::NodeProto {
        name: "phantom_perturbation".into(),
        op_type: "Mul".into(),
        input: vec![pre, "phantom_perturbation_factor".into()],
        output: vec![value],
        ..Default::default()
    });
    std::fs::write(dst, m.encode_to_vec()).unwrap();
}

/// Parses a JSON report file.
pub fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}
