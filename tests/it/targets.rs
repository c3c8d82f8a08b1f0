//! Every command runs exactly the target asked for: a matrix of commands × targets (ONNX Runtime's CPU provider,
//! phantom's wgpu shaders on lavapipe) asserting on the recorded provenance of what ran, and options that do not
//! apply to a target refused with exit 2 naming the option.

use crate::common::*;

/// The targets of the matrix: `--ep` value, what the provenance must name, and whether it can run here.
fn targets() -> Vec<(&'static str, &'static str)> {
    let mut t = vec![("cpu", "CPUExecutionProvider")];
    if crate::wgpu::have_adapter() {
        t.push(("wgpu", "wgpu f32"));
    }
    t
}

#[test]
fn onnx_records_the_target_that_ran() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model("convnet.onnx");
    for (ep, ran) in targets() {
        for extra in [&[][..], &["--max-memory", "64KiB"][..]] {
            let json = dir.path().join(format!("{ep}.json"));
            let mut args = vec!["onnx", m.to_str().unwrap(), "--ep", ep, "--json"];
            args.push(json.to_str().unwrap());
            args.extend_from_slice(extra);
            let (code, out, err) = phantom(&args);
            assert_eq!(code, 0, "{ep} {extra:?}: {out}\n{err}");
            let r = read_json(&json);
            let kind = if ep == "wgpu" { "wgpu" } else { "ort" };
            assert_eq!(r["target"]["details"]["kind"], kind, "{ep} {extra:?}");
            assert_eq!(r["target"]["spec"]["engine"]["kind"], kind);
            let used = format!("{}", r["target"]["details"]);
            let want = if ep == "wgpu" { "llvmpipe" } else { ran };
            assert!(used.contains(want), "{ep} {extra:?}: {used}");
            assert!(r["coverage"]["compared"].as_u64().unwrap() >= 10);
        }
    }
}

#[test]
fn bisect_run_and_determinism_run_the_target_asked() {
    ensure_runtime();
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    for (ep, ran) in targets() {
        let (code, out, err) = phantom(&["onnx", m, "--ep", ep, "--bisect"]);
        assert_eq!(code, 0, "{out}\n{err}");
        let label = if ep == "wgpu" {
            "on wgpu"
        } else {
            "on ort-cpu"
        };
        assert!(out.contains(label), "{out}");
        let (code, out, err) = phantom(&["run", m, "--runner", "target", "--ep", ep]);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains("ran: ") && out.contains(ran), "{ep}: {out}");
        assert!(out.contains("probs f32 [1, 10]"), "{out}");
        let (code, out, err) = phantom(&["determinism", m, "--ep", ep, "--runs", "2"]);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains(ran), "{ep}: {out}");
        let runtime = if ep == "wgpu" { "wgpu" } else { "onnxruntime" };
        assert!(
            out.contains(&format!("{runtime}, 2 fresh sessions")),
            "{out}"
        );
    }
}

#[test]
fn golden_records_and_checks_on_the_target_asked() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    let all = targets();
    for (ep, ran) in &all {
        let g = dir.path().join(format!("golden-{ep}"));
        let (code, out, err) = phantom(&["record", m, "--ep", ep, "-o", g.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}\n{err}");
        let rec = read_json(&g.join("golden.json"));
        let runtime = if *ep == "wgpu" { "wgpu" } else { "onnxruntime" };
        assert_eq!(rec["provenance"]["runtime"], runtime, "{rec}");
        assert!(rec["provenance"]["ep"].as_str().unwrap().contains(ran));
        let kind = if *ep == "wgpu" { "wgpu" } else { "ort" };
        assert_eq!(rec["target"]["engine"]["kind"], kind);
        let (code, out, err) = phantom(&["check", m, "--golden", g.to_str().unwrap(), "--ep", ep]);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains("environment: unchanged"), "{out}");
    }
    if all.len() == 2 {
        // Checking the wgpu record on the CPU says the runtime changed: what ran is what was asked.
        let g = dir.path().join("golden-wgpu");
        let (_, out, err) = phantom(&["check", m, "--golden", g.to_str().unwrap(), "--ep", "cpu"]);
        assert!(out.contains("runtime: wgpu → onnxruntime"), "{out}\n{err}");
    }
}

#[test]
fn options_that_do_not_apply_are_refused() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    let out_model = dir.path().join("mixed.onnx");
    let record = dir.path().join("record");
    let record = record.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["onnx", m, "--accumulate", "f16"], "--accumulate"),
        (
            vec!["onnx", m, "--ep", "wgpu", "--ep-option", "a=1"],
            "--ep-option",
        ),
        (
            vec!["onnx", m, "--ep", "wgpu", "--ort-opt-level", "basic"],
            "--ort-opt-level",
        ),
        (vec!["onnx", m, "--ep", "tpu"], "tensorrt"),
        (
            vec!["onnx", m, "--ep-option", "device_id=0"],
            "CPU provider",
        ),
        (
            vec!["onnx", m, "--ep", "migraphx", "--ep-option", "x=1"],
            "--ep-option",
        ),
        (
            vec!["onnx", m, "--ep", "cpu", "--ep-option", "nokey"],
            "KEY=VALUE",
        ),
        (
            vec![
                "run", m, "--runner", "target", "--ep", "cpu", "--ep", "wgpu",
            ],
            "one target",
        ),
        (
            vec!["record", m, "--ep", "cpu", "--adapter", "x", "-o", record],
            "--adapter",
        ),
        (
            vec!["determinism", m, "--ep", "wgpu", "--ort-deterministic"],
            "--ort-deterministic",
        ),
        (
            vec![
                "precision",
                m,
                "--ep",
                "wgpu",
                "-o",
                out_model.to_str().unwrap(),
            ],
            "--ep wgpu",
        ),
        (
            vec![
                "onnx",
                m,
                "--ep",
                "wgpu",
                "--keep-fp32",
                "x",
                "--precision",
                "fp16",
            ],
            "--keep-fp32",
        ),
        (
            vec!["onnx", m, "--ep", "wgpu", "--target-model", m],
            "--target-model",
        ),
    ];
    for (args, names) in cases {
        if args.contains(&"wgpu") && !crate::wgpu::have_adapter() && args[0] == "determinism" {
            continue;
        }
        let (code, out, err) = phantom(&args);
        assert_eq!(code, 2, "{args:?}: {out}\n{err}");
        assert!(err.contains(names), "{args:?}: {err}");
    }
    assert!(!out_model.exists());
}

/// A provider this machine's ONNX Runtime lacks is an error naming what to install, never a CPU fallback.
#[test]
fn a_missing_provider_says_what_to_install() {
    ensure_runtime();
    let m = model("convnet.onnx");
    let (code, out, err) = phantom(&["onnx", m.to_str().unwrap(), "--ep", "cuda"]);
    if code == 0 || code == 1 {
        // This machine has a working CUDA provider: it must be the one that ran.
        assert!(out.contains("CUDAExecutionProvider"), "{out}");
        return;
    }
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("CUDAExecutionProvider"), "{err}");
    assert!(err.contains("pip install onnxruntime-gpu"), "{err}");
}

/// `phantom run`: the reference computes every value (f64) and prints only the outputs; the target runs plain, or
/// exposing every value with `--all-values` (the same values, in f32: half the bytes); `--all-values` is refused
/// for the reference.
#[test]
fn run_counts_what_each_side_computed() {
    ensure_runtime();
    let m = model("convnet.onnx");
    let m = m.to_str().unwrap();
    let counted = |args: &[&str]| {
        let (code, out, err) = phantom(args);
        assert_eq!(code, 0, "{err}");
        let line = out
            .lines()
            .find(|l| l.contains(" values ("))
            .unwrap()
            .to_string();
        let n: usize = line.split_whitespace().next().unwrap().parse().unwrap();
        let min: f64 = out
            .lines()
            .find(|l| l.starts_with("probs "))
            .unwrap()
            .split(" min ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        (n, line, min)
    };
    let (n_ref, ref_line, ref_min) = counted(&["run", m, "--runner", "reference"]);
    let (n_all, all_line, all_min) = counted(&["run", m, "--runner", "target", "--all-values"]);
    let (n_plain, _, _) = counted(&["run", m, "--runner", "target"]);
    assert_eq!(
        (n_ref, n_all, n_plain),
        (13, 13, 1),
        "{ref_line} / {all_line}"
    );
    assert!(
        ref_line.contains("737 KiB") && all_line.contains("368 KiB"),
        "{ref_line} / {all_line}"
    );
    assert!(
        (ref_min - all_min).abs() < 1e-6 * ref_min.abs(),
        "{ref_min} vs {all_min}"
    );
    let (code, _, err) = phantom(&["run", m, "--runner", "reference", "--all-values"]);
    assert_eq!(code, 2);
    assert!(err.contains("--all-values"), "{err}");
}
