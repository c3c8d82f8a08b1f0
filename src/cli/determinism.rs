//! `phantom determinism`: runs the target (`--ep`) N times in fresh sessions and N times in one session, and the f64
//! reference twice, hashing every intermediate; reports each value that changed, the first in topological order,
//! and how far the runs spread. Exit 1 when the target is nondeterministic.

use super::out::{say, sayln};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

use super::args::DeterminismArgs;
use super::Outcome;
use crate::analysis::determinism::{Tracker, ValueSpread};
use crate::golden::Provenance;
use crate::model::{inputs::Inputs, Graph};
use crate::runner::facts::TargetFacts;
use crate::runner::ort_lib::{self, Located};
use crate::runner::reference::ReferenceRunner;
use crate::targets::{self, Capture, TargetSpec};
use crate::units::num;

fn facts_name(spec: &TargetSpec) -> String {
    spec.engine.name().into()
}

/// The determinism report (`--json`).
#[derive(Serialize)]
struct Report {
    model: String,
    /// The target's label (`ort-cpu`, `wgpu`).
    target: String,
    /// What ran.
    ran: Provenance,
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

/// Value trackers of `runs` runs of the target in fresh sessions (the target opened anew each time) and of `runs`
/// runs in one session.
fn trackers(
    spec: &TargetSpec,
    graph: &Graph,
    inputs: &Inputs,
    lib: &Located,
    runs: u32,
) -> anyhow::Result<(Tracker, Tracker, TargetFacts)> {
    let mut fresh = Tracker::default();
    for _ in 0..runs {
        let mut t = targets::open(spec, graph, lib)?;
        fresh.add_run(t.run(graph, inputs, Capture::All)?.values);
    }
    let mut same = Tracker::default();
    let mut t = targets::open(spec, graph, lib)?;
    t.reuse_sessions();
    let mut facts = t.facts(graph);
    for _ in 0..runs {
        let out = t.run(graph, inputs, Capture::All)?;
        facts = out.facts.unwrap_or(facts);
        same.add_run(out.values);
    }
    Ok((fresh, same, facts))
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
    let spec_in = super::settings::input_spec(&a.inputs)?;
    let runtime = super::target_flags::runtime(&a.engine);
    // Prepared as every command does, but random ops deliberately not seeded: finding them is the point.
    let (graph, inputs) =
        crate::pipeline::prepared_model("determinism", &a.model, &spec_in, &runtime, false)?;
    let spec = super::target_flags::one("determinism", &a.engine, a.precision, &[], None)?;
    let rt = &a.engine.runtime;
    let lib = ort_lib::locate(rt.ort_lib.as_deref(), rt.no_install)?;
    let (fresh, same, facts) = trackers(&spec, &graph, &inputs, &lib, a.runs)?;
    let deterministic_compute = match a.ort_deterministic {
        false => None,
        true => {
            let mut det = spec.clone();
            let Some(o) = det.engine.ort_mut() else {
                anyhow::bail!(
                    "--ort-deterministic is an option of ONNX Runtime targets, not of --ep {}",
                    spec.engine.name()
                )
            };
            o.deterministic = true;
            let (f, s, _) = trackers(&det, &graph, &inputs, &lib, a.runs)?;
            Some((f.nondeterministic(&graph), s.nondeterministic(&graph)))
        }
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
        target: spec.label(),
        ran: Provenance::from_facts(&facts_name(&spec), "", &facts, &graph.sha256),
        runs: a.runs,
        values: fresh.values(),
        fresh_sessions: fresh.nondeterministic(&graph),
        same_session: same.nondeterministic(&graph),
        deterministic_compute,
        reference: reference.nondeterministic(&graph),
        reference_error,
    };
    sayln!(
        "phantom determinism {} ({} values, {} runs per mode)",
        report.model,
        report.values,
        a.runs
    );
    sayln!("ran: {} · {}", report.ran.ep, report.ran.ep_used);
    say!(
        "{}",
        table(
            &format!("{}, {} fresh sessions", facts_name(&spec), a.runs),
            &report.fresh_sessions
        )
    );
    say!(
        "{}",
        table(
            &format!("{}, {} runs in one session", facts_name(&spec), a.runs),
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
        sayln!("with ORT deterministic compute: {before} → {after} varying value(s): {verdict}");
    }
    match &report.reference_error {
        Some(e) => sayln!(
            "reference (tract f64): could not run ({})",
            e.lines().next().unwrap_or("")
        ),
        None => say!(
            "{}",
            table("reference (tract f64), 2 runs", &report.reference)
        ),
    }
    if let Some(p) = &a.json.path {
        super::settings::emit_json(p, &report)?;
    }
    let nondeterministic = !report.fresh_sessions.is_empty() || !report.same_session.is_empty();
    Ok(if nondeterministic {
        Outcome::Diverged
    } else {
        Outcome::Clean
    })
}
