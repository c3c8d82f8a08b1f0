//! Several input samples (`--samples`, several test_data_set directories) and images as inputs.

use std::path::{Path, PathBuf};

use prost::Message;
use tract_onnx::pb;

use crate::common::*;

/// A model `x[1, 4] → Clip(x, -hi, hi) → ×2 → y`; written to `dir/name`.
fn clip_model(dir: &Path, name: &str, hi: f32) -> PathBuf {
    let g = pb::GraphProto {
        name: "g".into(),
        node: vec![
            node("Clip", &["x", "lo", "hi"], "c"),
            node("Mul", &["c", "two"], "y"),
        ],
        initializer: vec![
            f32_tensor("lo", vec![], vec![-hi]),
            f32_tensor("hi", vec![], vec![hi]),
            f32_tensor("two", vec![], vec![2.0]),
        ],
        input: vec![value("x", &[1, 4])],
        output: vec![value("y", &[1, 4])],
        ..Default::default()
    };
    write_model(&dir.join(name), g, 17)
}

/// A test_data_set directory holding `x`.
fn data_set(dir: &Path, name: &str, x: [f32; 4]) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let t = f32_tensor("x", vec![1, 4], x.to_vec());
    std::fs::write(d.join("input_0.pb"), t.encode_to_vec()).unwrap();
    d
}

/// Two samples, only the second reaching the values where the target's model differs (its Clip bound is 2.5
/// instead of 10): the merged report is drift, the value names sample 1, and each sample's own verdict is listed.
#[test]
fn the_worst_sample_decides_and_is_named() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let reference = clip_model(dir.path(), "ref.onnx", 10.0);
    let target = clip_model(dir.path(), "tgt.onnx", 2.5);
    let calm = data_set(dir.path(), "calm", [0.5, -1.0, 1.5, 0.0]);
    let wild = data_set(dir.path(), "wild", [0.5, 3.0, -1.0, 0.0]);
    let json = dir.path().join("r.json");
    let args = |a: &Path, b: &Path| -> Vec<String> {
        [
            "onnx",
            reference.to_str().unwrap(),
            "--target-model",
            target.to_str().unwrap(),
            "--input",
            a.to_str().unwrap(),
            "--input",
            b.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let run = |a: &Path, b: &Path| {
        let owned = args(a, b);
        phantom(&owned.iter().map(String::as_str).collect::<Vec<_>>())
    };
    // The first run also writes the Markdown and HTML views, which list each sample's verdict.
    let (md, html) = (dir.path().join("r.md"), dir.path().join("r.html"));
    let mut first = args(&calm, &wild);
    first.extend([
        "--summary-md".into(),
        md.display().to_string(),
        "--html".into(),
        html.display().to_string(),
    ]);
    let (code, out, err) = phantom(&first.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 1, "{out}\n{err}");
    let r = read_json(&json);
    assert_eq!(r["verdict"]["status"], "drift");
    assert_eq!(r["verdict"]["first_divergence"]["value"], "c");
    let samples = r["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2);
    assert_eq!(
        (samples[0]["status"].as_str(), samples[1]["status"].as_str()),
        (Some("clean"), Some("drift"))
    );
    assert_eq!(samples[1]["decides"], true);
    let y = r["nodes"][1]["values"][0].clone();
    assert_eq!(
        (y["name"].as_str(), y["sample"].as_u64()),
        (Some("y"), Some(1))
    );
    // 2·3.0 against 2·2.5: the worst sample's figures, not an average.
    assert!(
        (y["metrics"]["max_abs"].as_f64().unwrap() - 1.0).abs() < 1e-6,
        "{y}"
    );
    assert!(
        out.contains("sample 1 (") && out.contains("drift") && out.contains("← decides"),
        "{out}"
    );
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains("| 1 ") && md.contains("(decides) | drift |"),
        "{md}"
    );
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(
        html.contains("input sample 1") && html.contains(": drift, 2 value(s) out of tolerance"),
        "samples missing from the HTML"
    );
    assert!(html.contains("— decides the verdict"));
    // Order does not matter: the worst sample still decides.
    let (code, _, _) = run(&wild, &calm);
    assert_eq!(code, 1);
    assert_eq!(read_json(&json)["samples"][0]["decides"], true);
    // Both calm: clean, every sample listed.
    let calm2 = data_set(dir.path(), "calm2", [1.0, 2.0, -2.0, 0.25]);
    let (code, _, err) = run(&calm, &calm2);
    assert_eq!(code, 0, "{err}");
    assert_eq!(read_json(&json)["samples"].as_array().unwrap().len(), 2);
}

/// `--samples N` draws N seeded samples that differ; samples that cannot differ are refused.
#[test]
fn seeded_samples_differ_and_identical_ones_are_refused() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model("convnet.onnx");
    let json = dir.path().join("r.json");
    let (code, out, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--samples",
        "3",
        "--seed",
        "5",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let r = read_json(&json);
    let labels: Vec<&str> = r["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["seed 5", "seed 6", "seed 7"]);
    let picked: std::collections::BTreeSet<u64> = value_reports(&r)
        .filter_map(|v| v["sample"].as_u64())
        .collect();
    assert!(
        !picked.is_empty() && picked.iter().all(|k| *k < 3),
        "{picked:?}"
    );
    // Every input from one file: the samples would be identical.
    let ds = dir.path().join("run");
    let (code, _, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--save-run",
        ds.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let tds = ds.join("test_data_set_0");
    let (code, _, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--samples",
        "2",
        "--input",
        tds.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("identical"), "{err}");
    // Several directories elsewhere than `phantom onnx`, or with --samples too: refused.
    let (code, _, err) = phantom(&[
        "onnx",
        m.to_str().unwrap(),
        "--samples",
        "2",
        "--input",
        tds.to_str().unwrap(),
        "--input",
        tds.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("one or the other"), "{err}");
}

/// An image `w`×`h`, left half white, right half black, saved as PNG.
fn half_image(dir: &Path, w: u32, h: u32) -> PathBuf {
    let img = image::RgbImage::from_fn(w, h, |x, _| match x < w / 2 {
        true => image::Rgb([255, 255, 255]),
        false => image::Rgb([0, 0, 0]),
    });
    let png = dir.join(format!("half_{w}x{h}.png"));
    img.save(&png).unwrap();
    png
}

/// `--input NAME=photo.png`: resized to the input's size, laid out NCHW, normalised; the origin says how, and the
/// values equal the same pixels given as a .npy.
#[test]
fn images_feed_vision_inputs() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model("convnet.onnx");
    let onnx = |input: &str, json: &Path, extra: &[&str]| {
        let mut a = vec![
            "onnx",
            m.to_str().unwrap(),
            "--input",
            input,
            "--json",
            json.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        phantom(&a)
    };
    let json = dir.path().join("r.json");
    let small = format!("image={}", half_image(dir.path(), 16, 8).display());
    let (code, out, err) = onnx(&small, &json, &["--mean", "0.5", "--std", "0.5"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let r = read_json(&json);
    let origin = r["inputs"][0]["origin"].as_str().unwrap();
    assert!(
        origin.contains("(16x8) resized to 32x32") && origin.contains("NCHW"),
        "{origin}"
    );
    assert_eq!(r["inputs"][0]["shape"], serde_json::json!([1, 3, 32, 32]));
    // A 32×32 image against the same values as a .npy: the first node sees the same input.
    let exact = format!("image={}", half_image(dir.path(), 32, 32).display());
    let (code, _, err) = onnx(&exact, &json, &["--mean", "0.5", "--std", "0.5"]);
    assert_eq!(code, 0, "{err}");
    let mut x = vec![0f32; 3 * 32 * 32];
    for (i, v) in x.iter_mut().enumerate() {
        *v = if i % 32 < 16 { 1.0 } else { -1.0 };
    }
    let npy = dir.path().join("x.npy");
    write_npy_f32(&npy, &[1, 3, 32, 32], &x);
    let json2 = dir.path().join("r2.json");
    let (code, _, err) = onnx(&format!("image={}", npy.display()), &json2, &[]);
    assert_eq!(code, 0, "{err}");
    let stats = |p: &Path| read_json(p)["nodes"][0]["values"][0]["reference_stats"].clone();
    let (a, b) = (stats(&json), stats(&json2));
    for k in ["min", "max", "mean", "std"] {
        let (a, b) = (a[k].as_f64().unwrap(), b[k].as_f64().unwrap());
        assert!(
            (a - b).abs() <= 1e-9 * b.abs().max(1.0),
            "{k}: image {a} vs npy {b}"
        );
    }
    // Normalisation without an image is refused; so is a file that is not an image.
    let (code, _, err) = phantom(&["onnx", m.to_str().unwrap(), "--mean", "0.5"]);
    assert_eq!(code, 2, "{err}");
    let fake = dir.path().join("fake.jpg");
    std::fs::write(&fake, b"GIF89a").unwrap();
    let (code, _, err) = onnx(&format!("image={}", fake.display()), &json, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("fake.jpg") && err.contains("cannot decode"),
        "{err}"
    );
}

/// A little-endian float32 .npy.
pub fn write_npy_f32(p: &Path, shape: &[usize], data: &[f32]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    data.iter().for_each(|v| bytes.extend(v.to_le_bytes()));
    std::fs::write(p, bytes).unwrap();
}
