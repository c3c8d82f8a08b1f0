//! The wgpu target on values beyond the adapter's storage-binding limit (lowered with PHANTOM_WGPU_MAX_BINDING):
//! element-wise chunks and slabs of every other op family, checked bit for bit against unlimited runs.

use crate::common::{ensure_runtime, read_json, root};
use crate::wgpu::have_adapter;

/// Element-wise ops on tensors beyond the storage-binding limit run in chunks (the limit lowered to 64 KiB with
/// PHANTOM_WGPU_MAX_BINDING, so 256 KiB tensors take 4 chunks), and the Transpose after them in slabs.
#[test]
fn elementwise_ops_beyond_the_binding_limit_run_in_chunks() {
    if !have_adapter() {
        return;
    }
    ensure_runtime();
    let m = root().join("tests/data/wgpu/chunked.onnx");
    let tmp = tempfile::tempdir().unwrap();
    let r = run_limited(&m, &tmp.path().join("r.json"), &[], Some("65536"));
    let d = &r["target"]["details"];
    assert_eq!(d["nodes_on_device"], 5, "{d}");
    assert!(d["dispatches"].as_u64().unwrap() >= 16, "{d}");
    let nodes = r["nodes"].as_array().unwrap();
    assert!(nodes
        .iter()
        .all(|n| n["status"] == "pass" && n.get("target_placement").is_none()));
}

/// `phantom onnx MODEL --ep wgpu` with `extra` arguments and the binding limit lowered to `limit`: its JSON report.
fn run_limited(
    m: &std::path::Path,
    json: &std::path::Path,
    extra: &[&str],
    limit: Option<&str>,
) -> serde_json::Value {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_phantom"));
    cmd.args(["onnx", m.to_str().unwrap(), "--ep", "wgpu", "--json"])
        .arg(json)
        .args(extra)
        .env("NO_COLOR", "1");
    if let Some(l) = limit {
        cmd.env("PHANTOM_WGPU_MAX_BINDING", l);
    }
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    read_json(json)
}

/// Every op family cut into slabs when its values exceed the binding limit, lowered to 32 KiB
/// (`tests/data/wgpu/make_models.py`: convs with halos, strides, SAME padding and 1-D; transposed convs; pools;
/// normalizations; matrix products whose B is beyond the limit too, cut twice; row-wise ops; layout ops; Where with a
/// sliced condition): each node stays on the device and its values are bit-identical to the unlimited run, in f32 and
/// in native and emulated f16. A Softmax over one long row cannot be cut and says so; in native f16 a 1-D transposed
/// conv with odd rows cannot be copied in 4-byte runs and says so.
#[test]
fn nodes_beyond_the_binding_limit_run_in_slabs_bit_identically() {
    if !have_adapter() {
        return;
    }
    ensure_runtime();
    let m = root().join("tests/data/wgpu/split_ops.onnx");
    let tmp = tempfile::tempdir().unwrap();
    type HostNodes<'a> = &'a [(&'a str, &'a str)];
    let modes: [(&[&str], HostNodes); 3] = [
        (&[], &[("softmax_row", "no way to cut Softmax")]),
        (
            &["--precision", "fp16", "--f16-mode", "native"],
            &[
                ("softmax_row", "no way to cut Softmax"),
                ("convt1d", "not 4-byte aligned"),
            ],
        ),
        (
            &["--precision", "fp16", "--f16-mode", "emulated"],
            &[("softmax_row", "no way to cut Softmax")],
        ),
    ];
    for (extra, on_host) in modes {
        let full = run_limited(&m, &tmp.path().join("full.json"), extra, None);
        let cut = run_limited(&m, &tmp.path().join("cut.json"), extra, Some("32768"));
        let details = &cut["target"]["details"];
        assert_eq!(
            full["target"]["details"]["nodes_on_device"], 30,
            "{extra:?}"
        );
        let on_device = 30 - on_host.len();
        assert_eq!(
            details["nodes_on_device"].as_u64(),
            Some(on_device as u64),
            "{extra:?}: {details}"
        );
        let dispatches =
            |r: &serde_json::Value| r["target"]["details"]["dispatches"].as_u64().unwrap();
        assert!(
            dispatches(&cut) > 2 * dispatches(&full),
            "{extra:?}: {details}"
        );
        assert_eq!(details["max_binding_bytes"], 32768, "{details}");
        let n = details["nodes_cut_into_slabs"].as_u64().unwrap();
        assert!(n >= 20, "{extra:?}: {details}");
        assert_eq!(full["target"]["details"]["nodes_cut_into_slabs"], 0);
        let (a, b) = (
            full["nodes"].as_array().unwrap(),
            cut["nodes"].as_array().unwrap(),
        );
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            let name = y["name"].as_str().unwrap();
            if let Some((_, why)) = on_host.iter().find(|(n, _)| *n == name) {
                let note = y["target_placement"]["reason"].as_str().unwrap();
                assert!(note.contains("32 KiB storage binding limit"), "{note}");
                assert!(note.contains(why), "{note}");
                continue;
            }
            assert!(
                y.get("target_placement").is_none(),
                "{extra:?} {name}: {}",
                y["target_placement"]
            );
            for (vx, vy) in x["values"]
                .as_array()
                .unwrap()
                .iter()
                .zip(y["values"].as_array().unwrap())
            {
                for k in ["max_abs", "mean_abs", "rmse"] {
                    assert_eq!(vx["metrics"][k], vy["metrics"][k], "{extra:?} {name} {k}");
                }
                assert_eq!(vx["target_stats"], vy["target_stats"], "{extra:?} {name}");
                assert_eq!(vy["status"], "pass", "{extra:?} {name}");
            }
        }
    }
}
