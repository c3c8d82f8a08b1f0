//! Boundary semantics of phantom's shaders, as the ONNX spec states them: `ThresholdedRelu` keeps `x` only when
//! `x > alpha` strictly, `Round` takes halves to the even neighbour. Each case puts an input exactly on the boundary.

use phantom::model::inputs::Inputs;
use phantom::runner::wgpu::{F16Mode, WgpuOptions, WgpuRunner};
use phantom::runner::Runner;
use phantom::tensor::Tensor;
use tract_onnx::pb;

use crate::common::*;
use crate::wgpu::have_adapter;

/// The f32 result of the one-node model `op` (with `attrs`) on `x`, computed on the device.
fn on_device(op: &str, attrs: Vec<pb::AttributeProto>, x: &[f32]) -> Vec<f32> {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let n = x.len() as i64;
    let mut nd = node(op, &["x"], "y");
    nd.attribute = attrs;
    let graph = pb::GraphProto {
        name: op.into(),
        node: vec![nd],
        input: vec![value("x", &[n])],
        output: vec![value("y", &[n])],
        ..Default::default()
    };
    let path = write_model(&dir.path().join("m.onnx"), graph, 17);
    let graph = phantom::model::load(&path).unwrap();
    let lib = phantom::runner::ort_lib::locate(None, false).unwrap();
    let opts = WgpuOptions {
        adapter: None,
        f16: false,
        accumulate_f16: false,
        f16_mode: F16Mode::Auto,
    };
    let mut r = WgpuRunner::new(&opts, &lib).unwrap();
    let mut inputs = Inputs::default();
    let t = Tensor::F32(ndarray::Array1::from(x.to_vec()).into_dyn());
    inputs.tensors.push(("x".into(), t));
    let out = r.run(&graph, &inputs).unwrap();
    assert!(
        out.placement.is_empty(),
        "{op} ran on the host: {:?}",
        out.placement
    );
    let Tensor::F32(y) = &out.values["y"] else {
        panic!("y is not f32")
    };
    y.iter().copied().collect()
}

fn alpha(v: f32) -> pb::AttributeProto {
    pb::AttributeProto {
        name: "alpha".into(),
        r#type: pb::attribute_proto::AttributeType::Float as i32,
        f: v,
        ..Default::default()
    }
}

#[test]
fn thresholded_relu_is_strict_at_alpha() {
    if !have_adapter() {
        return;
    }
    let y = on_device("ThresholdedRelu", vec![alpha(2.0)], &[1.0, 2.0, 2.5, -3.0]);
    assert_eq!(y, vec![0.0, 0.0, 2.5, 0.0]);
}

#[test]
fn round_takes_halves_to_even() {
    if !have_adapter() {
        return;
    }
    let y = on_device("Round", vec![], &[0.5, 1.5, 2.5, -0.5, -1.5, 2.4]);
    assert_eq!(y, vec![0.0, 2.0, 2.0, -0.0, -2.0, 2.0]);
}
