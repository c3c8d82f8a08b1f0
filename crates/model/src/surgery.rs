//! The one way to derive a model from the user's (cut chunks, nodes run alone, segments and their skeleton, reduce
//! cuts, inlined branches, unrolled loops, host-run nodes, precision conversions, the outputs a runtime exposes):
//! declare its values with [`value_info`] / [`untyped_value`], then [`finish`] it, which applies the validity rules
//! below before it is imported, so a rule real-world graphs need is written once. A runtime that only needs more
//! outputs of the user's own model takes [`with_outputs`], which appends them to the bytes as they are.
//!
//! - IR < 4 lists every initializer among the graph inputs and ONNX Runtime refuses one that is not (old Caffe2
//!   and CNTK exports). A derived model declares only the inputs it is fed, so it is raised to IR 4, where
//!   initializers stand alone; nothing else differs between the two.
//! - `value_info` of values the derived graph no longer computes is dropped: a stale entry is a type or shape
//!   claim about nothing, and ONNX Runtime infers the rest.
//! - Element types of a derived model's outputs are left for the loader to infer: a declared type would be a
//!   guess (Dropout's mask is bool, TopK's indices int64), and a wrong one is refused.
//! - Node names are unique: an inlined branch or function, or an unrolled loop, can bring a second node of a name
//!   ONNX Runtime has seen ("two nodes with same node name"); the later ones get a `_<k>` suffix.
//! - Graph inputs are declared once: an IR < 4 model already lists its initializers among them, so a derived model
//!   that makes an initializer an input would declare it twice, which ONNX Runtime refuses; the first stays.
//!
//! A model built around a new graph (a cut, a node run alone or folded, a body or condition evaluated by itself)
//! takes what it keeps of its source from [`Header`]: the IR version, the opsets and the model's functions, never
//! a copy of the source's graph.

use std::collections::HashSet;
use std::path::Path;

use prost::Message;
use tract_onnx::pb::{
    tensor_shape_proto, type_proto, FunctionProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

use super::{import, Graph};
use crate::error::{Error, Result};

/// The lowest IR version whose initializers need not be graph inputs.
const IR_STANDALONE_INITIALIZERS: i64 = 4;

/// What a model built around a new graph keeps of the model it is derived from.
#[derive(Clone, Debug, Default)]
pub struct Header {
    pub ir_version: i64,
    pub opset_import: Vec<OperatorSetIdProto>,
    /// The model-local functions its nodes may call.
    pub functions: Vec<FunctionProto>,
}

impl Header {
    /// `m`'s IR version, opsets and functions (its graph is not read).
    pub fn of(m: &ModelProto) -> Header {
        Header {
            ir_version: m.ir_version,
            opset_import: m.opset_import.clone(),
            functions: m.functions.clone(),
        }
    }

    /// A header for a graph phantom evaluates by itself under `opset_import` (no functions).
    pub fn with_opsets(opset_import: Vec<OperatorSetIdProto>) -> Header {
        Header {
            ir_version: 8,
            opset_import,
            functions: vec![],
        }
    }

    /// The model of `graph` under this header, by phantom (`producer`), made valid by the rules above: for
    /// [`finish`], or for tract directly.
    pub fn model(&self, producer: &str, graph: GraphProto) -> ModelProto {
        let mut proto = ModelProto {
            ir_version: self.ir_version,
            opset_import: self.opset_import.clone(),
            producer_name: producer.into(),
            producer_version: env!("CARGO_PKG_VERSION").into(),
            functions: self.functions.clone(),
            graph: Some(graph),
            ..Default::default()
        };
        legalize(&mut proto);
        proto
    }
}

/// `proto` made valid by the rules above, then imported under `path`.
pub fn finish(path: &Path, mut proto: ModelProto) -> Result<Graph> {
    legalize(&mut proto);
    let bytes = proto.encode_to_vec();
    import::from_model(path, proto, bytes, true)
}

/// [`finish`] for a model derived from `source`, keeping the optional and sequence types of `source`'s inputs and
/// outputs, which tract's protobuf types drop ([`super::optional::restore`]).
pub fn finish_like(path: &Path, mut proto: ModelProto, source: &Graph) -> Result<Graph> {
    legalize(&mut proto);
    let bytes = proto.encode_to_vec();
    match super::optional::restore(&bytes, &source.bytes) {
        // The types restored are read from the bytes (the decoded model cannot hold them).
        Some(restored) => import::from_bytes(path, restored),
        None => import::from_model(path, proto, bytes, true),
    }
}

/// [`finish`] for a model run at once and named by no report (a cut of the target's chunked run): its bytes are
/// not hashed, and its `sha256` is empty.
pub fn finish_unnamed(path: &Path, mut proto: ModelProto) -> Result<Graph> {
    legalize(&mut proto);
    let bytes = proto.encode_to_vec();
    import::from_model(path, proto, bytes, false)
}

/// Applies the rules above to `proto` in place.
pub fn legalize(proto: &mut ModelProto) {
    proto.ir_version = proto.ir_version.max(IR_STANDALONE_INITIALIZERS);
    let Some(g) = proto.graph.as_mut() else {
        return;
    };
    let computed: HashSet<&str> = g
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    let kept: Vec<ValueInfoProto> = g
        .value_info
        .iter()
        .filter(|v| computed.contains(v.name.as_str()))
        .cloned()
        .collect();
    g.value_info = kept;
    let mut declared = HashSet::new();
    g.input.retain(|i| declared.insert(i.name.clone()));
    unique_node_names(g);
}

/// Renames every node whose (non-empty) name an earlier node of `g` has, appending `_<k>`.
fn unique_node_names(g: &mut GraphProto) {
    let mut seen: HashSet<String> = HashSet::new();
    for n in g.node.iter_mut().filter(|n| !n.name.is_empty()) {
        if seen.insert(n.name.clone()) {
            continue;
        }
        let mut k = 1;
        while seen.contains(&format!("{}_{k}", n.name)) {
            k += 1;
        }
        n.name = format!("{}_{k}", n.name);
        seen.insert(n.name.clone());
    }
}

/// A value that declares its name alone (an output, an outer read): the loader infers its type and shape.
pub fn untyped_value(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_string(),
        ..Default::default()
    }
}

/// A tensor value of ONNX element type `code` (0: unknown, declared by name alone) and, when given, fixed dims.
pub fn value_info(name: &str, code: i32, shape: Option<Vec<usize>>) -> ValueInfoProto {
    if code == 0 {
        return untyped_value(name);
    }
    let shape = shape.map(|dims| TensorShapeProto {
        dim: dims
            .into_iter()
            .map(|d| tensor_shape_proto::Dimension {
                value: Some(tensor_shape_proto::dimension::Value::DimValue(d as i64)),
                ..Default::default()
            })
            .collect(),
    });
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: code,
                shape,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The user's model `bytes` with `names` appended as graph outputs, for a runtime to expose them. Nothing else
/// changes, so the bytes are not decoded: protobuf merges a repeated field written twice, and a model the runtime
/// loads loads with these outputs too (the validity rules of [`finish`] are for models phantom builds).
pub fn with_outputs(bytes: &[u8], names: &[&str]) -> Vec<u8> {
    let extra = ModelProto {
        graph: Some(GraphProto {
            output: names.iter().map(|n| untyped_value(n)).collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut out = bytes.to_vec();
    out.extend_from_slice(&extra.encode_to_vec());
    out
}

/// The value of the original model a target-model name stands for (`x_phantom_fp16_3` → `x`).
pub fn base_name(name: &str) -> &str {
    match name.find("_phantom_") {
        Some(i) => {
            let tail = &name[i + 9..];
            if ["fp16", "bf16", "fp32"].iter().any(|s| tail.starts_with(s)) {
                &name[..i]
            } else {
                name
            }
        }
        None => name,
    }
}

/// The model a graph was loaded from, decoded ([`crate::import::decoded`]).
pub fn decode(g: &Graph) -> Result<ModelProto> {
    crate::import::decoded(g).map_err(|e| Error::MalformedModel {
        path: g.path.clone(),
        reason: e.to_string(),
    })
}

/// Names `g` reads that it neither defines nor takes as inputs (outer-scope reads), nested bodies included, in
/// the order first read.
pub fn outer_reads(g: &GraphProto) -> Vec<String> {
    let mut defined: HashSet<&str> = g
        .input
        .iter()
        .map(|i| i.name.as_str())
        .chain(g.initializer.iter().map(|t| t.name.as_str()))
        .chain(
            g.node
                .iter()
                .flat_map(|n| n.output.iter().map(|o| o.as_str())),
        )
        .collect();
    defined.insert("");
    let mut out: Vec<String> = vec![];
    let mut read = |name: &str| {
        if !defined.contains(name) && !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    };
    for n in &g.node {
        n.input.iter().for_each(|i| read(i));
        for a in &n.attribute {
            for sub in a.g.iter().chain(a.graphs.iter()) {
                outer_reads(sub).iter().for_each(|i| read(i));
            }
        }
    }
    g.output.iter().for_each(|o| read(&o.name));
    out
}

/// What `n` reads: its inputs, then what its bodies read from the enclosing scope (a `Loop`'s weights, an `If`
/// branch's values), without empty names.
pub fn reads(n: &NodeProto) -> Vec<String> {
    let mut out: Vec<String> = n.input.iter().filter(|i| !i.is_empty()).cloned().collect();
    for sub in n
        .attribute
        .iter()
        .flat_map(|a| a.g.iter().chain(a.graphs.iter()))
    {
        for r in outer_reads(sub) {
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use tract_onnx::pb::{GraphProto, NodeProto};

    use super::*;

    #[test]
    fn ir3_is_raised_and_stale_value_info_dropped() {
        let mut proto = ModelProto {
            ir_version: 3,
            graph: Some(GraphProto {
                node: vec![NodeProto {
                    op_type: "Relu".into(),
                    input: vec!["x".into()],
                    output: vec!["y".into()],
                    ..Default::default()
                }],
                value_info: vec![untyped_value("y"), untyped_value("gone")],
                input: vec![value_info("x", 1, Some(vec![2])), untyped_value("x")],
                ..Default::default()
            }),
            ..Default::default()
        };
        legalize(&mut proto);
        assert_eq!(proto.ir_version, 4);
        let names: Vec<&str> = proto
            .graph
            .as_ref()
            .unwrap()
            .value_info
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(names, ["y"]);
        let inputs = &proto.graph.as_ref().unwrap().input;
        assert_eq!(inputs.len(), 1, "an input is declared once");
        assert!(inputs[0].r#type.is_some(), "the first declaration stays");
        proto.ir_version = 9;
        legalize(&mut proto);
        assert_eq!(proto.ir_version, 9, "a newer IR is kept");
    }

    #[test]
    fn node_names_become_unique() {
        let named = |n: &str| NodeProto {
            name: n.into(),
            ..Default::default()
        };
        let mut g = GraphProto {
            node: vec![
                named("a"),
                named("a"),
                named("a_1"),
                named(""),
                named(""),
                named("a"),
            ],
            ..Default::default()
        };
        unique_node_names(&mut g);
        let names: Vec<&str> = g.node.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "a_1", "a_1_1", "", "", "a_2"]);
    }
}
