//! `phantom diff` pairing what frameworks really dump: nothing paired is an error, per-file container prefixes,
//! and tensor-parallel ranks that hold shards, replicated copies or partial sums.

use serde_json::Value;

use crate::diff::{data, diff, pair};

/// Two dumps whose names never meet compare nothing: that is an error naming each side's first names and the
/// flags that rename (exit 2), never `CLEAN` (it was, with "all 0 pairs within tolerance").
#[test]
fn zero_pairs_is_an_error_not_clean() {
    let (code, out, r) = diff(&[&data("tp1"), &data("fused_bf16.safetensors")]);
    assert_eq!(code, 2, "{out}");
    assert!(r.is_null(), "no report is written");
    assert!(
        out.contains("no tensor name is on both sides") && out.contains("--rename"),
        "{out}"
    );
    assert!(out.contains("A has ") && out.contains("B has "), "{out}");
    // A side against itself pairs every name.
    let (code, out, _) = diff(&[&data("tp1"), &data("tp1")]);
    assert_eq!(code, 0, "{out}");
}

/// A folder of one `.safetensors` file per layer against one file holding them all: the per-file prefix
/// (`layer0/0_attn`) is all that keeps names apart, so A is named by the keys, which pairs every tensor; the report
/// says so, and the perturbed layer is named first.
#[test]
fn a_per_file_container_prefix_is_dropped_when_that_pairs_names() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = tempfile::tempdir().unwrap();
    let data = |seed: u32, scale: f32| -> Vec<u8> {
        (0..16u32)
            .flat_map(|i| (((i * 7 + seed * 13) % 11) as f32 * 0.1 * scale + 0.05).to_le_bytes())
            .collect()
    };
    let write = |path: std::path::PathBuf, items: &[(&str, Vec<u8>)]| {
        let views: Vec<(String, TensorView)> = items
            .iter()
            .map(|(k, b)| {
                (
                    k.to_string(),
                    TensorView::new(Dtype::F32, vec![4, 4], b).unwrap(),
                )
            })
            .collect();
        safetensors::serialize_to_file(views, None, &path).unwrap();
    };
    let a = dir.path().join("a");
    std::fs::create_dir(&a).unwrap();
    write(
        a.join("layer0.safetensors"),
        &[("0_attn", data(0, 1.0)), ("0_mlp", data(1, 1.0))],
    );
    write(
        a.join("layer1.safetensors"),
        &[("1_attn", data(2, 1.0)), ("1_mlp", data(3, 1.0))],
    );
    let b = dir.path().join("all.safetensors");
    let all = [
        ("0_attn", data(0, 1.0)),
        ("0_mlp", data(1, 1.0)),
        ("1_attn", data(2, 1.0)),
        ("1_mlp", data(3, 1.05)),
    ];
    write(b.clone(), &all);
    let (code, out, r) = diff(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(r["verdict"]["first_divergent"], "1_mlp", "{out}");
    assert_eq!(r["pairs"].as_array().unwrap().len(), 4, "{out}");
    assert!(
        r["a"]["naming"]
            .as_str()
            .unwrap()
            .contains("pairs 4 (the full names pair 0)"),
        "{r}"
    );
    assert!(r["b"]["naming"].is_null(), "{r}");
    assert!(out.contains("without the file prefix"), "{out}");
    // With --rename on A, its names are the rules' to make: nothing pairs, which is an error.
    let (code, out, _) = diff(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--rename-a",
        "x=y",
    ]);
    assert_eq!(code, 2, "{out}");
}

/// Tensor-parallel dumps hold three kinds of per-rank tensors: shards (joined), replicated copies after an
/// all-reduce (every rank the whole, equal tensor: one is taken) and partial sums (every rank the whole shape, summed
/// when the sum matches the other side better). None is a MISMATCH, each says what was done, and the one real fault
/// (in a replicated tensor) is named first; ranks that should be replicated but differ are said.
#[test]
fn replicated_sharded_and_partial_sum_tensors_pair_without_mismatch() {
    use ndarray::{ArrayD, Dimension, IxDyn};
    use phantom::model::npy::write_npy;
    use phantom::tensor::Tensor;
    let dir = tempfile::tempdir().unwrap();
    let t = |seed: usize, shape: &[usize]| -> ArrayD<f32> {
        ArrayD::from_shape_fn(IxDyn(shape), |i| {
            let k = i.slice().iter().fold(seed, |a, &x| a * 31 + x);
            ((k * 2654435761) % 1000) as f32 / 500.0 - 1.0
        })
    };
    let put = |path: std::path::PathBuf, a: &ArrayD<f32>| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_npy(&path, &Tensor::F32(a.clone())).unwrap();
    };
    let (tp, one) = (dir.path().join("tp2"), dir.path().join("tp1"));
    // Layer 0: qkv sharded on the last axis, the attention output as partial sums, the residual replicated.
    let qkv = t(1, &[4, 12]);
    let (p0, p1) = (t(2, &[4, 8]), t(3, &[4, 8]));
    let resid = t(4, &[4, 8]);
    let mlp = t(5, &[4, 8]);
    for r in 0..2 {
        let rank = tp.join(format!("rank{r}"));
        put(
            rank.join("0_qkv.npy"),
            &qkv.slice(ndarray::s![.., r * 6..(r + 1) * 6])
                .into_dyn()
                .to_owned(),
        );
        put(rank.join("0_attn.npy"), if r == 0 { &p0 } else { &p1 });
        put(rank.join("0_resid.npy"), &resid);
        put(rank.join("0_mlp.npy"), &mlp);
    }
    put(one.join("0_qkv.npy"), &qkv);
    put(one.join("0_attn.npy"), &(&p0 + &p1));
    put(one.join("0_resid.npy"), &resid);
    let mut bad = mlp.clone();
    bad[[1, 2]] += 0.5;
    put(one.join("0_mlp.npy"), &bad);
    let (code, out, r) = diff(&[
        one.to_str().unwrap(),
        tp.to_str().unwrap(),
        "--order",
        "{layer}_{stage}",
    ]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(r["verdict"]["mismatched"], 0, "{out}");
    assert_eq!(r["verdict"]["first_divergent"], "0_mlp", "{out}");
    assert!(
        tr_of(&r, "0_qkv").contains("shards joined along axis 1"),
        "{}",
        tr_of(&r, "0_qkv")
    );
    assert!(
        tr_of(&r, "0_attn").contains("ranks summed (partial sums"),
        "{}",
        tr_of(&r, "0_attn")
    );
    assert!(
        tr_of(&r, "0_resid").contains("identical copies (replicated)"),
        "{}",
        tr_of(&r, "0_resid")
    );
    assert_eq!(pair(&r, "0_resid")["status"], "pass");
    assert_eq!(pair(&r, "0_attn")["status"], "pass");
    // Ranks that should hold the same copy but differ are said, not hidden.
    let mut drifted = resid.clone();
    drifted[[0, 0]] += 1e-3;
    put(tp.join("rank1/0_resid.npy"), &drifted);
    let (_, out, r) = diff(&[one.to_str().unwrap(), tp.to_str().unwrap()]);
    assert!(
        tr_of(&r, "0_resid").contains("differ by up to 1.000e-3"),
        "{out}"
    );
}

fn tr_of(r: &Value, name: &str) -> String {
    pair(r, name)["transforms"].to_string()
}

/// `phantom onnx --dump` of the exported model (`tests/data/diff/torch_export/make_export.py`) on the eager dump's
/// input: the directory of the reference's values.
fn exported_dump(dir: &std::path::Path) -> String {
    crate::common::ensure_runtime();
    let d = dir.join("dump");
    let (m, x) = (
        data("torch_export/model.onnx"),
        data("torch_export/input.npy"),
    );
    let input = format!("input={x}");
    let (code, out, err) =
        crate::common::phantom(&["onnx", &m, "--input", &input, "--dump", d.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    d.join("reference").to_string_lossy().into_owned()
}

fn pair_names(r: &Value) -> Vec<&str> {
    r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect()
}

/// A PyTorch forward-hook dump (module names) against `phantom onnx --dump` of the module's `torch.onnx.export`
/// (scope names, BatchNorm folded into each Conv): every module with an ONNX counterpart pairs, in the run's order,
/// the folded Convs are said to be folded, and the pairs are clean; with one layer perturbed, that layer is named.
#[test]
fn pytorch_modules_pair_with_their_onnx_export() {
    let dir = tempfile::tempdir().unwrap();
    let exported = exported_dump(dir.path());
    let (code, out, r) = diff(&[&data("torch_export/eager.npz"), &exported]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["verdict"]["status"], "clean", "{out}");
    assert_eq!(
        pair_names(&r),
        [
            "bn1",
            "relu",
            "layer1.0.bn1",
            "layer1.0.bn2",
            "layer1.0.relu",
            "layer1.0",
            "layer1",
            "avgpool",
            "fc"
        ],
        "{out}"
    );
    let naming = r["b"]["naming"].as_str().unwrap();
    for folded in [
        "`conv1` into `bn1`",
        "`layer1.0.conv1` into `layer1.0.bn1`",
        "`layer1.0.conv2` into `layer1.0.bn2`",
    ] {
        assert!(naming.contains(folded), "{naming}");
    }
    assert_eq!(
        r["only_a"],
        serde_json::json!(["conv1", "layer1.0.conv1", "layer1.0.conv2"]),
        "{out}"
    );

    let (code, out, r) = diff(&[&data("torch_export/eager_perturbed.npz"), &exported]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(r["verdict"]["first_divergent"], "layer1.0.conv2", "{out}");
    let pass = |n: &str| pair(&r, n)["status"] == "pass";
    assert!(pass("bn1") && pass("layer1.0.bn1"), "{out}");
}
