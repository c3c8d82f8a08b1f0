//! Real-world file features: external data, inputs from .npy / .npz / test_data_set directories.

use prost::Message;
use tract_onnx::pb;

use crate::common::*;

/// A copy of convnet.onnx whose largest initializer lives in an external file next to it.
fn with_external_data(dir: &std::path::Path) -> std::path::PathBuf {
    let bytes = std::fs::read(model("convnet.onnx")).unwrap();
    let mut m = pb::ModelProto::decode(bytes.as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    let t = g
        .initializer
        .iter_mut()
        .max_by_key(|t| t.raw_data.len())
        .unwrap();
    std::fs::write(
        dir.join("weights.bin"),
        [vec![0u8; 16], t.raw_data.clone()].concat(),
    )
    .unwrap();
    let entry = |k: &str, v: String| pb::StringStringEntryProto {
        key: k.into(),
        value: v,
    };
    t.external_data = vec![
        entry("location", "weights.bin".into()),
        entry("offset", "16".into()),
        entry("length", t.raw_data.len().to_string()),
    ];
    t.raw_data.clear();
    t.data_location = Some(1);
    let p = dir.join("external.onnx");
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    p
}

#[test]
fn external_data_is_read_by_both_sides() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let p = with_external_data(dir.path());
    let other = tempfile::tempdir().unwrap();
    // Run from another directory: external data resolves against the model's folder, not the cwd.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_phantom"))
        .args(["onnx", p.to_str().unwrap(), "--quiet"])
        .current_dir(other.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("clean: all 13 compared values"), "{text}");
}

#[test]
fn inputs_from_npy_npz_and_test_data_set_give_the_same_report() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let t = phantom::tensor::Tensor::from_f64(
        phantom::tensor::DType::F32,
        ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[1, 3, 32, 32]), |i| {
            ((i[1] * 7 + i[2] * 3 + i[3]) % 11) as f64 / 5.0 - 1.0
        }),
    )
    .unwrap();
    let npy = dir.path().join("image.npy");
    phantom::model::npy::write_npy(&npy, &t).unwrap();
    let set = dir.path().join("test_data_set_0");
    std::fs::create_dir(&set).unwrap();
    let proto = phantom::model::proto::tensor_to_proto("image", &t);
    std::fs::write(set.join("input_0.pb"), proto.encode_to_vec()).unwrap();
    let npz = dir.path().join("inputs.npz");
    {
        let f = std::fs::File::create(&npz).unwrap();
        let mut z = zip::ZipWriter::new(f);
        z.start_file("image.npy", zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut z, &phantom::model::npy::to_npy(&t)).unwrap();
        z.finish().unwrap();
    }
    let mut maxima = vec![];
    for arg in [
        format!("image={}", npy.display()),
        set.display().to_string(),
        npz.display().to_string(),
    ] {
        let json = dir.path().join("r.json");
        let (code, out, err) = phantom(&[
            "onnx",
            model("convnet.onnx").to_str().unwrap(),
            "--input",
            &arg,
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{arg}: {out}{err}");
        let r = read_json(&json);
        assert!(
            r["inputs"][0]["origin"]
                .as_str()
                .unwrap()
                .starts_with("file "),
            "{}",
            r["inputs"][0]
        );
        let first = r["nodes"][0]["values"][0]["reference_stats"]["max"]
            .as_f64()
            .unwrap();
        maxima.push(first);
    }
    assert!(
        maxima.windows(2).all(|w| w[0] == w[1]),
        "same input, same values: {maxima:?}"
    );
}
