//! Integer size arithmetic computed in float (`Cast(int→float) → Div → Ceil → Cast(→int)`): found so that the
//! converter keeps it in float32.

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::GraphProto;

use crate::model::types::{BFLOAT16, FLOAT, FLOAT16};

/// Nodes that compute in float on values cast from integers — size arithmetic such as `Cast(int→float) → Div →
/// Ceil → Cast(→int)` — with nothing but small constants besides: float16 cannot hold integers above 2048
/// exactly, so these stay float32.
pub(super) fn integer_arithmetic(g: &GraphProto, types: &HashMap<String, i32>) -> HashSet<usize> {
    let small: HashSet<&str> = g
        .initializer
        .iter()
        .filter(|t| crate::tensor::onnx_elements(&t.dims).is_some_and(|n| n <= 16))
        .map(|t| t.name.as_str())
        .chain(
            g.node
                .iter()
                .filter(|n| n.op_type == "Constant")
                .flat_map(|n| n.output.iter().map(String::as_str)),
        )
        .collect();
    let is_int = |v: &str| {
        types
            .get(v)
            .is_some_and(|&t| t != FLOAT && t != FLOAT16 && t != BFLOAT16 && t != 11)
    };
    let mut derived: HashSet<String> = HashSet::new();
    let mut nodes: HashSet<usize> = HashSet::new();
    loop {
        let before = nodes.len();
        for (i, n) in g.node.iter().enumerate() {
            if nodes.contains(&i) || n.op_type == "Constant" {
                continue;
            }
            let float_out = n.output.iter().any(|o| types.get(o) == Some(&FLOAT));
            if !float_out {
                continue;
            }
            let hit = if n.op_type == "Cast" {
                n.input.first().is_some_and(|v| is_int(v))
            } else {
                let floats: Vec<&String> = n
                    .input
                    .iter()
                    .filter(|v| !v.is_empty() && types.get(*v) == Some(&FLOAT))
                    .collect();
                floats.iter().any(|v| derived.contains(*v))
                    && floats
                        .iter()
                        .all(|v| derived.contains(*v) || small.contains(v.as_str()))
            };
            if hit {
                nodes.insert(i);
                derived.extend(n.output.iter().cloned());
            }
        }
        if nodes.len() == before {
            return nodes;
        }
    }
}
