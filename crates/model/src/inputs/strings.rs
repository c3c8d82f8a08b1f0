//! Strings for a string input (scikit-learn's categorical features and text): the categories the model itself
//! matches it against (a `OneHotEncoder`'s or `CategoryMapper`'s categories, a `LabelEncoder`'s keys, a
//! `TfIdfVectorizer`'s vocabulary), so every generated element is one the model knows; where a `Tokenizer` cuts
//! the input into words first, each element is a sentence of such words.

use tract_onnx::pb::NodeProto;

use crate::Graph;

/// Attributes that list the strings an op matches its input against.
const CATEGORY_ATTRS: &[&str] = &["cats_strings", "keys_strings", "pool_strings"];

/// What a string input is drawn from: the strings a node matches it against, that node's name, and whether a
/// `Tokenizer` cuts the input into words before (each element is then a sentence of them).
pub(super) struct Categories {
    pub strings: Vec<String>,
    pub node: String,
    pub words: bool,
}

/// The categories the first node reading `input` (through up to six ops) matches it against.
pub(super) fn categories(graph: &Graph, input: &str) -> Option<Categories> {
    let proto = crate::import::decode(graph.bytes.as_slice()).ok()?;
    let file_nodes = &proto.graph.as_ref()?.node;
    let consumers = graph.consumers();
    let mut frontier = vec![(input.to_string(), false)];
    for _ in 0..6 {
        let mut next = vec![];
        for (v, words) in &frontier {
            for &c in consumers.get(v.as_str()).map(Vec::as_slice).unwrap_or(&[]) {
                let n = &graph.nodes[c];
                if let Some(strings) = file_nodes.get(n.source_index).and_then(listed) {
                    let node = n.name.clone();
                    let words = *words;
                    return Some(Categories {
                        strings,
                        node,
                        words,
                    });
                }
                let words = *words || n.op_type == "Tokenizer";
                next.extend(n.outputs.iter().map(|o| (o.clone(), words)));
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
