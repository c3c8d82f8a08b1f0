//! A profile for people and tools: the terminal summary (top nodes and op types), the Chrome trace (opens in
//! Perfetto or chrome://tracing), and the comparison of two saved profiles.

use crate::report::explorer::{Datum, Overlay};
use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

use super::Profile;
use crate::runner::trace::Run;

fn ms(us: f64) -> String {
    format!("{:.3} ms", us / 1000.0)
}

fn rate(f: Option<f64>) -> String {
    f.map(|x| format!("{:.2}", x / 1e9))
        .unwrap_or_else(|| "-".into())
}

/// The terminal summary: what ran, the run time against the kernels', memory, the top nodes and op types.
pub fn terminal(p: &Profile, top: usize) -> String {
    let mut s = format!("phantom profile {} on {} ({})\n", p.model, p.target, p.ran);
    let _ = writeln!(
        s,
        "run: median {} (min {}) over {} run(s); kernels {} ({:.0}% of the run); peak memory {}; {:.3} GFLOP ({:.2} GFLOP/s)",
        ms(p.run.median_us),
        ms(p.run.min_us),
        p.runs,
        ms(p.kernels.median_us),
        100.0 * p.kernels.median_us / p.run.median_us.max(f64::MIN_POSITIVE),
        p.peak_memory
            .map(|m| format!("{:.1} MiB (ONNX Runtime's arena)", m as f64 / 1048576.0))
            .unwrap_or_else(|| "not reported by this target".into()),
        p.total_flops / 1e9,
        p.total_flops / (p.run.median_us.max(f64::MIN_POSITIVE) * 1e-6) / 1e9
    );
    let mut nodes: Vec<_> = p.nodes.iter().collect();
    nodes.sort_by(|a, b| b.time.median_us.total_cmp(&a.time.median_us));
    let _ = writeln!(
        s,
        "\ntop nodes by median time:\n  {:<40} {:<18} {:>10} {:>10} {:>6} {:>9}",
        "node", "op", "median", "min", "share", "GFLOP/s"
    );
    for n in nodes.iter().take(top) {
        let _ = writeln!(
            s,
            "  {:<40} {:<18} {:>10} {:>10} {:>5.1}% {:>9}",
            n.name,
            n.op_type,
            ms(n.time.median_us),
            ms(n.time.min_us),
            100.0 * n.share,
            rate(n.flops_per_s)
        );
    }
    let _ = writeln!(
        s,
        "\nop types:\n  {:<24} {:>5} {:>10} {:>6} {:>9}",
        "op", "nodes", "median", "share", "GFLOP/s"
    );
    for o in p.ops.iter().take(top) {
        let r = (o.flops > 0.0 && o.median_us > 0.0).then(|| o.flops / (o.median_us * 1e-6));
        let _ = writeln!(
            s,
            "  {:<24} {:>5} {:>10} {:>5.1}% {:>9}",
            o.op_type,
            o.nodes,
            ms(o.median_us),
            100.0 * o.share,
            rate(r)
        );
    }
    for n in &p.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// A Chrome trace of the runs: each run and each kernel as a complete (`X`) event.
pub fn chrome_trace(runs: &[Run], p: &Profile) -> Value {
    let mut events = vec![];
    for (i, r) in runs.iter().enumerate() {
        let label = if i == 0 {
            "model_run (warm-up)"
        } else {
            "model_run"
        };
        events.push(json!({ "name": label, "cat": "Session", "ph": "X", "ts": r.ts, "dur": r.total_us, "pid": 1, "tid": 1 }));
        for k in &r.kernels {
            events.push(json!({
                "name": k.node, "cat": "Node", "ph": "X", "ts": k.ts, "dur": k.dur_us, "pid": 1, "tid": 2,
                "args": { "op": k.op_type, "provider": k.provider },
            }));
        }
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": { "model": p.model, "target": p.target, "ran": p.ran },
    })
}

/// Two profiles side by side: run times, then the op types and nodes whose median time changed most.
pub fn compare(a: &Profile, b: &Profile, top: usize) -> String {
    let mut s = format!(
        "A: {} on {} ({})\nB: {} on {} ({})\n",
        a.model, a.target, a.ran, b.model, b.target, b.ran
    );
    let ratio = |x: f64, y: f64| {
        if x > 0.0 {
            format!("{:.2}×", y / x)
        } else {
            "-".into()
        }
    };
    let _ = writeln!(
        s,
        "run median: A {} · B {} · B/A {}",
        ms(a.run.median_us),
        ms(b.run.median_us),
        ratio(a.run.median_us, b.run.median_us)
    );
    let ops_b: HashMap<&str, f64> = b
        .ops
        .iter()
        .map(|o| (o.op_type.as_str(), o.median_us))
        .collect();
    let _ = writeln!(s, "\nop types (A → B):");
    for o in a.ops.iter().take(top) {
        let bt = ops_b.get(o.op_type.as_str()).copied().unwrap_or(0.0);
        let _ = writeln!(
            s,
            "  {:<24} {:>10} → {:>10}  {}",
            o.op_type,
            ms(o.median_us),
            ms(bt),
            ratio(o.median_us, bt)
        );
    }
    let nodes_b: HashMap<&str, f64> = b
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.time.median_us))
        .collect();
    let mut moved: Vec<(&str, f64, f64)> = a
        .nodes
        .iter()
        .filter_map(|n| {
            Some((
                n.name.as_str(),
                n.time.median_us,
                *nodes_b.get(n.name.as_str())?,
            ))
        })
        .collect();
    moved.sort_by(|x, y| (y.2 - y.1).abs().total_cmp(&(x.2 - x.1).abs()));
    let _ = writeln!(s, "\nnodes in both, largest change first:");
    for (n, x, y) in moved.iter().take(top) {
        let _ = writeln!(
            s,
            "  {:<40} {:>10} → {:>10}  {}",
            n,
            ms(*x),
            ms(*y),
            ratio(*x, *y)
        );
    }
    let only = |p: &Profile, q: &Profile| {
        p.nodes
            .iter()
            .filter(|n| !q.nodes.iter().any(|m| m.name == n.name))
            .count()
    };
    let _ = writeln!(s, "\nnodes only in A: {}; only in B: {} (ONNX Runtime fuses and renames differently across versions, providers and levels)", only(a, b), only(b, a));
    s
}

/// A profile's overlays: median time per node (µs) and its share of the run, for the nodes ONNX Runtime kept
/// under the model's names (`graph` is the model profiled).
pub fn overlays(p: &super::Profile, graph: &crate::model::Graph) -> Vec<Overlay> {
    let first_output: std::collections::HashMap<&str, &str> = graph
        .nodes
        .iter()
        .filter_map(|n| Some((n.name.as_str(), n.outputs.first()?.as_str())))
        .collect();
    let kept = |f: &dyn Fn(&super::NodeProfile) -> f64| {
        p.nodes
            .iter()
            .filter_map(|n| {
                let v = first_output.get(n.model_node.as_deref()?)?;
                Some((v.to_string(), Datum::Number(f(n)), None))
            })
            .collect::<Vec<_>>()
    };
    vec![
        Overlay {
            file: "phantom_time_us.json".into(),
            values: kept(&|n| n.time.median_us),
            thresholds: vec![],
            gradient: vec!["#ffffff", "#ffcc80", "#e53935"],
        },
        Overlay {
            file: "phantom_time_share.json".into(),
            values: kept(&|n| n.share),
            thresholds: vec![
                (0.01, "#ffffff"),
                (0.05, "#fff59d"),
                (0.2, "#ffab91"),
                (f64::MAX, "#e53935"),
            ],
            gradient: vec![],
        },
    ]
}
