//! Two graphs of one model paired by what they compute (`phantom equiv`, and `phantom onnx --target-model`), on
//! what the tools write: ONNX Runtime's transformer optimizer on a BERT (fp32, and fp16 with `keep_io_types`),
//! ONNX Runtime's extended-level optimization of a timm EfficientNet (FusedConv, QuickGelu, folded BatchNorms),
//! and onnxsim's output of a timm ViT with a bug planted in it (a folded weight changed, two inputs swapped, a
//! wrong Softmax axis). The models are written by `scripts/corpus/make.py` and `scripts/pairs/make.py`.

use std::path::{Path, PathBuf};

use prost::Message;
use tract_onnx::pb;

use crate::common::{ensure_runtime, phantom, read_json, root};
use crate::contrib::onnx_report;

fn data(file: &str) -> PathBuf {
    let dir = if file.starts_with("test_") {
        "pairs"
    } else {
        "corpus"
    };
    root().join("tests/data").join(dir).join(file)
}

/// `phantom equiv A B --json`: (exit code, output, answer).
fn equiv(a: &Path, b: &Path) -> (i32, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("e.json");
    let (code, out, err) = phantom(&[
        "equiv",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(json.exists(), "no answer\n{out}\n{err}");
    (code, format!("{out}\n{err}"), read_json(&json))
}

/// The real transformations pair every value of the transformed model and keep the function.
const SAME: [(&str, &str, &str); 3] = [
    ("optimum_bert.onnx", "ortopt_bert_fp32.onnx", "Attention"),
    ("optimum_bert.onnx", "ortopt_bert_fp16.onnx", "Attention"),
    (
        "test_efficientnet.onnx",
        "test_efficientnet__ort-extended.onnx",
        "FusedConv",
    ),
];

#[test]
fn equiv_says_same_function_for_real_optimizer_outputs() {
    for (a, b, fused_op) in SAME {
        let (code, out, e) = equiv(&data(a), &data(b));
        assert_eq!(code, 0, "{a} → {b}: {out}");
        assert_eq!(e["same_function"], true, "{a} → {b}: {e}");
        let c = &e["counts"];
        let paired = c["paired"].as_u64().unwrap() + c["duplicates"].as_u64().unwrap();
        assert_eq!(
            paired,
            c["transformed_values"].as_u64().unwrap(),
            "{b}: {c}"
        );
        assert!(c["fused"].as_u64().unwrap() >= 10, "{b}: {c}");
        assert_eq!(c["lost"], 0, "{b}: {c}");
        let fused = e["fused"].as_object().unwrap();
        let model = std::fs::read(data(b)).unwrap();
        let graph = pb::ModelProto::decode(model.as_slice())
            .unwrap()
            .graph
            .unwrap();
        let op_of = |node: &str| {
            graph
                .node
                .iter()
                .find(|n| n.name == node)
                .map(|n| n.op_type.clone())
        };
        assert!(
            fused
                .values()
                .any(|n| op_of(n.as_str().unwrap()).as_deref() == Some(fused_op)),
            "{b}: no value inside a {fused_op}: {fused:?}"
        );
    }
}

/// A bug planted into onnxsim's output of a ViT, and the node `equiv` and `onnx --target-model` must name.
enum Bug {
    /// Every other element of a weight scaled by 1.02.
    Weight(&'static str),
    /// Input 0 of the node swapped with input 0 of the first later node reading the value given.
    Swap(&'static str, &'static str),
    /// The node's `axis` set to -2.
    Axis(&'static str),
}

const BUGS: [(Bug, &str, &str); 3] = [
    (
        Bug::Weight("patch_embed.proj.weight"),
        "node_conv2d",
        "weights_differ",
    ),
    (
        Bug::Swap("node_MatMul_49", "add"),
        "node_MatMul_49",
        "node_differs",
    ),
    (
        Bug::Axis("node_Softmax_99"),
        "node_Softmax_99",
        "attribute_differs",
    ),
];

fn planted(bug: &Bug, dst: &Path) {
    let src = data("test_vit__onnxsim.onnx");
    let mut m = pb::ModelProto::decode(std::fs::read(src).unwrap().as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    match *bug {
        Bug::Weight(name) => {
            let t = g.initializer.iter_mut().find(|t| t.name == name).unwrap();
            for c in t.raw_data.chunks_exact_mut(4).step_by(2) {
                let v = f32::from_le_bytes(c.try_into().unwrap()) * 1.02;
                c.copy_from_slice(&v.to_le_bytes());
            }
        }
        Bug::Swap(node, other) => {
            let at = g.node.iter().position(|n| n.name == node).unwrap();
            let later = (at + 1..g.node.len())
                .find(|&k| g.node[k].input[0] == other)
                .unwrap();
            let mine = g.node[at].input[0].clone();
            g.node[at].input[0] = other.into();
            g.node[later].input[0] = mine;
        }
        Bug::Axis(node) => {
            let n = g.node.iter_mut().find(|n| n.name == node).unwrap();
            n.attribute.retain(|a| a.name != "axis");
            n.attribute.push(crate::common::attr_int("axis", -2));
        }
    }
    std::fs::write(dst, m.encode_to_vec()).unwrap();
}

#[test]
fn equiv_names_the_node_where_a_planted_bug_changes_the_function() {
    let dir = tempfile::tempdir().unwrap();
    let clean = data("test_vit__onnxsim.onnx");
    let (code, out, _) = equiv(&clean, &clean);
    assert_eq!(code, 0, "{out}");
    for (bug, node, _) in &BUGS {
        let b = dir.path().join(format!("{node}.onnx"));
        planted(bug, &b);
        let (code, out, e) = equiv(&clean, &b);
        assert_eq!(code, 1, "{node}: {out}");
        assert_eq!(e["same_function"], false, "{node}: {e}");
        assert_eq!(e["divergence"]["node"], *node, "{e}");
    }
}

/// `--model-explorer` writes one overlay per graph: the node where the function changes is marked on the
/// transformed model, the fused-away values on the model.
#[test]
fn equiv_overlays_mark_both_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let bug = dir.path().join("axis.onnx");
    planted(&BUGS[2].0, &bug);
    let out = dir.path().join("me");
    let clean = data("test_vit__onnxsim.onnx");
    let (code, _, _) = phantom(&[
        "equiv",
        clean.to_str().unwrap(),
        bug.to_str().unwrap(),
        "--model-explorer",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    let t = read_json(&out.join("phantom_pairing_transformed.json"));
    let results = &t.as_object().unwrap().values().next().unwrap()["results"];
    assert_eq!(
        results["node_Softmax_99"]["value"], "the function changes here",
        "{t}"
    );
    let (a, b) = (data("optimum_bert.onnx"), data("ortopt_bert_fp32.onnx"));
    let out = dir.path().join("bert");
    let (code, _, _) = phantom(&[
        "equiv",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--model-explorer",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let m = read_json(&out.join("phantom_pairing_model.json")).to_string();
    assert!(m.contains("inside Attention `Attention_0`"), "{m}");
}

#[test]
fn target_model_pairs_an_optimized_graph_by_value() {
    ensure_runtime();
    for (a, b, op) in [SAME[0], SAME[2]] {
        let (code, out, r) = onnx_report(&data(a), &["--target-model", data(b).to_str().unwrap()]);
        assert_eq!(code, 0, "{b}: {out}");
        assert_eq!(r["verdict"]["status"], "clean", "{b}: {out}");
        let c = &r["coverage"];
        assert_eq!(c["unchecked_hiding"], 0, "{b}: {c}");
        assert!(c["compared"].as_u64().unwrap() >= 15, "{b}: {c}");
        let why = format!("fused in the target model into a {op} node");
        assert!(
            c["unchecked_by_reason"].to_string().contains(&why),
            "{b}: {c}"
        );
    }
}

/// The report says how the target model was paired, and `--model-explorer` puts the verdict on the target model's
/// own nodes too (its values renamed back to the file's names).
#[test]
fn target_model_pairing_is_in_the_report_and_over_both_graphs() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let bug = dir.path().join("axis.onnx");
    planted(&BUGS[2].0, &bug);
    let me = dir.path().join("me");
    let clean = data("test_vit__onnxsim.onnx");
    let (code, out, r) = onnx_report(
        &clean,
        &[
            "--target-model",
            bug.to_str().unwrap(),
            "--model-explorer",
            me.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{out}");
    let pairing = &r["target_model"]["pairing"];
    assert_eq!(pairing["diverges_at"], "val_101", "{pairing}");
    let v = read_json(&me.join("target_phantom_verdict.json"));
    let results = &v.as_object().unwrap().values().next().unwrap()["results"];
    let culprit = results["node_Softmax_99"]["value"].as_str().unwrap();
    assert!(
        culprit.starts_with("culprit: attribute_differs"),
        "{culprit}"
    );
    let html = dir.path().join("r.html");
    let (code, out, r) = onnx_report(
        &data("optimum_bert.onnx"),
        &[
            "--target-model",
            data("ortopt_bert_fp32.onnx").to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let fused = r["target_model"]["pairing"]["fused"].as_object().unwrap();
    assert!(fused.values().any(|n| n == "Attention_0"), "{fused:?}");
    // The node table says, per node, what the target model holds of it.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(">in the target model</th>"),
        "no pairing column"
    );
    assert!(
        page.contains("<td>inside Attention_0</td>"),
        "no fused node in the table"
    );
    let renamed = r["target_model"]["pairing"]["renamed"].as_object().unwrap();
    let (held, _) = renamed.iter().find(|(t, _)| !t.contains("::")).unwrap();
    assert!(
        page.contains(&format!("<td>{held}</td>")),
        "{held} not in the table"
    );
}

/// `--pair-by-name` pairs as the names say and nothing else: the fused BERT is then mostly unchecked.
#[test]
fn pair_by_name_pairs_by_name_only() {
    ensure_runtime();
    let target = data("ortopt_bert_fp32.onnx");
    let args = ["--target-model", target.to_str().unwrap(), "--pair-by-name"];
    let (code, out, r) = onnx_report(&data("optimum_bert.onnx"), &args);
    assert_eq!(code, 1, "{out}");
    assert_eq!(r["verdict"]["status"], "incomplete", "{out}");
    assert!(
        r["target_model"]["pairing"].is_null(),
        "{}",
        r["target_model"]
    );
}

#[test]
fn target_model_with_a_planted_bug_blames_the_changed_node() {
    ensure_runtime();
    let dir = tempfile::tempdir().unwrap();
    let clean = data("test_vit__onnxsim.onnx");
    for (bug, node, cause) in &BUGS {
        let b = dir.path().join(format!("{node}.onnx"));
        planted(bug, &b);
        let (code, out, r) = onnx_report(&clean, &["--target-model", b.to_str().unwrap()]);
        assert_eq!(code, 1, "{node}: {out}");
        let culprit = &r["verdict"]["culprits"][0];
        assert_eq!(culprit["node"], *node, "{out}");
        let kinds: Vec<&str> = (culprit["causes"].as_array().unwrap().iter())
            .map(|c| c["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds[0], *cause, "{node}: {kinds:?}\n{out}");
        assert!(
            r["notes"].to_string().contains("different function"),
            "{out}"
        );
    }
}
