//! Wiring tract's plan to ONNX names for a reference run, and accounting for the run afterwards: which ONNX node
//! each tract node computes and which value each of its outputs carries, which outputs tract keeps, which nodes it
//! folded into narrow constants at import, and the run's output once every value went to the sink.

use std::collections::{HashMap, HashSet};

use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::konst::Const;

use super::{hook, ref_err, symbols, PREFIX, TRACT_VERSION};
use crate::error::Result;
use crate::model::Graph;
use crate::{RefPrecision, RunOutput};

/// The index of the ONNX node tract calls `phantomN` (or `phantomN.suffix` for its expansions).
fn onnx_index(tract_name: &str) -> Option<usize> {
    let rest = tract_name.strip_prefix(PREFIX)?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// ONNX nodes whose values tract folded into f32 or f16 constants while importing (computed in the model's own
/// precision), marked reduced-precision; `names` are the values `typed` outputs, in order.
pub(super) fn folded_at_import(
    graph: &Graph,
    typed: &TypedModel,
    names: &[String],
    producers: &HashMap<&str, usize>,
) -> HashMap<usize, RefPrecision> {
    let mut precision: HashMap<usize, RefPrecision> = HashMap::new();
    for (i, o) in typed.outputs.iter().enumerate() {
        let node = typed.node(o.node);
        if let (Some(k), Some(&p)) = (node.op_as::<Const>(), producers.get(names[i].as_str())) {
            let is_constant_op = graph.nodes[p].op_type == "Constant";
            let narrow = matches!(k.val().datum_type(), DatumType::F32 | DatumType::F16);
            if !is_constant_op && narrow {
                let reason = format!(
                    "constant-folded by tract in {:?} at import",
                    k.val().datum_type()
                )
                .to_lowercase();
                hook::mark(&mut precision, Some(p), RefPrecision::Reduced { reason });
            }
        }
    }
    precision
}

/// tract node id → (output slot, ONNX value name) of every value `model` outputs (`names`, in order).
pub(super) fn labels_of(
    model: &TypedModel,
    names: &[String],
) -> HashMap<usize, Vec<(usize, String)>> {
    let mut labels: HashMap<usize, Vec<(usize, String)>> = HashMap::new();
    for (outlet, name) in model.outputs.iter().zip(names) {
        labels
            .entry(outlet.node)
            .or_default()
            .push((outlet.slot, name.clone()));
    }
    labels
}

/// Makes the graph's outputs (and the values that define symbols) the outputs of `t64`, so tract runs only what
/// they depend on; a graph none of whose outputs tract exposes keeps every value as an output. A `ZipMap`'s input
/// stands for its output (tract never sees the ZipMap).
pub(super) fn keep_graph_outputs(
    graph: &Graph,
    t64: &mut TypedModel,
    names: &[String],
) -> Result<()> {
    let zipped = graph
        .nodes
        .iter()
        .filter(|n| n.op_type == "ZipMap")
        .filter_map(|n| n.inputs.first());
    let mut graph_outputs: Vec<OutletId> = graph
        .outputs
        .iter()
        .map(|o| &o.name)
        .chain(zipped)
        .filter_map(|o| names.iter().position(|n| n == o).map(|i| t64.outputs[i]))
        .collect();
    if !graph_outputs.is_empty() {
        graph_outputs.extend(symbols::definers(t64));
        t64.select_output_outlets(&graph_outputs)
            .map_err(|e| ref_err(graph, "selecting outputs of", e))?;
    }
    Ok(())
}

/// tract node → ONNX node: by phantom's name prefix, else by the ONNX value its first output carries (tract names
/// some nodes after their op, e.g. every `If` is called "If").
pub(super) fn onnx_nodes(
    model: &TypedModel,
    producers: &HashMap<&str, usize>,
) -> HashMap<usize, usize> {
    model
        .nodes
        .iter()
        .filter_map(|n| {
            let by_label = || {
                let label = model.outlet_label(OutletId::new(n.id, 0))?;
                producers.get(label).copied()
            };
            Some((n.id, onnx_index(&n.name).or_else(by_label)?))
        })
        .collect()
}

/// The run's output once every value went to the sink: the values tract never produced (pruned: not `emitted`;
/// or not exposed: not in `names`), how nodes were computed other than in f64, `notes` and details.
pub(super) fn run_output(
    graph: &Graph,
    names: &[String],
    emitted: &HashSet<String>,
    precision: HashMap<usize, RefPrecision>,
    notes: Vec<String>,
) -> RunOutput {
    let mut out = RunOutput {
        notes,
        ..Default::default()
    };
    for name in names {
        if !emitted.contains(name.as_str()) {
            out.missing.insert(
                name.clone(),
                "tract pruned it: no graph output depends on it".into(),
            );
        }
    }
    for (i, p) in precision {
        if p != RefPrecision::F64 {
            if let Some(n) = graph.nodes.get(i) {
                out.precision.insert(n.name.clone(), p);
            }
        }
    }
    let unexposed: HashSet<&str> = names.iter().map(|s| s.as_str()).collect();
    for v in graph.computed_values() {
        if !unexposed.contains(v) {
            out.missing
                .insert(v.to_string(), "tract does not expose this value".into());
        }
    }
    out.details.insert(
        "precision".into(),
        "f64 (typed model, f32/f16 translated)".into(),
    );
    out.details.insert("tract".into(), TRACT_VERSION.into());
    out
}
