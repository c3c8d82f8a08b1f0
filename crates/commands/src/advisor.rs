//! The precision advisor (`phantom precision`): compares the fp16/bf16 conversion with the f64 reference, keeps the
//! culprits (and the nodes their causes name) in fp32, and repeats until the model meets the tolerance or no node
//! is left to keep.

use std::collections::HashSet;

use crate::error::Result;
use crate::model::Graph;
use crate::pipeline::{compare, CompareSettings};
use crate::report::model::{Report, Status};
use crate::report::terminal::verdict_line;

/// What the rounds ended with.
pub struct Advice {
    /// The nodes kept in fp32, in the order they were added.
    pub kept: Vec<String>,
    /// Whether the last round met the tolerance.
    pub met: bool,
}

/// Runs up to `rounds` comparisons of `base` (its one ONNX Runtime target converted, with `keep` and then each
/// round's culprits kept in fp32), saying each round's verdict and choice through `say`. The last round's
/// mixed-precision model is written where `base.save_target_model` says.
pub fn advise(
    base: &CompareSettings,
    graph: &Graph,
    mut keep: Vec<String>,
    rounds: usize,
    mut say: impl FnMut(String),
) -> Result<Advice> {
    for round in 1..=rounds {
        let mut settings = base.clone();
        for t in &mut settings.targets {
            if let Some(o) = t.engine.ort_mut() {
                o.keep_fp32 = keep.clone();
            }
        }
        let (report, _) = compare(&settings)?;
        say(format!(
            "round {round} ({} kept in fp32): {}",
            keep.len(),
            verdict_line(&report)
        ));
        if report.verdict.status == Status::Clean {
            return Ok(Advice {
                kept: keep,
                met: true,
            });
        }
        let next = next_nodes(&report, graph, &keep);
        if next.is_empty() {
            say("no further node to keep: the remaining drift is not tied to a node phantom can keep in fp32".into());
            break;
        }
        say(format!("  keeping in fp32: {}", next.join(", ")));
        keep.extend(next);
    }
    Ok(Advice {
        kept: keep,
        met: false,
    })
}

/// Nodes to keep next: the culprits and the nodes their causes involve; failing that, the first divergence, then
/// the producers of the culprits' inputs.
fn next_nodes(r: &Report, graph: &crate::model::Graph, keep: &[String]) -> Vec<String> {
    let known: HashSet<&str> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    let fresh = |v: Vec<String>| -> Vec<String> {
        let mut seen = HashSet::new();
        v.into_iter()
            .filter(|n| known.contains(n.as_str()) && !keep.contains(n) && seen.insert(n.clone()))
            .collect()
    };
    let mut direct = vec![];
    for c in &r.verdict.culprits {
        direct.push(c.node.clone());
        for k in &c.causes {
            direct.extend(k.nodes.iter().cloned());
        }
    }
    let direct = fresh(direct);
    if !direct.is_empty() {
        return direct;
    }
    if let Some(f) = &r.verdict.first_divergence {
        let f = fresh(vec![f.node.clone()]);
        if !f.is_empty() {
            return f;
        }
    }
    let producers = graph.producers();
    fresh(
        r.verdict
            .culprits
            .iter()
            .flat_map(|c| graph.nodes[c.node_index].inputs.iter())
            .filter_map(|i| producers.get(i.as_str()))
            .map(|&p| graph.nodes[p].name.clone())
            .collect(),
    )
}
