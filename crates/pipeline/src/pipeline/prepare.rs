//! One preparation for every command: the inputs made one way (dims ONNX Runtime accepts, see [`super::shapes`])
//! and the graph prepared one way (taken branches inlined, random ops seeded). `onnx`, `run`, `record`, `check`,
//! `scan`, `profile`, `reduce`, `bisect`, `plan`/`segment` and `precision` all prepare here, so the same model and
//! flags give the same graph and inputs in every command. `determinism` inlines but does not seed (it looks for
//! the random ops seeding would hide); `check` feeds the inputs its golden record stored.
//!
//! With `PHANTOM_PREPARED_LOG=FILE`, each preparation appends `command sha256-of-the-prepared-graph inputs-hash` to FILE: the
//! tests compare them across commands.

use std::io::Write as _;

use super::{shapes, CompareSettings};
use crate::error::Result;
use crate::model::{self, inputs::InputSpec, inputs::Inputs, Graph};
use crate::runner::ort_lib::{self, Located};

/// The inputs every comparing command feeds, made one way (dims ONNX Runtime accepts, see [`shapes`]), with the
/// ONNX Runtime found for them.
pub fn prepared_inputs(graph: &Graph, s: &CompareSettings) -> Result<(Inputs, Located)> {
    crate::runner::plugins::request(&s.runtime.ep_library)?;
    let lib = ort_lib::locate(s.runtime.ort_lib.as_deref(), s.runtime.no_install)?;
    let inputs = checked_inputs(graph, &s.inputs, Some(&lib), &s.runtime)?;
    Ok((inputs, lib))
}

/// The inputs `spec` makes, checked against ONNX Runtime when a dim was guessed (ORT is found then, not before:
/// a command that runs the reference alone needs it only to settle a guess).
pub fn checked_inputs(
    graph: &Graph,
    spec: &InputSpec,
    lib: Option<&Located>,
    runtime: &super::settings::RuntimeSpec,
) -> Result<Inputs> {
    let inputs = model::inputs::prepare(graph, spec)?;
    if !inputs.has_guesses() {
        return Ok(inputs);
    }
    let found;
    let lib = match lib {
        Some(l) => l,
        None => {
            found = ort_lib::locate(runtime.ort_lib.as_deref(), runtime.no_install)?;
            &found
        }
    };
    shapes::checked(graph, spec, inputs, lib)
}

/// The graph every command compares or runs, prepared one way: the `If`s and `Loop`s these inputs decide resolved
/// (unless `keep_control_flow`), random ops drawing phantom's seeded hash noise. `onnx`, `run`, `record`, `check`,
/// `plan`/`segment` and a `--target-model` cut by a plan all prepare through here (`determinism` inlines alone: it
/// looks for the random ops seeding would hide).
pub fn prepared_graph(
    graph: Graph,
    inputs: &Inputs,
    seed: u64,
    keep_control_flow: bool,
) -> Result<Graph> {
    let graph = match keep_control_flow {
        true => graph,
        false => model::inline::taken_branches(graph, inputs)?,
    };
    model::random::seeded(graph, seed, Some(inputs))
}

/// The graph and inputs a command that is not a comparison runs (`run`, `record`, `scan`, `determinism`): the
/// model at `path` prepared as [`super::prepare`] prepares it for `onnx`. `seed_random: false` leaves random ops
/// drawing their own numbers (`determinism`).
pub fn prepared_model(
    command: &str,
    path: &std::path::Path,
    spec: &InputSpec,
    runtime: &super::settings::RuntimeSpec,
    seed_random: bool,
) -> Result<(Graph, Inputs)> {
    let graph = model::load(path)?;
    let inputs = checked_inputs(&graph, spec, None, runtime)?;
    let graph = match seed_random {
        true => prepared_graph(graph, &inputs, spec.seed, false)?,
        false => model::inline::taken_branches(graph, &inputs)?,
    };
    logged(command, &graph, &inputs);
    Ok((graph, inputs))
}

/// Appends `command graph-sha256 inputs-hash` to `PHANTOM_PREPARED_LOG` when it is set (for the tests that prove
/// every command prepares alike); a log that cannot be written is ignored, as it changes nothing phantom does.
pub fn logged(command: &str, graph: &Graph, inputs: &Inputs) {
    let Some(path) = std::env::var_os("PHANTOM_PREPARED_LOG") else {
        return;
    };
    let mut h = 0u64;
    for (name, t) in &inputs.tensors {
        h = h.rotate_left(7) ^ crate::analysis::determinism::hash(t) ^ name.len() as u64;
    }
    use sha2::Digest;
    let bytes = sha2::Sha256::digest(graph.bytes.as_slice());
    let line = format!("{command} {bytes:x} {h:016x}\n");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}
