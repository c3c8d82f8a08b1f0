//! `phantom run`: one side only, the f64 reference (every value computed, streamed and dropped) or the target
//! (`--ep`; outputs only, or every value with `--all-values`); prints what ran, each graph output's shape and
//! statistics, and the time taken (also the baselines of the benchmarks). `--dump DIR` writes the outputs as `.npy`.

use super::out::sayln;
use std::time::Instant;

use super::args::{RunArgs, Side};
use super::Outcome;
use crate::golden::Provenance;
use crate::runner::{ort_lib, reference::ReferenceRunner};
use crate::targets::{self, Capture};

pub fn run(a: RunArgs) -> anyhow::Result<Outcome> {
    let spec = super::target_flags::one("run", &a.engine, a.precision, &[], None)?;
    let spec_in = super::settings::input_spec(&a.inputs)?;
    // As `phantom onnx` runs it: the dims ONNX Runtime accepts, Ifs and Loops the inputs decide resolved, random
    // ops drawing phantom's noise.
    let runtime = super::target_flags::runtime(&a.engine);
    let (graph, inputs) =
        crate::pipeline::prepared_model("run", &a.model, &spec_in, &runtime, true)?;
    // Refused before any work when it exists (without --force).
    let mut dump = match &a.dump {
        Some(dir) => Some(crate::pipeline::dump::Dump::create(dir, a.force)?),
        None => None,
    };
    let t = Instant::now();
    // (values, bytes) the run computed; the reference streams them and keeps only the graph outputs.
    let mut computed = (0, 0);
    let out = match a.runner {
        Side::Reference => {
            if a.engine.ep != ["cpu"] || a.precision.low().is_some() || a.all_values {
                anyhow::bail!(
                    "--runner reference runs the f64 reference, which computes every value: --ep, --precision \
                     and --all-values choose what a target runs; add --runner target"
                );
            }
            // Refused with a way forward, not killed by the kernel, when the weights alone exceed the budget.
            crate::pipeline::weights_fit(&graph)?;
            sayln!(
                "ran: tract {} in f64",
                crate::runner::reference::TRACT_VERSION
            );
            reference_outputs(&graph, &inputs, &mut computed)?
        }
        Side::Target => {
            let rt = &a.engine.runtime;
            let lib = ort_lib::locate(rt.ort_lib.as_deref(), rt.no_install)?;
            let mut tg = targets::open(&spec, &graph, &lib)?;
            let capture = if a.all_values {
                Capture::All
            } else {
                Capture::Outputs
            };
            let out = tg.run(&graph, &inputs, capture)?;
            computed = (
                out.values.len(),
                out.values.values().map(|t| t.nbytes()).sum(),
            );
            let facts = out.facts.clone().unwrap_or_else(|| tg.facts(&graph));
            let p = Provenance::from_facts(&tg.name(), &tg.version(), &facts, &graph.sha256);
            sayln!(
                "ran: {} {} · {} · {}",
                p.runtime,
                p.runtime_version,
                p.ep,
                p.ep_used
            );
            out
        }
    };
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if let Some(d) = dump.take() {
        let label = match a.runner {
            Side::Reference => None,
            Side::Target => Some(spec.label()),
        };
        write_outputs(d, &graph, &out, label)?;
    }
    for o in &graph.outputs {
        match out.values.get(&o.name) {
            Some(t) => {
                let f = t.to_f64_array();
                let (lo, hi) = f
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
                        (l.min(v), h.max(v))
                    });
                sayln!("{} {} {:?} min {lo} max {hi}", o.name, t.dtype(), t.shape());
            }
            None => sayln!(
                "{} unavailable: {}",
                o.name,
                out.missing.get(&o.name).map(String::as_str).unwrap_or("?")
            ),
        }
    }
    sayln!(
        "{} values ({}) in {ms:.1} ms",
        computed.0,
        crate::units::fmt_size(computed.1)
    );
    Ok(Outcome::Clean)
}

/// The f64 reference, every value computed and dropped as it arrives except the graph outputs (`phantom run` prints
/// only those); counts the values and their bytes into `computed`.
fn reference_outputs(
    graph: &crate::model::Graph,
    inputs: &crate::model::inputs::Inputs,
    computed: &mut (usize, usize),
) -> crate::Result<crate::runner::RunOutput> {
    let wanted: std::collections::HashSet<&str> =
        graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let (mut values, mut missing) = (std::collections::HashMap::new(), vec![]);
    let mut out = ReferenceRunner::default().run_streaming(graph, inputs, &mut |name, v| {
        if let Ok(t) = &v {
            *computed = (computed.0 + 1, computed.1 + t.nbytes());
        }
        match v {
            Ok(t) if wanted.contains(name) => {
                values.insert(name.to_string(), t);
            }
            Err(why) if wanted.contains(name) => missing.push((name.to_string(), why)),
            _ => {}
        }
    })?;
    out.values = values;
    out.missing.extend(missing);
    Ok(out)
}

/// Writes the graph outputs of one side into `dump`: the reference's (`label` None) or the target's under `label`.
fn write_outputs(
    mut dump: crate::pipeline::dump::Dump,
    graph: &crate::model::Graph,
    out: &crate::runner::RunOutput,
    label: Option<String>,
) -> crate::Result<()> {
    for o in &graph.outputs {
        let why = || {
            out.missing
                .get(&o.name)
                .cloned()
                .unwrap_or_else(|| "not computed".into())
        };
        let value = out.values.get(&o.name);
        match &label {
            None => dump.value(&o.name, &value.cloned().ok_or_else(why), &[]),
            Some(l) => dump.value(
                &o.name,
                &Err("the reference did not run".into()),
                &[(l.clone(), value)],
            ),
        }
    }
    dump.finish()
}
