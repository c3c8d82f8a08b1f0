//! Guessed image sizes checked against ONNX Runtime before the comparison: when nothing in the model says how
//! large an image input is, phantom's first guess (320×320) is run once on ORT's CPU provider; if ORT rejects it, the
//! sizes real models use are tried in turn ([`IMAGE_SIZES`]) and the first that runs is kept, said in the report.
//! Sequence lengths guessed from a dim's name (128), and unnamed dims left at 1, get the lengths real models use
//! ([`LENGTHS`]) the same way. A run that still fails names the inputs, the dims phantom chose and the flags that set
//! them.

use crate::error::{Error, Result};
use crate::model::dims::{spatial_axes, GUESSED_LENGTH, IMAGE_SIZES, LENGTHS};
use crate::model::inputs::{self, InputSpec, InputSummary, Inputs};
use crate::model::Graph;
use crate::runner::ort_lib::Located;
use crate::targets::{self, Capture, TargetSpec};

/// `inputs`, or inputs of the first image size or sequence length ONNX Runtime accepts when they were guessed.
pub fn checked(graph: &Graph, spec: &InputSpec, inputs: Inputs, lib: &Located) -> Result<Inputs> {
    if !inputs.has_guesses() {
        return Ok(inputs);
    }
    let cpu = TargetSpec::ort_cpu();
    let mut ort = targets::open(&cpu, graph, lib)?;
    let first = match ort.run(graph, &inputs, Capture::Outputs) {
        Ok(_) => return Ok(inputs),
        Err(Error::Ort { reason }) => reason,
        Err(e) => e.to_string(),
    };
    for (s, said) in candidates(graph, spec, &inputs) {
        let mut candidate = inputs::prepare(graph, &s)?;
        if ort.run(graph, &candidate, Capture::Outputs).is_ok() {
            for sm in candidate.summaries.iter_mut() {
                // Said on the inputs whose shape the accepted size changed (not on a scalar beside them).
                let before = inputs.summaries.iter().find(|o| o.name == sm.name);
                if before.is_none_or(|o| o.shape != sm.shape) {
                    sm.dims_from.retain(|d| !d.contains(GUESSED_LENGTH));
                    sm.dims_from.push(said.clone());
                }
            }
            candidate
                .summaries
                .iter_mut()
                .for_each(|sm| sm.dims_from.dedup());
            return Ok(candidate);
        }
    }
    Err(with_dims_hint(
        Error::Ort { reason: first },
        &inputs.summaries,
    ))
}

/// The input settings to try, each with what to say when it runs: image sizes, then sequence lengths.
fn candidates(graph: &Graph, spec: &InputSpec, inputs: &Inputs) -> Vec<(InputSpec, String)> {
    let mut out = vec![];
    if !inputs.guessed_images.is_empty() {
        for (h, w) in IMAGE_SIZES {
            let mut s = spec.clone();
            for name in &inputs.guessed_images {
                if let Some(shape) = resized(graph, inputs, name, (h, w)) {
                    s.shapes.insert(name.clone(), shape);
                }
            }
            out.push((
                s,
                format!("{h}x{w}: ONNX Runtime rejected 320x320, accepted this"),
            ));
        }
    }
    for len in LENGTHS
        .iter()
        .filter(|_| !inputs.guessed_lengths.is_empty())
    {
        let mut s = spec.clone();
        for sym in &inputs.guessed_lengths {
            s.dims.insert(sym.clone(), *len as i64);
        }
        let syms = inputs.guessed_lengths.join("`, `");
        out.push((
            s,
            format!("`{syms}` = {len}: ONNX Runtime rejected 128, accepted this"),
        ));
    }
    out.extend(unnamed(spec, inputs));
    out
}

/// Unnamed dims defaulted to 1, each sequence length in turn: each dim alone first (an audio model's sample axis
/// beside a state whose unnamed axis really is 1), then all of them at once.
fn unnamed(spec: &InputSpec, inputs: &Inputs) -> Vec<(InputSpec, String)> {
    let axes = &inputs.guessed_axes;
    let mut groups: Vec<&[(String, usize)]> = axes.chunks(1).collect();
    if axes.len() > 1 {
        groups.push(axes);
    }
    let mut out = vec![];
    for group in groups {
        for &len in &LENGTHS {
            let mut s = spec.clone();
            for (name, axis) in group {
                let Some((_, t)) = inputs.tensors.iter().find(|(n, _)| n == name) else {
                    continue;
                };
                let shape = s
                    .shapes
                    .entry(name.clone())
                    .or_insert_with(|| t.shape().to_vec());
                if let Some(d) = shape.get_mut(*axis) {
                    *d = len;
                }
            }
            let which: Vec<String> = group.iter().map(|(n, a)| format!("{n} axis {a}")).collect();
            let said = format!(
                "{} = {len}: ONNX Runtime rejected 1, accepted this",
                which.join(", ")
            );
            out.push((s, said));
        }
    }
    out
}

/// The shape of input `name` with its spatial dims set to `(h, w)`.
fn resized(
    graph: &Graph,
    inputs: &Inputs,
    name: &str,
    (h, w): (usize, usize),
) -> Option<Vec<usize>> {
    let info = graph.inputs.iter().find(|i| i.name == name)?;
    let (ha, wa) = spatial_axes(info)?;
    let (_, t) = inputs.tensors.iter().find(|(n, _)| n == name)?;
    let mut shape = t.shape().to_vec();
    shape[ha] = h;
    shape[wa] = w;
    Some(shape)
}

/// A runtime error with the dims phantom chose for the inputs, and how to set them.
pub fn with_dims_hint(e: Error, summaries: &[InputSummary]) -> Error {
    let chosen: Vec<String> = summaries
        .iter()
        .flat_map(|s| s.dims_from.iter().map(move |d| format!("{} {d}", s.name)))
        .collect();
    if chosen.is_empty() {
        return e;
    }
    let hint = format!(
        "\n  hint: phantom chose these input dims: {}; if the model needs other sizes, set them with --dim NAME=VALUE \
         or --shape INPUT=1x3xHxW (any rank: D1xD2x…)",
        chosen.join("; ")
    );
    match e {
        Error::Ort { reason } => Error::Ort {
            reason: reason + &hint,
        },
        Error::Reference { reason } => Error::Reference {
            reason: reason + &hint,
        },
        Error::Wgpu { reason } => Error::Wgpu {
            reason: reason + &hint,
        },
        other => other,
    }
}
