//! Stand-ins for nodes tract cannot type (an op it does not know, such as ORT's `QLinearSigmoid`): so that one
//! unknown node does not stop the whole comparison, the reference replaces it with `phantom.Unavailable`, whose
//! outputs take the element types and shapes the target's run gave them and whose evaluation fails with tract's
//! reason. The evaluator then marks the node not computed and everything that depends on it not computable; the
//! rest of the model is compared as usual.

use tract_onnx::pb::{AttributeProto, GraphProto, NodeProto};
use tract_onnx::prelude::*;

use super::{Fact, Kernel, Node};

pub const OPS: &[&str] = &["Unavailable"];

/// Element type and shape of each value the target computed, by ONNX name.
pub type Known = std::collections::HashMap<String, (crate::tensor::DType, Vec<usize>)>;

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
        (n.output.iter()).map(|o| known.get(o)).collect();
    let Some(facts) = facts.filter(|f| !f.is_empty()) else {
        return false;
    };
    let dt = |d: crate::tensor::DType| match d.is_float() && wide {
        true => crate::tensor::DType::F64.onnx_code() as i64,
        false => d.onnx_code() as i64,
    };
    // A node phantom claimed is its own kernel's to type, not tract's.
    let who = match n.op_type.strip_prefix(super::PREFIX) {
        Some(op) => format!("phantom's f64 kernel cannot type {op} `{}`", n.name),
        None => format!("tract cannot type {} `{}`", n.op_type, n.name),
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
        AttributeProto {
            name: "reason".into(),
            r#type: 3,
            s: format!("{who} ({reason}): it and what depends on it are not computed").into_bytes(),
            ..Default::default()
        },
    ];
    n.op_type = format!("{}Unavailable", super::PREFIX);
    n.domain.clear();
    true
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
        let reason = (n.proto.attribute.iter()).find(|a| a.name == "reason");
        anyhow::bail!(
            "{}",
            reason
                .map(|a| String::from_utf8_lossy(&a.s).into_owned())
                .unwrap_or_default()
        )
    }
}

pub fn kernel(op: &str) -> Option<&'static dyn Kernel> {
    (op == "Unavailable").then_some(&Unavailable as &dyn Kernel)
}
