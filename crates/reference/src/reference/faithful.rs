//! ONNX nodes whose tract import computes something other than the ONNX definition (found against the float64
//! oracle). The reference marks them unavailable, with the reason, and taints what depends on them, rather than
//! hand on values that are wrong whatever their precision.
//!
//! - `Attention` with `left_window_size`/`right_window_size` ≥ 0: tract-onnx ignores the sliding window.
//! - `Attention` with `is_causal` and a `past_key`: ONNX aligns the causal mask bottom-right (a query sees the past
//!   and the keys up to its own position); tract-onnx builds the top-left triangle `j ≤ i`.

use std::collections::HashMap;

use tract_onnx::pb::{ModelProto, NodeProto};

use crate::model::Graph;

fn int_attr(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

/// Why tract's import of `n` is not the ONNX definition, if it is not.
fn departure(n: &NodeProto) -> Option<&'static str> {
    if n.op_type != "Attention" || !(n.domain.is_empty() || n.domain == "ai.onnx") {
        return None;
    }
    let window = ["left_window_size", "right_window_size"]
        .iter()
        .any(|w| int_attr(n, w).is_some_and(|v| v >= 0));
    if window {
        return Some(
            "tract ignores Attention's sliding window (left_window_size/right_window_size)",
        );
    }
    let past = n.input.get(4).is_some_and(|p| !p.is_empty());
    if int_attr(n, "is_causal") == Some(1) && past {
        return Some(
            "tract aligns Attention's causal mask top-left; with a past_key cache ONNX aligns it bottom-right",
        );
    }
    None
}

/// ONNX node index → why the reference cannot compute it faithfully.
pub fn unfaithful(graph: &Graph, proto: &ModelProto) -> HashMap<usize, String> {
    let Some(g) = proto.graph.as_ref() else {
        return HashMap::new();
    };
    // Matched by outputs: the widened model's node list is not the file's.
    graph
        .nodes
        .iter()
        .filter(|n| n.op_type == "Attention")
        .filter_map(|n| {
            let p = g
                .node
                .iter()
                .find(|p| p.output == n.outputs && p.op_type == n.op_type)?;
            Some((n.index, departure(p)?.to_string()))
        })
        .collect()
}
