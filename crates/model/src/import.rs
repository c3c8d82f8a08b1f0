//! Reads an ONNX file into a [`Graph`], tolerating what real-world files do: unsorted node lists, IR 3
//! initializers repeated in `graph.input`, external data, other domains, `-1` and symbolic dims, and values
//! hidden inside `If`/`Loop`/`Scan` bodies (listed, not captured).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use prost::Message;
use sha2::{Digest, Sha256};
use tract_onnx::pb::{self, type_proto, GraphProto, ModelProto};

use super::{Dim, Graph, HiddenValue, InitInfo, Node, ValueInfo};
use crate::error::{Error, Result};
use crate::tensor::formats::Format;
use crate::tensor::DType;
use order::sort_nodes;

mod order;

/// Loads and imports the model at `path`.
pub fn load(path: &Path) -> Result<Graph> {
    // Protobuf caps a message at 2 GiB; weights beyond that live in external data files.
    let bytes = crate::error::read_bounded(path, 2 << 30, "model")?;
    from_bytes(path, bytes)
}

/// Decodes model bytes; `path` is used for messages and to resolve external data.
pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Graph> {
    // The digest is taken on a second thread while the protobuf is decoded.
    let (sha256, model) = std::thread::scope(|s| {
        let digest = s.spawn(|| format!("{:x}", Sha256::digest(&bytes)));
        let model = decode_model(path, &bytes);
        let sha256 = digest.join().unwrap_or_default();
        (sha256, model)
    });
    let mut g = build(path, model?, bytes)?;
    g.sha256 = sha256;
    Ok(g)
}

/// [`from_bytes`] without the bytes' SHA-256 (left empty): for models no report names.
pub fn from_bytes_unhashed(path: &Path, bytes: Vec<u8>) -> Result<Graph> {
    let model = decode_model(path, &bytes)?;
    build(path, model, bytes)
}

/// The graph of `model`, a model phantom built, encoded as `bytes`: imported from the model itself, not decoded
/// again. With `hashed`, the bytes' SHA-256 is taken (else left empty, as [`from_bytes_unhashed`]).
pub fn from_model(path: &Path, model: ModelProto, bytes: Vec<u8>, hashed: bool) -> Result<Graph> {
    let sha256 = match hashed {
        true => format!("{:x}", Sha256::digest(&bytes)),
        false => String::new(),
    };
    let mut g = build(path, model, bytes)?;
    g.sha256 = sha256;
    Ok(g)
}

/// The graph of the decoded `model`, whose encoding is `bytes`.
fn build(path: &Path, mut model: ModelProto, bytes: Vec<u8>) -> Result<Graph> {
    let sha256 = String::new();
    // tract's protobuf types drop optional types: an `optional(tensor)` value is read as its tensor.
    let optional = super::optional::tensor_types(&bytes);
    // Model-local functions become nodes of the graph before anything reads it (both runtimes run the result).
    let inlined = super::functions::inline(&mut model, &bytes).map_err(|r| malformed(path, r))?;
    let bytes = match inlined {
        Some(_) => model.encode_to_vec(),
        None => bytes,
    };
    let graph = checked_graph(path, &model)?;
    let initializers = initializer_infos(graph);
    let info = |v: &pb::ValueInfoProto| value_info(v, &optional);
    let inputs = graph
        .input
        .iter()
        .filter(|i| !initializers.contains_key(&i.name))
        .map(info)
        .collect();
    let outputs: Vec<ValueInfo> = graph.output.iter().map(info).collect();
    let value_info = graph
        .value_info
        .iter()
        .map(|v| (v.name.clone(), info(v)))
        .collect();
    let (nodes, was_unsorted) = sort_nodes(graph, &initializers, path)?;
    let hidden = hidden_values(graph, &nodes);
    check_outputs_produced(path, graph, &nodes, &initializers, &outputs)?;
    let (ir_version, opsets, producer) = (model.ir_version, opsets(&model), producer(&model));
    let decoded = match bytes.len() as u64 <= KEEP_DECODED_UP_TO {
        true => super::Decoded::keep(model),
        false => super::Decoded::default(),
    };
    Ok(Graph {
        path: path.to_path_buf(),
        bytes: Arc::new(bytes),
        sha256,
        ir_version,
        opsets,
        producer,
        inputs,
        outputs,
        nodes,
        initializers,
        value_info,
        hidden,
        was_unsorted,
        notes: inlined.into_iter().collect(),
        handed_on: vec![],
        random_seed: None,
        decoded,
    })
}

/// (domain, version) of each opset the model imports.
fn opsets(model: &ModelProto) -> Vec<(String, i64)> {
    (model.opset_import.iter())
        .map(|o| (o.domain.clone(), o.version))
        .collect()
}

/// The producer's name and version.
fn producer(model: &ModelProto) -> String {
    format!("{} {}", model.producer_name, model.producer_version)
        .trim()
        .to_string()
}

/// Model bytes up to which the decoded model is kept from import for the next full decode ([`decoded`]): above,
/// keeping it would hold the weights twice for the whole run, and the model is decoded again instead.
pub const KEEP_DECODED_UP_TO: u64 = 256 << 20;

/// `g`'s model decoded in full: the one import kept, if no one took it yet, else decoded again from its bytes.
pub fn decoded(g: &Graph) -> std::result::Result<ModelProto, prost::DecodeError> {
    match g.decoded.take() {
        Some(model) => Ok(model),
        None => decode(g.bytes.as_slice()),
    }
}

/// The error for a model file at `path` that cannot be imported, and why.
fn malformed(path: &Path, reason: String) -> Error {
    Error::MalformedModel {
        path: path.to_path_buf(),
        reason,
    }
}

/// A whole `ModelProto` decoded from `bytes`, counted ([`crate::work`]): the place every full decode of a model
/// goes through, so a run's decodes can be counted.
pub fn decode(bytes: &[u8]) -> std::result::Result<tract_onnx::pb::ModelProto, prost::DecodeError> {
    crate::work::count(crate::work::Work::Decode);
    tract_onnx::pb::ModelProto::decode(bytes)
}

/// Decodes the protobuf `bytes`, telling an empty file and a Git LFS pointer apart from a corrupt one.
fn decode_model(path: &Path, bytes: &[u8]) -> Result<ModelProto> {
    if bytes.is_empty() {
        return Err(malformed(path, "the file is empty".into()));
    }
    if bytes.starts_with(b"version https://git-lfs") {
        return Err(malformed(
            path,
            "this is a Git LFS pointer, not the model: run `git lfs pull`".into(),
        ));
    }
    decode(bytes).map_err(|e| malformed(path, format!("protobuf decoding failed ({e})")))
}

/// The model's main graph, once it is known to hold something to run and to pass [`super::validate::check`].
fn checked_graph<'m>(path: &Path, model: &'m ModelProto) -> Result<&'m GraphProto> {
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| malformed(path, "the model has no graph".into()))?;
    if graph.node.is_empty() && graph.output.is_empty() {
        return Err(malformed(
            path,
            "the graph has no nodes and no outputs".into(),
        ));
    }
    super::validate::check(path, model)?;
    Ok(graph)
}

/// The host type of ONNX element type `code` (a narrow format's carrier).
fn carried(code: i32) -> DType {
    Format::from_onnx(code).map_or(DType::from_onnx(code), |f| f.carrier())
}

/// The type, dims and storage of every initializer, dense or sparse, by name.
fn initializer_infos(graph: &GraphProto) -> HashMap<String, InitInfo> {
    graph
        .initializer
        .iter()
        .map(|t| {
            let info = InitInfo {
                dtype: carried(t.data_type),
                dims: t.dims.clone(),
                external: t.data_location == Some(1),
            };
            (t.name.clone(), info)
        })
        .chain(graph.sparse_initializer.iter().filter_map(|s| {
            let v = s.values.as_ref()?;
            Some((
                v.name.clone(),
                InitInfo {
                    dtype: carried(v.data_type),
                    dims: s.dims.clone(),
                    external: false,
                },
            ))
        }))
        .collect()
}

/// The values made inside the bodies of `nodes`, each with the node that holds the body.
fn hidden_values(graph: &GraphProto, nodes: &[Node]) -> Vec<HiddenValue> {
    let mut hidden = Vec::new();
    for n in nodes {
        for g in subgraphs(&graph.node[n.source_index]) {
            collect_hidden(g, &n.name, &mut hidden);
        }
    }
    hidden
}

/// Errors on a graph output that no node produces and that is neither an initializer nor a graph input.
fn check_outputs_produced(
    path: &Path,
    graph: &GraphProto,
    nodes: &[Node],
    initializers: &HashMap<String, InitInfo>,
    outputs: &[ValueInfo],
) -> Result<()> {
    let produced: HashSet<&str> = nodes
        .iter()
        .flat_map(|n| n.outputs.iter().map(|s| s.as_str()))
        .collect();
    for o in outputs {
        let known = produced.contains(o.name.as_str())
            || initializers.contains_key(&o.name)
            || graph.input.iter().any(|i| i.name == o.name);
        if !known {
            return Err(malformed(
                path,
                format!("graph output `{}` is produced by no node", o.name),
            ));
        }
    }
    Ok(())
}

/// What `v` declares; a value whose type tract's protobuf types cannot read takes its tensor type from `optional`
/// (the `optional(tensor)` values, by name), else has none.
fn value_info(v: &pb::ValueInfoProto, optional: &HashMap<String, type_proto::Tensor>) -> ValueInfo {
    let tensor = v.r#type.as_ref().and_then(|t| match &t.value {
        Some(type_proto::Value::TensorType(tt)) => Some(tt),
        None => optional.get(&v.name),
    });
    tensor_info(&v.name, tensor)
}

/// A value named `name` of tensor type `tensor` (`None`: undeclared).
pub fn tensor_info(name: &str, tensor: Option<&type_proto::Tensor>) -> ValueInfo {
    let tensor = tensor.filter(|t| t.elem_type != 0);
    let format = tensor.and_then(|t| Format::from_onnx(t.elem_type));
    let dtype = tensor.map(|t| carried(t.elem_type));
    let dims = tensor.and_then(|t| t.shape.as_ref()).map(|s| {
        s.dim
            .iter()
            .map(|d| match &d.value {
                Some(pb::tensor_shape_proto::dimension::Value::DimValue(v)) => Dim::Fixed(*v),
                Some(pb::tensor_shape_proto::dimension::Value::DimParam(p)) if !p.is_empty() => {
                    Dim::Symbolic(p.clone())
                }
                _ => Dim::Fixed(-1),
            })
            .collect()
    });
    ValueInfo {
        name: name.to_string(),
        dtype,
        dims,
        format,
    }
}

fn subgraphs(n: &pb::NodeProto) -> impl Iterator<Item = &GraphProto> {
    n.attribute
        .iter()
        .flat_map(|a| a.g.iter().chain(a.graphs.iter()))
}

fn count_nodes(g: &GraphProto) -> usize {
    g.node
        .iter()
        .map(|n| 1 + subgraphs(n).map(count_nodes).sum::<usize>())
        .sum()
}

fn collect_hidden(g: &GraphProto, parent: &str, out: &mut Vec<HiddenValue>) {
    for n in &g.node {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            out.push(HiddenValue {
                name: o.clone(),
                parent: parent.to_string(),
            });
        }
        for sg in subgraphs(n) {
            collect_hidden(sg, parent, out);
        }
    }
}
