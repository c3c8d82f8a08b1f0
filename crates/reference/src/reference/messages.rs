//! The reference's errors in the model's own words: tract's internal node names (`phantomN`, `phantomN.suffix` for
//! its expansions) rewritten back to the ONNX node's op and name, with what to do next.

use super::PREFIX;
use crate::error::Error;
use crate::model::Graph;

/// Rewrites tract's internal node names in a message back to ONNX node names and ops.
/// The ONNX name of the node tract calls `phantomN` (or `phantomN.suffix` for its expansions).
pub(super) fn onnx_name(tract_name: &str, graph: &Graph) -> String {
    let index = tract_name
        .strip_prefix(PREFIX)
        .map(|t| t.split(|c: char| !c.is_ascii_digit()).next().unwrap_or(""))
        .and_then(|d| d.parse::<usize>().ok());
    match index.and_then(|i| graph.nodes.get(i)) {
        Some(n) => n.name.clone(),
        None => tract_name.to_string(),
    }
}

pub(super) fn humanize(msg: &str, graph: &Graph) -> String {
    let mut out = String::new();
    let mut rest = msg;
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + PREFIX.len()..];
        let end = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        match tail[..end]
            .parse::<usize>()
            .ok()
            .and_then(|i| graph.nodes.get(i))
        {
            // Already quoted after its op (a kernel's "LinearClassifier `phantom3`"): the name alone.
            Some(n) if out.ends_with('`') && tail[end..].starts_with('`') => out.push_str(&n.name),
            Some(n) => out.push_str(&format!("{} node `{}`", n.op_type, n.name)),
            None => out.push_str(PREFIX),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

pub(super) fn ref_err(graph: &Graph, stage: &str, e: impl std::fmt::Display) -> Error {
    Error::Reference {
        reason: format!(
            "{stage} {}: {}\n  hint: if an op is unsupported, compare a model without it or report the op to phantom",
            graph.path.display(),
            humanize(&format!("{e:#}"), graph)
        ),
    }
}
