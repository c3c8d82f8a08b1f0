//! `phantom determinism`: runs ONNX Runtime N times in fresh sessions and N times in one session, and the f64
//! reference twice, hashing every intermediate; reports each value that changed, the first in topological order,
//! and how far the runs spread. Exit 1 when the target is nondeterministic.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

use super::args::DeterminismArgs;
use super::Outcome;
use crate::analysis::determinism::{Tracker, ValueSpread};
use crate::model::{self, inputs::Inputs, Graph};
use crate::report::json::write_atomic;
use crate::report::terminal::num;
use crate::runner::{
    ort::run_session, ort::OrtRunner, ort_lib, reference::ReferenceRunner, Runner,
};

/// The determinism report (`--json`).
#[derive(Serialize)]
struct Report {
    model: String,
    runs: u32,
    values: usize,
    /// ORT, fresh session per run.
    fresh_sessions: Vec<ValueSpread>,
    /// ORT, repeated runs in one session.
    same_session: Vec<ValueSpread>,
    /// With `--ort-deterministic`: both modes again with deterministic compute on.
    deterministic_compute: Option<(Vec<ValueSpread>, Vec<ValueSpread>)>,
    reference: Vec<ValueSpread>,
    /// Why the reference could not run, when it could not.
    reference_error: Option<String>,
}

fn ort_trackers(
    runner: &OrtRunner,
    graph: &Graph,
    inputs: &Inputs,
    runs: u32,
) -> anyhow::Result<(Tracker, Tracker)> {
    let ok = |v: Vec<(String, Result<crate::tensor::Tensor, String>)>| {
        v.into_iter().filter_map(|(n, t)| Some((n, t.ok()?)))
    };
    let mut fresh = Tracker::default();
    for _ in 0..runs {
        let mut s = runner.instrumented_session(graph)?;
        fresh.add_run(ok(run_session(&mut s, inputs, graph)?));
    }
    let mut same = Tracker::default();
    let mut s = runner.instrumented_session(graph)?;
    for _ in 0..runs {
        same.add_run(ok(run_session(&mut s, inputs, graph)?));
    }
    Ok((fresh, same))
}

fn table(title: &str, list: &[ValueSpread]) -> String {
    if list.is_empty() {
        return format!("{title}: deterministic\n");
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "#",
        "op",
        "node",
        "value",
        "distinct",
        "elements differing",
        "max ulp",
        "max abs",
    ]);
    for v in list {
        t.add_row(vec![
            v.node_index.to_string(),
            v.op_type.clone(),
            v.node.clone(),
            v.value.clone(),
            v.distinct.to_string(),
            v.elements_differing.to_string(),
            v.max_ulp.to_string(),
            num(v.max_abs),
        ]);
    }
    let first = &list[0];
    format!(
        "{title}: {} value(s) vary; first: node #{} {} `{}` → `{}`\n{t}\n",
        list.len(),
        first.node_index,
        first.op_type,
        first.node,
        first.value
    )
}

pub fn run(a: DeterminismArgs) -> anyhow::Result<Outcome> {
    let graph = model::load(&a.model)?;
    let inputs = model::inputs::prepare(&graph, &super::settings::input_spec(&a.inputs)?)?;
    let lib = ort_lib::locate(a.runtime.ort_lib.as_deref(), a.runtime.no_install)?;
    let mut runner = OrtRunner::new(&lib, a.ep, a.ort_opt_level, None)?;
    let (fresh, same) = ort_trackers(&runner, &graph, &inputs, a.runs)?;
    let deterministic_compute = if a.ort_deterministic {
        runner.deterministic = true;
        let (f, s) = ort_trackers(&runner, &graph, &inputs, a.runs)?;
        Some((f.nondeterministic(&graph), s.nondeterministic(&graph)))
    } else {
        None
    };
    let mut reference = Tracker::default();
    let mut reference_error = None;
    for _ in 0..2 {
        match ReferenceRunner::default().run(&graph, &inputs) {
            Ok(out) => reference.add_run(out.values),
            Err(e) => {
                reference_error = Some(e.to_string());
                break;
            }
        }
    }
    let report = Report {
        model: graph.path.display().to_string(),
        runs: a.runs,
        values: fresh.values(),
        fresh_sessions: fresh.nondeterministic(&graph),
        same_session: same.nondeterministic(&graph),
        deterministic_compute,
        reference: reference.nondeterministic(&graph),
        reference_error,
    };
    println!(
        "phantom determinism {} ({} values, {} runs per mode)",
        report.model, report.values, a.runs
    );
    print!(
        "{}",
        table(
            &format!("onnxruntime, {} fresh sessions", a.runs),
            &report.fresh_sessions
        )
    );
    print!(
        "{}",
        table(
            &format!("onnxruntime, {} runs in one session", a.runs),
            &report.same_session
        )
    );
    if let Some((f, s)) = &report.deterministic_compute {
        let before = report.fresh_sessions.len().max(report.same_session.len());
        let after = f.len().max(s.len());
        let verdict = match (before, after) {
            (0, _) => "nothing to fix",
            (b, a) if a < b => "it helped",
            _ => "it did not help",
        };
        println!("with ORT deterministic compute: {before} → {after} varying value(s): {verdict}");
    }
    match &report.reference_error {
        Some(e) => println!(
            "reference (tract f64): could not run ({})",
            e.lines().next().unwrap_or("")
        ),
        None => print!(
            "{}",
            table("reference (tract f64), 2 runs", &report.reference)
        ),
    }
    if let Some(p) = &a.json {
        write_atomic(p, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    let nondeterministic = !report.fresh_sessions.is_empty() || !report.same_session.is_empty();
    Ok(if nondeterministic {
        Outcome::Diverged
    } else {
        Outcome::Clean
    })
}
