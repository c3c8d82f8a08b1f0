//! `--save-run` / `phantom replay`: a saved run reproduces; an altered input or environment is named.

use crate::common::*;

#[test]
fn replay_reproduces_and_names_changes() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("perturbed.onnx");
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &target);
    let run = dir.path().join("run");
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--seed",
        "5",
        "--save-run",
        run.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(run.join("test_data_set_0/input_0.pb").exists() && run.join("run.json").exists());
    let (code, out, err) = phantom(&["replay", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("verdict reproduced: drift (first divergence #4 `conv2`); nothing changed"),
        "{out}"
    );

    // An existing run directory is not replaced without --force.
    let (code, _, err) = phantom(&[
        "onnx",
        model("convnet.onnx").to_str().unwrap(),
        "--save-run",
        run.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");

    // Altered environment: pretend it was saved with another ONNX Runtime.
    let json = run.join("run.json");
    let text = std::fs::read_to_string(&json).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["environment"]["runtime_version"] = "1.22.0".into();
    std::fs::write(&json, serde_json::to_string(&v).unwrap()).unwrap();
    let (code, out, _) = phantom(&["replay", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("environment changed: runtime_version: 1.22.0 → 1.31.1"),
        "{out}"
    );

    // Altered input: the verdict may hold, but the input is named.
    let pb = run.join("test_data_set_0/input_0.pb");
    let mut t = phantom::model::proto::read_tensor_pb(&pb).unwrap().1;
    if let phantom::tensor::Tensor::F32(a) = &mut t {
        a.mapv_inplace(|x| x * 0.5);
    }
    std::fs::write(
        &pb,
        prost::Message::encode_to_vec(&phantom::model::proto::tensor_to_proto("image", &t)),
    )
    .unwrap();
    let (_, out, _) = phantom(&["replay", run.to_str().unwrap()]);
    assert!(out.contains("input changed: `image`"), "{out}");
}

/// A wgpu run replays with its precision, accumulation and f16 mode (the environment names the adapter and the
/// compute mode, so a replay in another mode would be reported as changed).
#[test]
fn wgpu_runs_replay_in_their_own_mode() {
    if !crate::wgpu::have_adapter() {
        return;
    }
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let m = model("convnet.onnx");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--ep",
        "wgpu",
        "--precision",
        "fp16",
        "--accumulate",
        "f16",
        "--save-run",
        run.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let saved = std::fs::read_to_string(run.join("run.json")).unwrap();
    assert!(
        saved.contains("accumulate f16") && saved.contains("\"accumulate\": \"f16\""),
        "{saved}"
    );
    let (code, out, err) = phantom(&["replay", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("verdict reproduced") && out.contains("nothing changed"),
        "{out}"
    );
}

/// `--slice` and `--max-memory` are saved whole and replayed: the replay compares the same slice chunk by chunk
/// (its report says bounded memory) and reproduces the verdict of a perturbed target.
#[test]
fn slice_and_bounded_memory_replay() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (run, target) = (dir.path().join("run"), dir.path().join("p.onnx"));
    perturbed_copy(&model("convnet.onnx"), "conv2", 1.01, &target);
    let m = model("convnet.onnx");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--target-model",
        target.to_str().unwrap(),
        "--slice",
        "::2",
        "--max-memory",
        "64KiB",
        "--save-run",
        run.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let s = &saved["settings"];
    assert_eq!(s["strategy"]["kind"], "bounded", "{s}");
    assert_eq!(s["strategy"]["budget"], 65536, "{s}");
    assert!(!s["slice"].is_null(), "{s}");
    let (code, out, err) = phantom(&["replay", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("verdict reproduced: drift (first divergence #4 `conv2`); nothing changed"),
        "{out}"
    );
    assert!(out.contains("note: bounded memory (64 KiB)"), "{out}");
}
