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
