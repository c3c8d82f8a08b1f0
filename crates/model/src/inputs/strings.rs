//! Strings for a string input (scikit-learn's categorical features and text): the categories the model itself
//! matches it against (a `OneHotEncoder`'s or `CategoryMapper`'s categories, a `LabelEncoder`'s keys, a
//! `TfIdfVectorizer`'s vocabulary), so every generated element is one the model knows; where a `Tokenizer` cuts
//! the input into words first, each element is a sentence of such words. A tokenizer onnxruntime-extensions writes
//! into the graph (`BertTokenizer`, `WordpieceTokenizer`, `BasicTokenizer` in `ai.onnx.contrib`) reads sentences of
//! its vocabulary's whole words (its `vocab_file` or `vocab`: neither `##` continuations nor `[CLS]`-like specials).

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
                let file_node = file_nodes.get(n.source_index);
                if let Some(strings) = file_node.and_then(listed) {
                    let node = n.name.clone();
                    let words = *words;
                    return Some(Categories {
                        strings,
                        node,
                        words,
                    });
                }
                if let Some(strings) = file_node.and_then(vocabulary) {
                    let node = n.name.clone();
                    return Some(Categories {
                        strings,
                        node,
                        words: true,
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

/// onnxruntime-extensions' tokenizers whose vocabulary is an attribute.
const TOKENIZERS: &[&str] = &["BertTokenizer", "WordpieceTokenizer", "BasicTokenizer"];

/// The whole words of a tokenizer's vocabulary: its `vocab_file` (one token a line) or `vocab` (the same, or a
/// JSON object keyed by token), without `##` continuations and bracketed specials.
fn vocabulary(n: &NodeProto) -> Option<Vec<String>> {
    if n.domain != "ai.onnx.contrib" || !TOKENIZERS.contains(&n.op_type.as_str()) {
        return None;
    }
    let a = (n.attribute.iter()).find(|a| a.name == "vocab_file" || a.name == "vocab")?;
    let text = String::from_utf8_lossy(&a.s);
    let tokens: Vec<String> =
        match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text) {
            Ok(map) => map.keys().cloned().collect(),
            Err(_) => text.lines().map(|l| l.trim().to_string()).collect(),
        };
    let special = |t: &str| t.starts_with('[') && t.ends_with(']');
    let whole: Vec<String> = (tokens.into_iter())
        .filter(|t| !t.is_empty() && !t.starts_with("##") && !special(t))
        .filter(|t| !t.chars().any(char::is_whitespace))
        .collect();
    (!whole.is_empty()).then_some(whole)
}

#[cfg(test)]
mod tests {
    use tract_onnx::pb::AttributeProto;

    use super::*;

    fn tokenizer(attr: &str, text: &str) -> NodeProto {
        NodeProto {
            op_type: "BertTokenizer".into(),
            domain: "ai.onnx.contrib".into(),
            attribute: vec![AttributeProto {
                name: attr.into(),
                s: text.as_bytes().to_vec(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_tokenizer_s_whole_words_are_its_vocabulary() {
        let n = tokenizer("vocab_file", "[PAD]\n[UNK]\nthe\nmodel\n##s\nruns\n\n");
        assert_eq!(vocabulary(&n).unwrap(), ["the", "model", "runs"]);
        let n = tokenizer("vocab", r###"{"[CLS]": 0, "gpu": 1, "##ing": 2}"###);
        assert_eq!(vocabulary(&n).unwrap(), ["gpu"]);
        let mut other = tokenizer("vocab_file", "the");
        other.domain = "custom".into();
        assert!(
            vocabulary(&other).is_none(),
            "only onnxruntime-extensions' tokenizers"
        );
        assert!(vocabulary(&tokenizer("vocab_file", "[PAD]\n##s")).is_none());
    }
}
