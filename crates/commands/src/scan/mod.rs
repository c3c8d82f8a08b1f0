//! `phantom scan`: one f64 reference run, no target — which nodes are numerically fragile before anything is
//! compared. Per value: the largest magnitude and the headroom to fp16's max (65504), the share of non-zero values
//! below fp16's and bf16's smallest normal, NaN/Inf, dead channels (all zero) of 4-D activations, and a log₂
//! magnitude histogram. Per initializer: range, RMS, the outlier ratio (max / RMS), the output channel furthest from
//! the others, and the values the low precision cannot hold. Then the nodes most at risk in the low precision, ranked,
//! with the causes `phantom onnx --precision fp16` would name (the same cause analysis, run on every node as if it
//! were a culprit, keeping the causes its numbers support: overflow, overflow inside, initializer range, epsilon,
//! softmax range, long reductions, cancellation, underflow; a cause about another node — the Sub that cancels, the
//! Add that holds the epsilon — is that node's risk, not its followers'). NaN made only by the low precision (a division by a value
//! it stores as 0) needs the target run: `phantom onnx --precision fp16` finds it.

pub mod render;
mod stats;

use std::collections::HashMap;

use serde::Serialize;

use crate::analysis::causes;
use crate::error::Result;
use crate::model::inputs::{InputSummary, Inputs};
use crate::model::Graph;
use crate::precision::convert::RangeIssue;
use crate::precision::LowPrecision;
use crate::report::model::{Basis, Cause, CauseKind, Culprit};
use crate::runner::reference::ReferenceRunner;
use crate::tensor::Tensor;

pub use render::terminal;
pub use stats::{InitScan, ValueScan};

/// The scan of a model.
#[derive(Clone, Debug, Serialize)]
pub struct Scan {
    pub schema: String,
    pub model: String,
    /// The precision the risks are judged for.
    pub precision: LowPrecision,
    pub inputs: Vec<InputSummary>,
    /// Every computed value, in topological order.
    pub values: Vec<ValueScan>,
    pub initializers: Vec<InitScan>,
    /// Nodes at risk, most at risk first.
    pub risks: Vec<Risk>,
    pub notes: Vec<String>,
}

/// A node at risk in the low precision.
#[derive(Clone, Debug, Serialize)]
pub struct Risk {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
    /// The causes its numbers support, most confident first.
    pub causes: Vec<Cause>,
}

/// Cause kinds a scan can support from the reference's values alone.
const SCANNED: [CauseKind; 9] = [
    CauseKind::Overflow,
    CauseKind::OverflowInside,
    CauseKind::InitializerRange,
    CauseKind::Epsilon,
    CauseKind::SoftmaxRange,
    CauseKind::LongReduction,
    CauseKind::Cancellation,
    CauseKind::Underflow,
    CauseKind::QuantizationRange,
];

/// Runs the reference once and scans every value, initializer and node for `precision`.
pub fn scan(graph: &Graph, inputs: &Inputs, precision: LowPrecision) -> Result<Scan> {
    let mut held: HashMap<String, Tensor> = inputs.tensors.iter().cloned().collect();
    let mut values = vec![];
    let producers = graph.producers();
    let out = ReferenceRunner::default().run_streaming(graph, inputs, &mut |name, value| {
        if let (Ok(t), Some(&i)) = (value, producers.get(name)) {
            values.push(stats::value(&graph.nodes[i], name, &t));
            held.insert(name.to_string(), t);
        }
    })?;
    values.sort_by_key(|v| v.node_index);
    let (initializers, issues) = stats::initializers(graph, precision);
    let risks = risks(graph, &held, &issues, precision);
    let mut notes = out.notes.clone();
    if !out.missing.is_empty() {
        notes.push(format!(
            "{} value(s) the reference could not compute are not scanned",
            out.missing.len()
        ));
    }
    Ok(Scan {
        schema: "phantom-scan/1".into(),
        model: graph.path.display().to_string(),
        precision,
        inputs: inputs.summaries.clone(),
        values,
        initializers,
        risks,
        notes,
    })
}

/// Every node's first output judged as a culprit of the low precision; those with supported causes, ranked.
fn risks(
    graph: &Graph,
    held: &HashMap<String, Tensor>,
    issues: &[RangeIssue],
    precision: LowPrecision,
) -> Vec<Risk> {
    let dtype = precision.dtype();
    let floats = held
        .iter()
        .filter(|(_, t)| t.dtype().is_float())
        .map(|(n, _)| n);
    let weights = graph
        .initializers
        .iter()
        .filter(|(_, i)| i.dtype.is_float())
        .map(|(n, _)| n);
    let rounding: crate::runner::reference::Rounding =
        floats.chain(weights).map(|n| (n.clone(), dtype)).collect();
    let candidates: Vec<Culprit> = graph
        .nodes
        .iter()
        .filter_map(|n| {
            let value = n.outputs.iter().find(|o| held.contains_key(o.as_str()))?;
            Some(Culprit {
                node_index: n.index,
                node: n.name.clone(),
                op_type: n.op_type.clone(),
                value: value.clone(),
                basis: Basis::Ideal,
                max_abs: 0.0,
                noise_ratio: None,
                causes: vec![],
                spoils: vec![],
                path: vec![],
            })
        })
        .collect();
    let ev = causes::Evidence::new(
        graph,
        Some(held as &dyn crate::spill::Values),
        Some(&rounding),
        issues,
        &[],
        &candidates,
    );
    let mut out: Vec<Risk> = candidates
        .iter()
        .filter_map(|c| {
            // A cause about another node (the Sub that cancels, the Add holding the epsilon) is that node's risk.
            let found: Vec<Cause> = causes::explain(c, &ev)
                .into_iter()
                .filter(|k| SCANNED.contains(&k.kind))
                .filter(|k| k.nodes.is_empty() || k.nodes.contains(&c.node))
                .collect();
            (!found.is_empty()).then(|| Risk {
                node_index: c.node_index,
                node: c.node.clone(),
                op_type: c.op_type.clone(),
                value: c.value.clone(),
                causes: found,
            })
        })
        .collect();
    out.sort_by_key(|r| {
        (
            r.causes[0].confidence,
            priority(r.causes[0].kind),
            r.node_index,
        )
    });
    out
}

/// Within one confidence, what breaks a low-precision run first: values that become ±inf, then values that lose
/// all their digits, then slow accumulations.
fn priority(k: CauseKind) -> u8 {
    SCANNED
        .iter()
        .position(|&s| s == k)
        .unwrap_or(SCANNED.len()) as u8
}
