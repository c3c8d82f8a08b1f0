//! Strings for a string input (scikit-learn's categorical features): the categories the model itself matches it
//! against (a `OneHotEncoder`'s or `CategoryMapper`'s categories, a `LabelEncoder`'s keys), so every generated
//! element is one the model knows.

use prost::Message;
use tract_onnx::pb::{ModelProto, NodeProto};

use crate::Graph;

/// Attributes that list the strings an op matches its input against.
const CATEGORY_ATTRS: &[&str] = &["cats_strings", "keys_strings"];

/// The categories the first node reading `input` (through up to six ops) matches it against, and that node's name.
pub(super) fn categories(graph: &Graph, input: &str) -> Option<(Vec<String>, String)> {
    let proto = ModelProto::decode(graph.bytes.as_slice()).ok()?;
    let file_nodes = &proto.graph.as_ref()?.node;
    let consumers = graph.consumers();
    let mut frontier = vec![input.to_string()];
    for _ in 0..6 {
        let mut next = vec![];
        for v in &frontier {
            for &c in consumers.get(v.as_str()).map(Vec::as_slice).unwrap_or(&[]) {
                let n = &graph.nodes[c];
                if let Some(cats) = file_nodes.get(n.source_index).and_then(listed) {
                    return Some((cats, n.name.clone()));
                }
                next.extend(n.outputs.iter().cloned());
            }
        }
        frontier = next;
    }
    None
}

/// The category strings a node lists, if it lists any.
fn listed(n: &NodeProto) -> Option<Vec<String>> {
    let a = n
        .attribute
        .iter()
        .find(|a| CATEGORY_ATTRS.contains(&a.name.as_str()) && !a.strings.is_empty())?;
    Some(
        a.strings
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
    )
}
