//! The kernel's quirks, each checked against onnxruntime-extensions 0.15.2 on ONNX Runtime 1.31.1.

use tract_onnx::pb::{AttributeProto, NodeProto};

use super::*;

const VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n,\n!\nab\n##c\n";

fn node(extra: Vec<AttributeProto>) -> Node {
    let mut attribute = vec![AttributeProto {
        name: "vocab_file".into(),
        s: VOCAB.as_bytes().to_vec(),
        ..Default::default()
    }];
    attribute.extend(extra);
    Node::new(&NodeProto {
        op_type: "BertTokenizer".into(),
        domain: "ai.onnx.contrib".into(),
        output: [
            "input_ids",
            "token_type_ids",
            "attention_mask",
            "offset_mapping",
        ]
        .map(String::from)
        .to_vec(),
        attribute,
        ..Default::default()
    })
}

fn run(n: &Node, texts: &[&str]) -> Vec<Vec<i64>> {
    let x = tract_ndarray::Array1::from(texts.iter().map(|t| t.to_string()).collect::<Vec<_>>())
        .into_dyn();
    let out = tokenize(n, &x).unwrap();
    out.iter()
        .map(|t| {
            t.to_plain_array_view::<i64>()
                .unwrap()
                .iter()
                .copied()
                .collect()
        })
        .collect()
}

#[test]
fn one_sentence_has_its_ids_types_mask_and_the_kernel_s_offsets() {
    let out = run(&node(vec![]), &["Hello, world!"]);
    assert_eq!(out[0], [2, 5, 7, 6, 8, 3]);
    assert_eq!(out[1], [0; 6]);
    assert_eq!(out[2], [1; 6]);
    assert_eq!(out[3], [0, 0, 0, 5, 6, 7, 8, 13, 14, 15, 0, 0]);
}

#[test]
fn wordpiece_keeps_the_pieces_found_before_an_unknown_rest() {
    let out = run(&node(vec![]), &["abcd"]);
    assert_eq!(out[0], [2, 9, 10, 1, 3], "ab ##c [UNK]");
}

#[test]
fn a_pair_is_typed_zero_then_one_and_its_offsets_shift_a_row() {
    let out = run(&node(vec![]), &["Hello", "world!"]);
    assert_eq!(out[0], [2, 5, 3, 6, 8, 3]);
    assert_eq!(out[1], [0, 0, 0, 1, 1, 1]);
    assert_eq!(out[3], [0, 0, 0, 5, 0, 0, 0, 0, 0, 5, 6, 7]);
}

#[test]
fn max_length_cuts_one_sentence_only_above_two() {
    let max = |v: i64| AttributeProto {
        name: "max_length".into(),
        i: v,
        ..Default::default()
    };
    assert_eq!(run(&node(vec![max(2)]), &["hello world hello"])[0].len(), 5);
    let out = run(&node(vec![max(4)]), &["hello world hello"]);
    assert_eq!(out[0], [2, 5, 6, 3]);
    assert_eq!(
        out[3],
        [0, 0, 0, 5, 6, 11, 12, 17],
        "offsets are not cut: [SEP] reads the next token's"
    );
}

#[test]
fn lower_casing_and_accents_follow_the_kernel_s_tables() {
    assert_eq!(to_lower('Q' as u32), 'q' as u32);
    assert_eq!(to_lower('×' as u32), '×' as u32);
    assert_eq!(
        to_lower('Α' as u32),
        'Α' as u32,
        "Greek Α is not in the table"
    );
    assert_eq!(to_lower('Π' as u32), 'π' as u32);
    assert_eq!(strip_accent('é' as u32), 'e' as u32);
    assert_eq!(strip_accent('ÿ' as u32), 'y' as u32);
    let s = settings(&node(vec![])).unwrap();
    assert_eq!(
        basic(&s, "Ça\u{7}va"),
        [vec!['ç' as u32, 'a' as u32, 'v' as u32, 'a' as u32]]
    );
}

#[test]
fn three_strings_are_refused() {
    let x = tract_ndarray::Array1::from(vec!["a".to_string(); 3]).into_dyn();
    assert!(tokenize(&node(vec![]), &x).is_err());
}
