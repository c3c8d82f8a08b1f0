//! Where ONNX Runtime ran each node, read from its placement (the providers and the nodes each ran, from its session
//! log): the provider whose list names the node; for a node no list names, the provider that compiled nodes of its
//! own (the node is inside one of them) when one provider did, else ONNX Runtime's own fusion.

use std::collections::HashSet;

use crate::facts::Placed;

/// `OpType (name)` as ONNX Runtime lists a node → `name`.
fn listed_name(entry: &str) -> Option<&str> {
    entry
        .rsplit_once(" (")
        .map(|(_, r)| r.trim_end_matches(')'))
}

/// Where node `node` of the model (whose node names are `model`) ran, by `placement`: `None` when ONNX Runtime
/// logged no placement.
pub fn ran_on(placement: &[Placed], model: &HashSet<&str>, node: &str) -> Option<String> {
    match placement {
        [] => return None,
        [one] => return Some(one.provider.clone()),
        _ => {}
    }
    let listed = (placement.iter()).find(|p| p.nodes.iter().any(|n| listed_name(n) == Some(node)));
    if let Some(p) = listed {
        return Some(p.provider.clone());
    }
    // Not listed: fused. Where one provider alone lists nodes the model does not have (a compiled subgraph, a
    // fusion), the node is inside one of them.
    let fusing: Vec<&str> = (placement.iter())
        .filter(|p| (p.nodes.iter()).any(|n| listed_name(n).is_none_or(|n| !model.contains(n))))
        .map(|p| p.provider.as_str())
        .collect();
    Some(match fusing.as_slice() {
        [p] => format!("{p}, inside a node it fused"),
        _ => "fused by ONNX Runtime; not in its placement".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(provider: &str, nodes: &[&str]) -> Placed {
        Placed {
            provider: provider.into(),
            count: nodes.len(),
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
        }
    }

    #[test]
    fn a_node_ran_where_its_provider_lists_it_or_inside_what_one_fused() {
        let model: HashSet<&str> = ["a", "b", "c"].into_iter().collect();
        let split = [
            placed("ggml", &["GgmlGraph (ggml_0)"]),
            placed("CPUExecutionProvider", &["MaxPool (b)"]),
        ];
        assert_eq!(
            ran_on(&split, &model, "b").as_deref(),
            Some("CPUExecutionProvider")
        );
        assert_eq!(
            ran_on(&split, &model, "a").as_deref(),
            Some("ggml, inside a node it fused")
        );
        let whole = [placed("CPUExecutionProvider", &[])];
        assert_eq!(
            ran_on(&whole, &model, "c").as_deref(),
            Some("CPUExecutionProvider")
        );
        assert_eq!(ran_on(&[], &model, "c"), None);
    }
}
