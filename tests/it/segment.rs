//! Segment-wise comparison: `plan` + `segment --boundary` + every `segment --index I` at once + `merge` gives the
//! whole-model run's verdict, first divergence, culprits and values within rounding; missing pieces are errors
//! that say what to run.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::*;

/// `phantom onnx MODEL ARGS` whole, then the same comparison in `k` segments with every index run at once; both
/// JSON reports and merge's stdout.
fn whole_and_segmented(
    dir: &Path,
    model: &Path,
    k: usize,
    args: &[&str],
) -> (Value, Value, String) {
    let m = model.to_str().unwrap();
    let (whole, merged) = (dir.join("whole.json"), dir.join("merged.json"));
    let plan = dir.join("plan");
    let p = plan.to_str().unwrap();
    let mut onnx = vec!["onnx", m, "--json", whole.to_str().unwrap()];
    onnx.extend_from_slice(args);
    let (code, out, err) = phantom(&onnx);
    assert!(code == 0 || code == 1, "{out}{err}");
    let k_text = k.to_string();
    let mut planned = vec!["plan", m, "-o", p, "--segments", &k_text];
    planned.extend_from_slice(args);
    let (code, out, err) = phantom(&planned);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("in {k} segment(s)")), "{out}");
    let (code, out, err) = phantom(&["segment", p, "--boundary"]);
    assert_eq!(code, 0, "{out}{err}");
    let jobs: Vec<_> = (0..k)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_phantom"))
                .args(["segment", p, "--quiet"])
                .env("SLURM_ARRAY_TASK_ID", i.to_string())
                .output()
        })
        .collect();
    for j in jobs {
        let o = j.unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (code, out, err) = phantom(&["merge", p, "--json", merged.to_str().unwrap()]);
    assert!(code == 0 || code == 1, "{out}{err}");
    (read_json(&whole), read_json(&merged), out)
}

/// Every value by name: (status, max_abs, introduced max_abs, reference mean, one rounding step of the target's
/// type at the value's magnitude).
type Row = (String, String, f64, Option<f64>, f64, f64);

fn values(r: &Value) -> Vec<Row> {
    value_reports(r)
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                v["status"].as_str().unwrap().to_string(),
                // NaN/Inf where the reference is finite: the finite elements' error is no measure.
                match v["metrics"]["nonfinite_mismatch"].as_u64().unwrap_or(0) {
                    0 => v["metrics"]["max_abs"].as_f64().unwrap_or(f64::NAN),
                    _ => f64::INFINITY,
                },
                v["introduced"]["max_abs"].as_f64(),
                v["reference_stats"]["mean"].as_f64().unwrap_or(f64::NAN),
                rounding_step(v),
            )
        })
        .collect()
}

/// The spacing of the target's element type at the value's largest magnitude.
fn rounding_step(v: &Value) -> f64 {
    let eps = match v["target_dtype"].as_str() {
        Some("f16") => 2f64.powi(-10),
        Some("bf16") => 2f64.powi(-7),
        _ => 2f64.powi(-23),
    };
    let s = &v["reference_stats"];
    let scale = s["max"]
        .as_f64()
        .unwrap_or(0.0)
        .abs()
        .max(s["min"].as_f64().unwrap_or(0.0).abs());
    eps * scale
}

/// The same verdict, first divergence, culprits (with their first cause) and failing values; per value the same
/// status, the same f64 reference (bit for bit: boundary values travel in f64) and the target's error within
/// rounding of the whole run's (ONNX Runtime may round differently where a cut changes what it fuses): within
/// 0.1%, or two rounding steps of the target's type.
fn assert_same(whole: &Value, merged: &Value) {
    let (w, m) = (&whole["verdict"], &merged["verdict"]);
    for k in [
        "status",
        "failing_values",
        "outputs_pass",
        "first_divergence",
    ] {
        assert_eq!(w[k], m[k], "verdict `{k}` differs");
    }
    let culprits = |v: &Value| -> Vec<(String, Value)> {
        v["culprits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["node"].as_str().unwrap().to_string(),
                    c["causes"][0]["kind"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(culprits(w), culprits(m));
    let (vw, vm) = (values(whole), values(merged));
    assert_eq!(vw.len(), vm.len());
    for (a, b) in vw.iter().zip(&vm) {
        assert_eq!((&a.0, &a.1), (&b.0, &b.1), "value order or status differs");
        assert!(
            a.4 == b.4 || (a.4.is_nan() && b.4.is_nan()),
            "`{}`: reference mean {} vs {}",
            a.0,
            a.4,
            b.4
        );
        let close = |x: f64, y: f64| {
            x == y || (x - y).abs() <= (1e-3 * x.abs().max(y.abs())).max(2.0 * a.5)
        };
        assert!(
            close(a.2, b.2) || a.1 == "pass",
            "`{}`: max_abs {} vs {}",
            a.0,
            a.2,
            b.2
        );
        if let (Some(x), Some(y)) = (a.3, b.3) {
            assert!(close(x, y), "`{}`: introduced {x} vs {y}", a.0);
        }
    }
}

/// A CNN with a weight fault on the target (`--target-model`, cut at the same nodes): drift at `dwconv3`, the
/// culprit with its cause, and a note that the report was merged.
#[test]
fn a_perturbed_cnn_in_three_segments_merges_into_the_whole_runs_verdict() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.onnx");
    scaled_weights_copy(&model("convnet.onnx"), "c3.w", 1.01, &bad);
    let (whole, merged, out) = whole_and_segmented(
        dir.path(),
        &model("convnet.onnx"),
        3,
        &["--target-model", bad.to_str().unwrap()],
    );
    assert_eq!(whole["verdict"]["status"], "drift");
    assert_eq!(whole["verdict"]["culprits"][0]["node"], "dwconv3");
    assert_same(&whole, &merged);
    assert!(out.contains("merged from 3 segment(s)"), "{out}");
    assert!(
        out.contains("segment 2:") && out.contains("peak RSS"),
        "{out}"
    );
}

/// A transformer encoder in fp16 on ORT CPU, cut in three: clean or not, the same as the whole run; the merged
/// report says that ORT CPU's float32 between its casts is what a cut cannot hand on.
#[test]
fn a_transformer_encoder_in_fp16_segments_like_the_whole_run() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let (whole, merged, _) = whole_and_segmented(
        dir.path(),
        &model("encoder.onnx"),
        3,
        &["--precision", "fp16"],
    );
    assert_same(&whole, &merged);
    let notes = merged["notes"].to_string();
    assert!(
        notes.contains("values handed across cuts are stored in"),
        "{notes}"
    );
    let whole_notes = whole["notes"].to_string();
    assert!(!whole_notes.contains("handed across cuts"), "{whole_notes}");
}

/// An fp16 fault (a LayerNorm epsilon below fp16's range) found as precision-limited with its culprit and cause.
#[test]
fn an_fp16_fault_keeps_its_culprit_and_cause_across_segments() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = root().join("tests/data/fp16/small_epsilon.onnx");
    let (whole, merged, _) = whole_and_segmented(dir.path(), &m, 3, &["--precision", "fp16"]);
    assert_eq!(whole["verdict"]["culprits"][0]["node"], "ln/div");
    assert_same(&whole, &merged);
}

/// NNCF's QDQ RepViT cut (`tests/data/corpus/nncf_repvit_stem.onnx`): the whole run takes ONNX Runtime's levels
/// where they are a faithful rounding, and the boundary pass takes them too, so the levels a segment reads are the
/// ones the comparison adopted. Before, the reference's boundary kept its own levels and the last segment drifted.
#[test]
fn a_quantized_model_in_segments_adopts_the_targets_levels_at_its_boundaries() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = root().join("tests/data/corpus/nncf_repvit_stem.onnx");
    let (whole, merged, out) = whole_and_segmented(dir.path(), &m, 3, &[]);
    assert_eq!(whole["verdict"]["status"], "clean", "{out}");
    assert_same(&whole, &merged);
}

/// Out of order or incomplete: a segment before its boundary values exist, a merge with a report missing, and an
/// index out of range are errors (exit 2) that say what to run.
#[test]
fn missing_boundaries_and_reports_say_what_to_run() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan");
    let p = plan.to_str().unwrap();
    let m = model("convnet.onnx");
    let (code, out, err) = phantom(&["plan", m.to_str().unwrap(), "-o", p, "--segments", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = phantom(&["segment", p, "--index", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("--boundary --index 0"), "{err}");
    let (code, _, err) = phantom(&["segment", p, "--index", "5"]);
    assert_eq!(code, 2);
    assert!(err.contains("out of range"), "{err}");
    let (code, _, err) = phantom(&["segment", p]);
    assert_eq!(code, 2);
    assert!(err.contains("no segment index"), "{err}");
    assert_eq!(phantom(&["segment", p, "--boundary"]).0, 0);
    assert_eq!(phantom(&["segment", p, "--index", "0"]).0, 0);
    let (code, _, err) = phantom(&["merge", p]);
    assert_eq!(code, 2);
    assert!(err.contains("segment(s) 1;"), "{err}");
    let (code, _, err) = phantom(&["plan", m.to_str().unwrap(), "-o", p, "--segments", "2"]);
    assert_eq!(
        code, 2,
        "an existing plan is never overwritten without --force"
    );
    assert!(err.contains("--force"), "{err}");
}

/// A stack of `layers` blocks (MatMul d×d, Relu, residual Add) on x [1, 4, d], its weights in `w.bin` beside the
/// model as external data (deterministic values of about 1/sqrt(d)).
fn external_stack(dir: &Path, layers: usize, d: usize) -> std::path::PathBuf {
    use tract_onnx::pb;
    let mut bin = vec![];
    let (mut nodes, mut inits) = (vec![], vec![]);
    let mut seed = 12345u64;
    let mut x = "x".to_string();
    for l in 0..layers {
        let w = format!("w{l}");
        let offset = bin.len();
        for _ in 0..d * d {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.4 / (d as f32).sqrt();
            bin.extend_from_slice(&v.to_le_bytes());
        }
        let entry = |k: &str, v: String| pb::StringStringEntryProto {
            key: k.into(),
            value: v,
        };
        inits.push(pb::TensorProto {
            name: w.clone(),
            data_type: 1,
            dims: vec![d as i64, d as i64],
            data_location: Some(pb::tensor_proto::DataLocation::External as i32),
            external_data: vec![
                entry("location", "w.bin".into()),
                entry("offset", offset.to_string()),
                entry("length", (d * d * 4).to_string()),
            ],
            ..Default::default()
        });
        let (m, r, o) = (format!("m{l}"), format!("r{l}"), format!("h{l}"));
        nodes.push(node("MatMul", &[&x, &w], &m));
        nodes.push(node("Relu", &[&m], &r));
        nodes.push(node("Add", &[&x, &r], &o));
        x = o;
    }
    std::fs::write(dir.join("w.bin"), bin).unwrap();
    let graph = pb::GraphProto {
        name: "stack".into(),
        node: nodes,
        initializer: inits,
        input: vec![value("x", &[1, 4, d as i64])],
        output: vec![value(&x, &[1, 4, d as i64])],
        ..Default::default()
    };
    write_model(&dir.join("stack.onnx"), graph, 17)
}

/// Weights in external data: the plan names each segment's weights by file and byte range, sizes every value from
/// the structure alone, cuts at the residual stream (one value crosses), and the segmented fp16 run matches the
/// whole one.
#[test]
fn external_weights_are_planned_by_byte_range_and_compared_in_segments() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = external_stack(dir.path(), 6, 64);
    let (whole, merged, _) = whole_and_segmented(dir.path(), &m, 3, &["--precision", "fp16"]);
    assert_same(&whole, &merged);
    let plan = read_json(&dir.path().join("plan/plan.json"));
    let mut ranges = vec![];
    for s in plan["segments"].as_array().unwrap() {
        assert_eq!(
            s["estimate"]["sized_values"], s["estimate"]["values"],
            "{s}"
        );
        for r in s["reads"].as_array().unwrap() {
            assert!(
                r["name"].as_str().unwrap().starts_with('h'),
                "cut off the residual stream: {r}"
            );
        }
        for w in s["weights"].as_array().unwrap() {
            assert_eq!(w["external"]["file"], "w.bin");
            assert_eq!(w["external"]["length"], 64 * 64 * 4);
            ranges.push(w["external"]["offset"].as_u64().unwrap());
        }
    }
    ranges.sort();
    assert_eq!(
        ranges,
        (0..6).map(|l| l * 64 * 64 * 4).collect::<Vec<u64>>()
    );
}

/// A model whose weights, as the reference holds them (in f64: each is under 64 KiB), exceed the memory budget is
/// refused whole (exit 2, naming `phantom plan`), and the
/// same comparison runs in segments that each fit, under the same budget.
#[test]
fn weights_beyond_the_budget_are_refused_whole_and_run_in_segments() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = external_stack(dir.path(), 6, 64);
    let ms = m.to_str().unwrap();
    // Six 64×64 weights: 192 KiB in f64, over a 100 KiB budget; two per segment fit.
    let env = [("PHANTOM_MEMORY_BUDGET", "100KiB")];
    let (code, _, err) = phantom_env(&["onnx", ms], &env);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("weights take 192 KiB as the reference holds them")
            && err.contains("phantom plan"),
        "{err}"
    );
    let plan = dir.path().join("plan");
    let p = plan.to_str().unwrap();
    let steps: [&[&str]; 6] = [
        &["plan", ms, "-o", p, "--segments", "3"],
        &["segment", p, "--boundary"],
        &["segment", p, "--index", "0"],
        &["segment", p, "--index", "1"],
        &["segment", p, "--index", "2"],
        &["merge", p],
    ];
    for args in steps {
        let (code, out, err) = phantom_env(args, &env);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    }
    let (code, _, err) = phantom_env(&["plan", ms, "-o", p, "--segments", "1", "--force"], &env);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = phantom_env(&["segment", p, "--index", "0"], &env);
    assert_eq!(code, 2, "one segment holding every weight is refused too");
    assert!(err.contains("plan more segments"), "{err}");
}

/// `--segment-memory` picks the fewest segments whose jobs' estimated peak fits.
#[test]
fn segment_memory_picks_the_fewest_segments_that_fit() {
    let dir = tempfile::tempdir().unwrap();
    let m = external_stack(dir.path(), 8, 128);
    let plan = dir.path().join("plan");
    let budget: u64 = (64 << 20) + (1 << 20);
    let (code, out, err) = phantom(&[
        "plan",
        m.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
        "--segment-memory",
        &budget.to_string(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let p = read_json(&plan.join("plan.json"));
    let jobs: Vec<u64> = p["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["estimate"]["job_bytes"].as_u64().unwrap())
        .collect();
    assert!(jobs.len() > 1, "{out}");
    assert!(jobs.iter().all(|&j| j <= budget), "{jobs:?}");
    let whole: u64 = jobs.iter().map(|j| j - (64 << 20)).sum::<u64>() + (64 << 20);
    assert!(whole > budget, "one segment would have fit: {jobs:?}");
}

/// Unnamed nodes keep the names phantom gives them in the whole model (`Identity_0`), and a value computed from
/// initializers alone in an earlier segment (BatchNormalization's scale through an Identity, which tract needs as a
/// constant) is embedded as the constant it is.
#[test]
fn unnamed_nodes_and_constants_from_an_earlier_segment_cut_cleanly() {
    use tract_onnx::pb;
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let d = 8;
    let w = |name: &str, k: f32| {
        let data = (0..d * d)
            .map(|i| ((i * 7 % 11) as f32 - 5.0) * k)
            .collect();
        f32_tensor(name, vec![d as i64, d as i64], data)
    };
    let c4 = |name: &str, v: f32| f32_tensor(name, vec![4], vec![v, v * 0.5, v * 2.0, v]);
    let unnamed = |op: &str, inputs: &[&str], out: &str| pb::NodeProto {
        name: String::new(),
        ..node(op, inputs, out)
    };
    let graph = pb::GraphProto {
        name: "unnamed".into(),
        node: vec![
            unnamed("Identity", &["g0"], "gs"),
            unnamed("MatMul", &["x", "w0"], "m0"),
            unnamed("Relu", &["m0"], "r0"),
            unnamed("Add", &["x", "r0"], "h0"),
            unnamed("MatMul", &["h0", "w1"], "m1"),
            unnamed("Relu", &["m1"], "r1"),
            unnamed("Add", &["h0", "r1"], "h1"),
            unnamed(
                "BatchNormalization",
                &["h1", "gs", "beta", "mean", "var"],
                "y",
            ),
        ],
        initializer: vec![
            w("w0", 0.05),
            w("w1", 0.04),
            c4("g0", 1.5),
            c4("beta", 0.1),
            c4("mean", 0.2),
            c4("var", 1.0),
        ],
        input: vec![value("x", &[1, 4, d as i64])],
        output: vec![value("y", &[1, 4, d as i64])],
        ..Default::default()
    };
    let m = write_model(&dir.path().join("unnamed.onnx"), graph, 17);
    let (whole, merged, _) = whole_and_segmented(dir.path(), &m, 3, &[]);
    assert_same(&whole, &merged);
    let names = |r: &Value| -> Vec<String> {
        r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&whole), names(&merged));
    let plan = read_json(&dir.path().join("plan/plan.json"));
    let reads: Vec<&str> = plan["segments"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["reads"].as_array().unwrap().iter())
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        reads.contains(&"gs"),
        "the constant crosses a cut: {reads:?}"
    );
}
