//! `phantom profile`: per-node times from ONNX Runtime's profiler that add up to its own run time on a
//! compute-bound model, FLOPs from shapes, a Chrome trace that parses, two profiles compared; wgpu by wall time per
//! node.

use std::path::{Path, PathBuf};

use tract_onnx::pb;

use crate::common::{ensure_runtime, f32_tensor, node, phantom, read_json, value, write_model};

const ROWS: i64 = 1024;
const WIDTH: i64 = 512;

/// Four MatMuls of [1024, 512] × [512, 512] with Relu between: compute dominates the run.
fn matmul_stack(dir: &Path) -> PathBuf {
    let mut nodes = vec![];
    let mut inits = vec![];
    let mut x = "x".to_string();
    for i in 0..4 {
        let w: Vec<f32> = (0..WIDTH * WIDTH)
            .map(|k| ((k * 7 + i) % 13) as f32 / 64.0 - 0.09)
            .collect();
        inits.push(f32_tensor(&format!("w{i}"), vec![WIDTH, WIDTH], w));
        nodes.push(node("MatMul", &[&x, &format!("w{i}")], &format!("mm{i}")));
        nodes.push(node("Relu", &[&format!("mm{i}")], &format!("relu{i}")));
        x = format!("relu{i}");
    }
    let g = pb::GraphProto {
        name: "stack".into(),
        node: nodes,
        initializer: inits,
        input: vec![value("x", &[ROWS, WIDTH])],
        output: vec![value(&x, &[ROWS, WIDTH])],
        ..Default::default()
    };
    write_model(&dir.join("stack.onnx"), g, 17)
}

#[test]
fn node_times_add_up_to_onnx_runtimes_run_and_the_trace_parses() {
    ensure_runtime();
    let tmp = tempfile::tempdir().unwrap();
    let m = matmul_stack(tmp.path());
    let (json, trace) = (tmp.path().join("p.json"), tmp.path().join("t.json"));
    let (code, out, err) = phantom(&[
        "profile",
        m.to_str().unwrap(),
        "--runs",
        "3",
        "--json",
        json.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--model-explorer",
        tmp.path().join("me").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("top nodes by median time") && out.contains("mm0"),
        "{out}"
    );
    let p = read_json(&json);
    profile_adds_up(&p);
    trace_holds_every_run(&read_json(&trace));
    // Model Explorer: per node time, keyed by the graph's name and the node names.
    let me = read_json(&tmp.path().join("me/phantom_time_us.json"));
    let results = me["stack"]["results"].as_object().unwrap();
    for i in 0..4 {
        assert!(
            results[&format!("mm{i}")]["value"].as_f64().unwrap() > 0.0,
            "{me}"
        );
    }
    // A second profile (another optimization level) compared with the first.
    let (code, out, err) = phantom(&[
        "profile",
        m.to_str().unwrap(),
        "--runs",
        "2",
        "--ort-opt-level",
        "disable",
        "--compare",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("B/A") && out.contains("opt disable") && out.contains("opt all"),
        "{out}"
    );
}

/// The profile's figures agree: kernels inside the run, node medians near it, FLOPs and bytes of each MatMul.
fn profile_adds_up(p: &serde_json::Value) {
    assert_eq!(p["schema"], "phantom-profile/1");
    assert_eq!(p["runs"], 3);
    let run = p["run"]["median_us"].as_f64().unwrap();
    let kernels = p["kernels"]["median_us"].as_f64().unwrap();
    let summed: f64 = p["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["time"]["median_us"].as_f64().unwrap())
        .sum();
    // The kernels run inside ORT's run: their times never exceed it. How much of the run they fill depends on
    // how busy the machine is (about 90% quiet, 66% seen while the rest of the suite shares two cores), so the
    // lower bound is loose; what a timed test cannot promise is checked per run in the trace below.
    assert!(
        kernels <= 1.02 * run && kernels >= 0.5 * run,
        "kernels {kernels} µs vs ONNX Runtime's run {run} µs"
    );
    // Each node's median comes from its own run, so their sum drifts from any one run's total on a busy machine.
    assert!(
        summed <= 1.25 * run && summed >= 0.5 * run,
        "node medians {summed} µs vs run {run} µs"
    );
    let matmuls: Vec<&serde_json::Value> = p["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["op_type"] == "MatMul")
        .collect();
    assert_eq!(matmuls.len(), 4, "{:#}", p["nodes"]);
    for n in &matmuls {
        assert_eq!(
            n["flops"].as_f64().unwrap(),
            (2 * ROWS * WIDTH * WIDTH) as f64
        );
        assert!(n["model_node"].is_string());
        assert_eq!(
            n["output_bytes"].as_u64().unwrap(),
            (ROWS * WIDTH * 4) as u64
        );
    }
    assert!(p["peak_memory"].as_u64().unwrap() >= (ROWS * WIDTH * 4) as u64);
    assert!(p["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["provider"] == "CPUExecutionProvider"));
}

/// Every timed run and the warm-up are in the trace, each node inside its run.
fn trace_holds_every_run(t: &serde_json::Value) {
    let events = t["traceEvents"].as_array().unwrap();
    assert!(events
        .iter()
        .all(|e| e["ph"] == "X" && e["ts"].is_u64() && e["dur"].is_u64()));
    assert_eq!(
        events.iter().filter(|e| e["name"] == "model_run").count(),
        3,
        "3 timed runs"
    );
    nodes_lie_inside_their_runs(events);
    assert_eq!(
        events
            .iter()
            .filter(|e| e["name"] == "model_run (warm-up)")
            .count(),
        1
    );
    assert!(events
        .iter()
        .any(|e| e["name"] == "mm3" && e["args"]["op"] == "MatMul"));
}

/// Per timed run of a Chrome trace: every node's event lies inside its run, and they add up to no more than it
/// (and to more than nothing).
fn nodes_lie_inside_their_runs(events: &[serde_json::Value]) {
    let at = |e: &serde_json::Value, k: &str| e[k].as_u64().unwrap();
    for r in events.iter().filter(|e| e["name"] == "model_run") {
        let (start, dur) = (at(r, "ts"), at(r, "dur"));
        let inside: u64 = events
            .iter()
            .filter(|e| e["cat"] == "Node" && (start..start + dur).contains(&at(e, "ts")))
            .map(|e| at(e, "dur"))
            .sum();
        assert!(
            inside <= dur + 8 && inside > 0,
            "nodes {inside} µs in a run of {dur} µs"
        );
    }
}

#[test]
fn the_wgpu_target_is_profiled_per_node_by_wall_time() {
    if !crate::wgpu::have_adapter() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let m = matmul_stack(tmp.path());
    let json = tmp.path().join("p.json");
    let (code, out, err) = phantom(&[
        "profile",
        m.to_str().unwrap(),
        "--ep",
        "wgpu",
        "--runs",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("wall time per node") && out.contains("not reported by this target"),
        "{out}"
    );
    let p = read_json(&json);
    let nodes = p["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 8, "{nodes:?}");
    assert!(
        nodes.iter().all(|n| n["provider"] == "wgpu"),
        "every node ran on the device"
    );
    let run = p["run"]["median_us"].as_f64().unwrap();
    let kernels = p["kernels"]["median_us"].as_f64().unwrap();
    assert!(
        (kernels - run).abs() <= 0.1 * run,
        "kernels {kernels} µs vs run {run} µs"
    );
    let mm = nodes.iter().find(|n| n["name"] == "mm0").unwrap();
    assert_eq!(
        mm["flops"].as_f64().unwrap(),
        (2 * ROWS * WIDTH * WIDTH) as f64
    );
}

#[test]
fn profile_refuses_what_it_cannot_read() {
    ensure_runtime();
    let tmp = tempfile::tempdir().unwrap();
    let m = matmul_stack(tmp.path());
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, b"{\"schema\": \"other\"}").unwrap();
    let (code, _, err) = phantom(&[
        "profile",
        m.to_str().unwrap(),
        "--compare",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a phantom profile"), "{err}");
    let (code, _, err) = phantom(&[
        "profile",
        m.to_str().unwrap(),
        "--json",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is a directory"), "{err}");
}
