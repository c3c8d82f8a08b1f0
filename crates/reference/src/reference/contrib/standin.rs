//! Stand-ins for nodes tract cannot type (an op it does not know, such as ORT's `QLinearSigmoid`, a custom op, a
//! `Unique` whose lengths the data decides): so that one such node does not stop the whole comparison, the
//! reference replaces it with `phantom.Unavailable`, whose outputs take the element types and shapes the target's
//! run gave them. Where the target's values of the node are at hand ([`Known::seeds`]), the stand-in hands them on:
//! the node is marked "taken from the target, not computed in f64" (never compared) and everything downstream is
//! computed in f64 from them and compared. Otherwise its evaluation fails with tract's reason, and the evaluator
//! marks the node not computed and everything that depends on it not computable; the rest of the model is compared
//! as usual.

use tract_onnx::pb::{AttributeProto, GraphProto, NodeProto, TensorProto};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};

pub(super) const TABLE: &[Row] = &[Row::new("Unavailable", &Unavailable)];

/// What the target's run says of its values, by ONNX name.
#[derive(Clone, Debug, Default)]
pub struct Known {
    /// Element type and shape of each value the target computed.
    pub facts: std::collections::HashMap<String, (crate::tensor::DType, Vec<usize>)>,
    /// The target's values of the nodes the reference may have to stand in for ([`may_stand_in`]).
    pub seeds: std::collections::HashMap<String, crate::tensor::Tensor>,
}

/// Ops outside ONNX's and ONNX Runtime's domains (custom ops: phantom has no f64 kernels for them), and ops whose
/// output lengths only the data decides: the nodes whose values the target's run keeps for the stand-ins.
pub fn may_stand_in(domain: &str, op: &str) -> bool {
    const BUILT_IN: [&str; 7] = [
        "",
        "ai.onnx",
        "ai.onnx.ml",
        "com.microsoft",
        "com.microsoft.nchwc",
        "ai.onnx.preview",
        "ai.onnx.preview.training",
    ];
    !BUILT_IN.contains(&domain) || matches!(op, "Unique" | "NonMaxSuppression")
}

fn ints(name: &str, v: Vec<i64>) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: 7,
        ints: v,
        ..Default::default()
    }
}

/// Rewrites `n` into a stand-in whose outputs have the facts `known` gives them (floats as f64 where `wide`), and
/// whose evaluation fails with `reason`. `false` (and `n` untouched) when an output has no known facts.
pub fn stand_in(n: &mut NodeProto, known: &Known, wide: bool, reason: &str) -> bool {
    let facts: Option<Vec<&(crate::tensor::DType, Vec<usize>)>> =
        (n.output.iter()).map(|o| known.facts.get(o)).collect();
    let seeds: Option<Vec<TensorProto>> = (n.output.iter())
        .map(|o| Some(crate::model::proto::tensor_to_proto(o, known.seeds.get(o)?)))
        .collect();
    let Some(facts) = facts.filter(|f| !f.is_empty()) else {
        return false;
    };
    let dt = |d: crate::tensor::DType| match d.is_float() && wide {
        true => crate::tensor::DType::F64.onnx_code() as i64,
        false => d.onnx_code() as i64,
    };
    // A node phantom claimed is its own kernel's to type, not tract's.
    let who = match n.op_type.strip_prefix(super::kernel::PREFIX) {
        Some(op) => format!("phantom's f64 kernel cannot type {op} `{}`", n.name),
        None => format!("tract cannot type {} `{}`", n.op_type, n.name),
    };
    // A claimed op keeps its own attributes and names itself, so that its kernel can run on concrete inputs
    // ([`original`]).
    let own = match n.op_type.strip_prefix(super::kernel::PREFIX) {
        Some(op) => {
            let mut kept = std::mem::take(&mut n.attribute);
            kept.retain(|a| !STAND_IN_ATTRS.contains(&a.name.as_str()));
            kept.push(AttributeProto {
                name: ORIGINAL.into(),
                r#type: 3,
                s: op.as_bytes().to_vec(),
                ..Default::default()
            });
            kept
        }
        None => vec![],
    };
    n.attribute = vec![
        ints("types", facts.iter().map(|(d, _)| dt(*d)).collect()),
        ints("ranks", facts.iter().map(|(_, s)| s.len() as i64).collect()),
        ints(
            "dims",
            facts
                .iter()
                .flat_map(|(_, s)| s.iter().map(|&d| d as i64))
                .collect(),
        ),
    ];
    let reason = match seeds {
        Some(tensors) => {
            n.attribute.push(AttributeProto {
                name: "seeds".into(),
                r#type: 10,
                tensors,
                ..Default::default()
            });
            format!("{who} ({reason}): its values are taken from the target, not computed in f64")
        }
        None => format!("{who} ({reason}): it and what depends on it are not computed"),
    };
    n.attribute.push(AttributeProto {
        name: "reason".into(),
        r#type: 3,
        s: reason.into_bytes(),
        ..Default::default()
    });
    n.attribute.extend(own);
    n.op_type = format!("{}Unavailable", super::kernel::PREFIX);
    n.domain.clear();
    true
}

/// Stands in for the node tract's typing error `e` names , with the facts the target's run
/// gave its outputs. `false` where there are none, or the node is a stand-in already.
pub(in crate::reference) fn for_error(
    known: Option<&Known>,
    graph: &crate::model::Graph,
    proto: &mut tract_onnx::pb::ModelProto,
    e: &TractError,
    wide: bool,
) -> bool {
    let (Some(known), Some(g)) = (known, proto.graph.as_mut()) else {
        return false;
    };
    let text = format!("{e:#}");
    if text.contains(super::kernel::INVALID) {
        return false;
    }
    let Some(n) = failing(g, &text, crate::reference::PREFIX) else {
        return false;
    };
    // phantom's own kernel says why in the error's root; tract's message is the chain's last line.
    let own = n.op_type.starts_with(super::kernel::PREFIX);
    let why = match own {
        true => e.root_cause().to_string(),
        false => text.lines().last().unwrap_or(&text).to_string(),
    };
    let reason = crate::reference::humanize(&why, graph);
    // The stand-in's message names the node already: not twice.
    let op = n
        .op_type
        .trim_start_matches(super::kernel::PREFIX)
        .to_string();
    let reason = match reason.split_once("`: ") {
        Some((head, rest)) if own && head.starts_with(&format!("{op} `")) => rest.to_string(),
        _ => reason,
    };
    // A custom op (a library's domain) is none of tract's to know: said as such, not as tract's error.
    let reason = match may_stand_in(&n.domain, "") {
        true => format!(
            "a custom op of domain `{}`: phantom has no f64 kernel for it",
            n.domain
        ),
        false => reason,
    };
    let stood = stand_in(n, known, wide, reason.trim());
    for a in n
        .attribute
        .iter_mut()
        .filter(|a| stood && a.name == "reason")
    {
        a.s = crate::reference::humanize(&String::from_utf8_lossy(&a.s), graph).into_bytes();
    }
    stood
}

/// The node of `g` a typing error's `text` names (tract's name for it: `prefix` and its index), unless it is a
/// stand-in already.
pub fn failing<'g>(g: &'g mut GraphProto, text: &str, prefix: &str) -> Option<&'g mut NodeProto> {
    let at = text.find(prefix)?;
    let digits: String = (text[at + prefix.len()..].chars())
        .take_while(char::is_ascii_digit)
        .collect();
    let name = format!("{prefix}{digits}");
    (g.node.iter_mut()).find(|n| n.name == name && !n.op_type.ends_with("Unavailable"))
}

struct Unavailable;

impl Kernel for Unavailable {
    fn folds(&self) -> bool {
        false
    }

    fn facts(&self, n: &Node, _: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (types, ranks, dims) = (n.ints("types"), n.ints("ranks"), n.ints("dims"));
        let mut at = 0;
        let mut out = vec![];
        for (t, r) in types.iter().zip(&ranks) {
            let r = *r as usize;
            let shape: Vec<usize> = dims
                .get(at..at + r)
                .unwrap_or(&[])
                .iter()
                .map(|&d| d as usize)
                .collect();
            at += r;
            let dt = crate::model::tract::datum_type(crate::tensor::DType::from_onnx(*t as i32));
            out.push((dt, shape));
        }
        Ok(out)
    }

    fn eval(&self, n: &Node, _: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        if let Some(seeds) = (n.proto.attribute.iter()).find(|a| a.name == "seeds") {
            let types = n.ints("types");
            let seeds = seeds.tensors.iter().zip(types);
            return seeds.map(|(p, t)| seed(p, t)).collect();
        }
        anyhow::bail!("{}", reason(n).unwrap_or_default())
    }
}

/// The reason a stand-in carries.
fn reason(n: &Node) -> Option<String> {
    let a = (n.proto.attribute.iter()).find(|a| a.name == "reason")?;
    Some(String::from_utf8_lossy(&a.s).into_owned())
}

/// The attributes a stand-in carries of its own.
const STAND_IN_ATTRS: [&str; 6] = ["types", "ranks", "dims", "seeds", "reason", ORIGINAL];

/// The attribute naming the op a stand-in stands for, when phantom has a kernel for it.
const ORIGINAL: &str = "phantom_original_op";

/// The op stand-in `n` stands for, as its kernel reads it (its own attributes), when phantom has a kernel for it.
pub fn original(n: &Node) -> Option<(Node, &'static dyn Kernel)> {
    let op = (n.proto.attribute.iter()).find(|a| a.name == ORIGINAL)?;
    let op = String::from_utf8_lossy(&op.s).into_owned();
    let kernel = super::kernel_for(&op)?;
    let mut proto = n.proto.clone();
    proto.op_type = format!("{}{op}", super::kernel::PREFIX);
    proto
        .attribute
        .retain(|a| !STAND_IN_ATTRS.contains(&a.name.as_str()));
    Some((Node::new(&proto), kernel))
}

/// Why the values of stand-in `n` are the target's, when they are.
pub fn seeded(n: &Node) -> Option<String> {
    let seeds = n.proto.attribute.iter().any(|a| a.name == "seeds");
    (n.proto.op_type.ends_with("Unavailable") && seeds).then(|| reason(n))?
}

/// One of the target's values as the stand-in hands it on, in the element type its facts give (`onnx`: floats in
/// f64 where the reference runs wide).
fn seed(p: &TensorProto, onnx: i64) -> TractResult<Tensor> {
    let t = crate::model::proto::tensor_from_proto(p, None)?;
    let dt = crate::model::tract::datum_type(crate::tensor::DType::from_onnx(onnx as i32));
    let v = crate::model::tract::to_tract_f64(&t).into_tensor();
    Ok(v.cast_to_dt(dt)?.into_owned())
}
