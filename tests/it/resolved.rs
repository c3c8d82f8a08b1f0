//! Control flow and random ops resolved before the run (If inlined, Loop and Scan unrolled, seeded hash noise)
//! and the reference's own fixes of tract imports (slice bounds): each checked against ORT on the original model.

use phantom::model::inputs::Inputs;
use phantom::runner::{ort::OrtRunner, reference::ReferenceRunner, RunOutput};
use phantom::tensor::Tensor;

use crate::common::ensure_runtime;
use crate::contrib::{contrib_model, onnx_report, rel_err};

#[test]
fn an_if_decided_by_the_inputs_runs_its_taken_branch_on_both_sides() {
    ensure_runtime();
    let m = contrib_model("if_sample_rate.onnx");
    // 16 kHz and 8 samples: the then branch, and inside it the then branch of the shape test. The else branch
    // (a Reshape to 3×7) does not type for 8 samples: tract must never see it.
    for (samples, inner) in [("8", "inner_sigmoid"), ("9", "inner_tanh")] {
        let (code, out, r) = onnx_report(&m, &["--dim", &format!("samples={samples}")]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("If `top_if`: its condition is true"), "{out}");
        let names: Vec<&str> = r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&inner) && names.contains(&"then_relu"),
            "inner nodes compared: {names:?}"
        );
        assert!(!names.contains(&"else_reshape"), "{names:?}");
        let cov = &r["coverage"];
        assert!(cov["compared"].as_u64().unwrap() >= 8, "{cov}");
        use sha2::Digest;
        let sha = format!("{:x}", sha2::Sha256::digest(std::fs::read(&m).unwrap()));
        assert_eq!(
            r["model"]["sha256"], sha,
            "the report names the file as read, not the inlined model"
        );
    }
}

/// Prepares a model's inputs with symbolic dims set (as `--dim` does).
fn prepared(graph: &phantom::model::Graph, dims: &[(&str, i64)]) -> Inputs {
    let mut spec = phantom::model::inputs::InputSpec::default();
    for (k, v) in dims {
        spec.dims.insert(k.to_string(), *v);
    }
    phantom::model::inputs::prepare(graph, &spec).unwrap()
}

#[test]
fn unrolled_loops_and_inlined_ifs_compute_what_ort_computes_on_the_original() {
    ensure_runtime();
    let lib = phantom::runner::ort_lib::locate(None, false).unwrap();
    for (name, dims, want_note) in [
        (
            "loop_scan.onnx",
            vec![("steps", 5)],
            "Loop `recurrence`: 5 iterations",
        ),
        ("if_sample_rate.onnx", vec![("samples", 9)], "If `top_if`"),
        ("scan.onnx", vec![("steps", 5)], "Scan `scan`: 5 iterations"),
        (
            "scan8.onnx",
            vec![("batch", 2), ("steps", 3)],
            "Scan `scan8`: 6 iterations",
        ),
        ("loop_if_short.onnx", vec![], "If `branch.iter4`"),
        (
            "if_unnamed.onnx",
            vec![("samples", 8)],
            "If `inner`: its condition is true",
        ),
    ] {
        let graph = phantom::model::load(&contrib_model(name)).unwrap();
        let inputs = prepared(&graph, &dims);
        let original = OrtRunner::cpu(&lib).unwrap().run(&graph, &inputs).unwrap();
        let resolved = phantom::model::inline::taken_branches(graph.clone(), &inputs).unwrap();
        assert!(
            resolved.notes.iter().any(|n| n.contains(want_note)),
            "{name}: {:?}",
            resolved.notes
        );
        assert!(
            resolved
                .nodes
                .iter()
                .all(|n| !matches!(n.op_type.as_str(), "Loop" | "If" | "Scan")),
            "{name}"
        );
        let reference = ReferenceRunner::default().run(&resolved, &inputs).unwrap();
        for o in &graph.outputs {
            let want = original.values[&o.name].to_f64_array();
            let e = rel_err(&reference.values[&o.name], &want, name);
            assert!(
                e < 1e-6,
                "{name} {}: the resolved model's f64 result is off ORT's by {e:.2e}",
                o.name
            );
        }
    }
}

/// A Loop whose copies would leave an `If` no condition evaluation reaches (150 steps, each condition hanging on
/// every step before it) stays whole, and the reference runs it as it is: the same result as ONNX Runtime's.
#[test]
fn a_loop_whose_unrolled_branches_cannot_all_be_resolved_stays_whole() {
    ensure_runtime();
    let lib = phantom::runner::ort_lib::locate(None, false).unwrap();
    let graph = phantom::model::load(&contrib_model("loop_if_long.onnx")).unwrap();
    let inputs = prepared(&graph, &[]);
    let resolved = phantom::model::inline::taken_branches(graph.clone(), &inputs).unwrap();
    assert!(
        resolved.nodes.iter().any(|n| n.op_type == "Loop"),
        "{:?}",
        resolved.notes
    );
    let original = OrtRunner::cpu(&lib).unwrap().run(&graph, &inputs).unwrap();
    let reference = ReferenceRunner::default().run(&resolved, &inputs).unwrap();
    let e = rel_err(
        &reference.values["h"],
        &original.values["h"].to_f64_array(),
        "loop_if_long",
    );
    assert!(e < 1e-5, "off ORT's by {e:.2e}");
}

/// Mean and standard deviation.
fn moments(t: &Tensor) -> (f64, f64) {
    let a = t.to_f64_array();
    let n = a.len() as f64;
    let mean = a.sum() / n;
    (
        mean,
        (a.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt(),
    )
}

/// A `--target-model` draws what the reference draws: its random ops are replaced by the same seeded hash noise
/// (before, ONNX Runtime drew its own numbers there, and a target model identical to the reference drifted at its
/// first random op).
#[test]
fn a_target_model_draws_the_same_seeded_noise() {
    ensure_runtime();
    let m = contrib_model("random_ops.onnx");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("same.onnx");
    std::fs::copy(&m, &copy).unwrap();
    let args = [
        "--dim",
        "n=64",
        "--seed",
        "7",
        "--target-model",
        copy.to_str().unwrap(),
    ];
    let (code, out, r) = onnx_report(&m, &args);
    assert_eq!(code, 0, "{out}");
    for name in ["noise", "uniform"] {
        let n = (r["nodes"].as_array().unwrap().iter())
            .find(|n| n["name"] == name)
            .unwrap();
        let max_abs = n["values"][0]["metrics"]["max_abs"].as_f64().unwrap();
        assert!(max_abs < 1e-5, "{name}: {max_abs}\n{out}");
    }
}

#[test]
fn random_ops_draw_the_same_seeded_noise_on_both_sides() {
    ensure_runtime();
    let m = contrib_model("random_ops.onnx");
    let (code, out, r) = onnx_report(&m, &["--dim", "n=64"]);
    assert_eq!(code, 0, "{out}");
    let notes = r["notes"].to_string();
    for node in ["RandomNormalLike `noise`", "RandomUniform `uniform`"] {
        assert!(
            notes.contains(&format!("{node}: replaced on both sides")),
            "{notes}"
        );
    }
    let compared = |name: &str| {
        let n = r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .unwrap();
        n["values"][0]["metrics"]["max_abs"].as_f64().unwrap()
    };
    // Both sides draw the same numbers: what is left is fp32 rounding.
    assert!(
        compared("noise") < 1e-5 && compared("uniform") < 1e-6,
        "{out}"
    );
    // The draw has the distribution the node asks for, and the seed decides it.
    let graph = phantom::model::load(&m).unwrap();
    let inputs = prepared(&graph, &[("n", 64)]);
    let draw = |seed: u64| {
        let g = phantom::model::random::seeded(graph.clone(), seed, None).unwrap();
        ReferenceRunner::default().run(&g, &inputs).unwrap().values
    };
    let (a, b) = (draw(0), draw(1));
    let (mean, std) = moments(&a["noise"]);
    assert!(
        (mean - 0.5).abs() < 0.1 && (std - 2.0).abs() < 0.1,
        "normal(0.5, 2): {mean} {std}"
    );
    let u = a["u"].to_f64_array();
    let (lo, hi) = u
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
    assert!(
        lo >= -1.0 && hi < 3.0 && (moments(&a["u"]).0 - 1.0).abs() < 0.1,
        "uniform[-1, 3): {lo} {hi}"
    );
    let diff = rel_err(&b["noise"], &a["noise"].to_f64_array(), "noise");
    assert!(diff > 0.1, "another seed draws other numbers");
    // `phantom run` on ORT draws the same numbers from run to run (ORT's own op would not).
    let run = || {
        let (code, out, err) = crate::common::phantom(&[
            "run",
            m.to_str().unwrap(),
            "--runner",
            "target",
            "--dim",
            "n=64",
        ]);
        assert_eq!(code, 0, "{out}{err}");
        out.lines()
            .filter(|l| l.starts_with("y ") || l.starts_with("u "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let first = run();
    assert!(first.contains("u f32 [64, 64]"), "{first}");
    assert_eq!(first, run());
}

/// `phantom onnx` on contrib model `name` (clean, `unchecked` values left unchecked), then the reference alone on
/// the same default inputs: (terminal output, inputs, reference run).
fn clean_then_reference(name: &str, unchecked: u64) -> (String, Inputs, RunOutput) {
    ensure_runtime();
    let m = contrib_model(name);
    let (code, out, r) = onnx_report(&m, &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["coverage"]["unchecked"], unchecked, "{out}");
    let graph = phantom::model::load(&m).unwrap();
    let inputs = prepared(&graph, &[]);
    let reference = ReferenceRunner::default().run(&graph, &inputs).unwrap();
    (out, inputs, reference)
}

#[test]
fn slice_to_the_end_built_from_a_shape_keeps_every_element() {
    // tract turned the INT64_MAX of a concatenated end into −1 and cut one column too many. Every value is
    // compared: the Slice reads a clamped copy of the bound, and the bound itself is joined by phantom's kernel.
    let (_, _, reference) = clean_then_reference("slice_to_end.onnx", 0);
    assert_eq!(reference.values["z"].shape(), &[1, 2, 16, 16]);
    let ends = reference.values["ends"].to_f64_array();
    assert_eq!(
        ends.iter().copied().collect::<Vec<_>>(),
        vec![16.0, i64::MAX as f64]
    );
}

#[test]
fn shapes_the_data_decides_are_resolved_as_the_run_goes() {
    // A Range as long as the summed durations, arange over that length in float (read back through Shape), and a
    // Slice ending at a NonZero count: tract minted symbols it then could not resolve (VITS voices). Only `row`,
    // which nothing but a Shape reads, is left out of tract's run.
    let (_, inputs, reference) = clean_then_reference("data_dependent.onnx", 1);
    let x: Vec<f64> = inputs.tensors[0].1.to_f64_array().iter().copied().collect();
    let t: f64 = x.iter().map(|v| (2.0 * v.abs()).ceil()).sum();
    let y: Vec<f64> = reference.values["y"]
        .to_f64_array()
        .iter()
        .copied()
        .collect();
    let want: Vec<f64> = (0..t as usize).map(|i| 2.0 * i as f64).collect();
    assert_eq!(y, want);
    let k = x.iter().filter(|v| **v > 0.0).count();
    let z = reference.values["z"].to_f64_array();
    assert_eq!(z.shape(), &[1, k]);
    assert_eq!(z[[0, k - 1]], 2.0 * x[k - 1]);
}

#[test]
fn negative_pads_crop_as_onnx_says() {
    // Pads that crop, on all axes, on chosen axes and computed from a shape: tract's Pad overflowed on them.
    let (_, inputs, reference) = clean_then_reference("negative_pads.onnx", 0);
    let x = inputs.tensors[0].1.to_f64_array();
    // Row 0 is the added row of zeros, row 1 is x's row 0 shifted left by 1 + 2 (negative parts clipped by Relu).
    let y = reference.values["y"].to_f64_array();
    assert_eq!(y.shape(), &[2, 3]);
    let want = [0.0, 0.0, 0.0, x[[0, 3]].max(0.0), x[[0, 4]].max(0.0), 0.0];
    assert_eq!(y.iter().copied().collect::<Vec<_>>(), want);
}

/// A Dropout in training mode (a model exported without `model.eval()`): ORT drops other elements on every run, so
/// it is replaced on both sides by a mask of the seeded hash noise, dropping `ratio` of the elements and scaling the
/// rest by 1 / (1 − ratio) as ONNX defines; before, the reference refused it and every value after it went
/// unchecked.
#[test]
fn a_training_mode_dropout_drops_the_same_elements_on_both_sides() {
    use crate::common::{f32_tensor, node, value, write_model};
    use tract_onnx::pb;
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut drop = node("Dropout", &["x", "ratio", "training"], "y");
    drop.name = "drop".into();
    drop.output.push("mask".into());
    let training = pb::TensorProto {
        name: "training".into(),
        data_type: 9,
        int32_data: vec![1],
        ..Default::default()
    };
    let g = pb::GraphProto {
        name: "dropout".into(),
        node: vec![drop, node("Relu", &["y"], "z")],
        initializer: vec![f32_tensor("ratio", vec![], vec![0.1]), training],
        input: vec![value("x", &[1, 16384])],
        output: vec![value("z", &[1, 16384])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("dropout.onnx"), g, 17);
    let (code, out, r) = onnx_report(&m, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("Dropout `drop` runs in training mode (ratio 0.1)"),
        "{out}"
    );
    assert_eq!(r["coverage"]["unchecked"], 0, "{out}");
    // The mask is an integer comparison of the hash: in fp16 too no element flips (a float uniform against 0.1
    // flipped those within fp16's rounding of it).
    let (code, out, r) = onnx_report(&m, &["--precision", "fp16"]);
    assert_eq!(code, 0, "{out}");
    let mask = crate::common::value_reports(&r)
        .find(|v| v["name"] == "mask")
        .unwrap();
    assert_eq!(
        (&mask["status"], &mask["metrics"]["failed"]),
        (&"pass".into(), &0.into()),
        "{mask}"
    );
    // A tenth of the elements dropped, the rest scaled by 1/0.9, and the mask says which.
    let graph = phantom::model::load(&m).unwrap();
    let inputs = prepared(&graph, &[]);
    let g = phantom::model::random::seeded(graph, 0, None).unwrap();
    let v = ReferenceRunner::default().run(&g, &inputs).unwrap().values;
    let (x, y, mask) = (
        inputs.tensors[0].1.to_f64_array(),
        v["y"].to_f64_array(),
        v["mask"].to_f64_array(),
    );
    let dropped = mask.iter().filter(|&&k| k == 0.0).count() as f64 / 16384.0;
    assert!((dropped - 0.1).abs() < 0.01, "{dropped}");
    for ((x, y), k) in x.iter().zip(&y).zip(&mask) {
        assert!(
            (y - x * k / 0.9).abs() < 1e-6 * x.abs().max(1.0),
            "{x} {y} {k}"
        );
    }
}
