//! Text pipelines as skl2onnx writes them (`tests/data/ml/make_text.py`: StringNormalizer, ONNX Runtime's
//! `Tokenizer`, `TfIdfVectorizer`, a linear classifier), run with no flags: the text input is drawn as sentences of
//! the model's own vocabulary, every value is computed in f64 (the tokens too) and compared, and changed IDF
//! weights are found at their node.

use prost::Message;
use tract_onnx::pb;

use crate::common::ensure_runtime;
use crate::contrib::onnx_report;
use crate::ml::ml;

#[test]
fn tfidf_and_count_pipelines_compare_whole_with_no_flags() {
    ensure_runtime();
    for m in ["text_tfidf.onnx", "text_count.onnx"] {
        let (code, out, r) = onnx_report(&ml(m), &[]);
        assert_eq!(code, 0, "{m}: {out}");
        assert_eq!(r["verdict"]["status"], "clean", "{m}: {out}");
        assert_eq!(r["coverage"]["unchecked"], 0, "{m}: {out}");
        let input = &r["inputs"][0];
        assert!(
            input.to_string().contains("sentences of 3 to 8 words"),
            "{m}: {input}"
        );
        let tokens = (r["nodes"].as_array().unwrap().iter())
            .find(|n| n["op_type"] == "Tokenizer")
            .unwrap();
        let kind = tokens["reference"]["kind"].as_str().unwrap();
        assert!(kind.starts_with("f64"), "{m}: {tokens}");
        assert_eq!(tokens["values"][0]["status"], "pass", "{m}: {tokens}");
    }
}

#[test]
fn a_changed_idf_weight_is_drift_at_its_node() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let src = ml("text_tfidf.onnx");
    let mut model = pb::ModelProto::decode(std::fs::read(&src).unwrap().as_slice()).unwrap();
    let g = model.graph.as_mut().unwrap();
    // skl2onnx weighs the counts by a Mul with the IDF vector; an L2 Normalizer follows, so a change that scales
    // every weight alike cancels: each weight is moved by its own factor.
    let mul = g.node.iter().find(|n| n.op_type == "Mul").unwrap().clone();
    let idf = (g.initializer.iter_mut())
        .find(|t| t.name == mul.input[1])
        .unwrap();
    assert!(
        !idf.float_data.is_empty(),
        "the IDF vector is not in float_data"
    );
    for (i, w) in idf.float_data.iter_mut().enumerate() {
        *w *= 1.0 + 0.05 * i as f32;
    }
    let bug = dir.path().join("bug.onnx");
    std::fs::write(&bug, model.encode_to_vec()).unwrap();
    let (code, out, r) = onnx_report(&src, &["--target-model", bug.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(r["verdict"]["status"], "drift", "{out}");
    let culprit = &r["verdict"]["culprits"][0];
    assert_eq!(culprit["node"], mul.name.as_str(), "{out}");
    assert_eq!(culprit["causes"][0]["kind"], "weights_differ", "{out}");
}

/// `phantom equiv A B --json` on four sentences: (exit code, output, answer). One string alone is the same
/// whatever computed it, no evidence of where it came from.: one string alone is the same whatever computed it, no evidence of where it came from.
fn equiv(a: &std::path::Path, b: &std::path::Path) -> (i32, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("e.json");
    let (code, out, err) = crate::common::phantom(&[
        "equiv",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--shape",
        "text=4x1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(json.exists(), "no answer\n{out}\n{err}");
    let answer = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (code, format!("{out}\n{err}"), answer)
}

/// The pipeline with every value between its nodes renamed (`v0`, `v1`, …), and `edit` applied to its nodes.
fn renamed(dst: &std::path::Path, edit: impl Fn(&mut pb::NodeProto)) {
    let src = ml("text_tfidf.onnx");
    let mut model = pb::ModelProto::decode(std::fs::read(&src).unwrap().as_slice()).unwrap();
    let g = model.graph.as_mut().unwrap();
    let outputs: Vec<String> = g.output.iter().map(|o| o.name.clone()).collect();
    let mut names = std::collections::HashMap::new();
    for n in &mut g.node {
        for o in n.output.iter_mut().filter(|o| !outputs.contains(o)) {
            let new = format!("v{}", names.len());
            names.insert(o.clone(), new.clone());
            *o = new;
        }
    }
    for n in &mut g.node {
        for i in &mut n.input {
            if let Some(new) = names.get(i) {
                *i = new.clone();
            }
        }
        edit(n);
    }
    std::fs::write(dst, model.encode_to_vec()).unwrap();
}

/// Strings pair by value like numbers: a copy whose every value is renamed holds all the pipeline's values (the
/// normalized text and the tokens too, none "inside a fused node"), and a normalizer that upper-cases instead of
/// lower-casing is named where the function changes.
#[test]
fn equiv_pairs_string_values_and_names_a_changed_normalizer() {
    let dir = tempfile::tempdir().unwrap();
    let src = ml("text_tfidf.onnx");
    let same = dir.path().join("renamed.onnx");
    renamed(&same, |_| {});
    let (code, out, e) = equiv(&src, &same);
    assert_eq!(code, 0, "{out}");
    assert_eq!(e["same_function"], true, "{e}");
    assert_eq!(e["counts"]["fused"], 0, "{out}");
    assert_eq!(e["counts"]["lost"], 0, "{out}");
    assert_eq!(e["counts"]["held"], 9, "{out}");
    assert_eq!(
        e["counts"]["held"], e["counts"]["reference_values"],
        "{out}"
    );
    let upper = dir.path().join("upper.onnx");
    renamed(&upper, |n| {
        for a in n.attribute.iter_mut() {
            if a.name == "case_change_action" {
                a.s = b"UPPER".to_vec();
            }
        }
    });
    let (code, out, e) = equiv(&src, &upper);
    assert_eq!(code, 1, "{out}");
    assert_eq!(e["same_function"], false, "{e}");
    let d = &e["divergence"];
    let model = pb::ModelProto::decode(std::fs::read(&upper).unwrap().as_slice()).unwrap();
    let normalizer = (model.graph.unwrap().node.into_iter())
        .find(|n| n.op_type == "StringNormalizer")
        .unwrap();
    assert_eq!(d["node"], normalizer.name.as_str(), "{e}");
}
