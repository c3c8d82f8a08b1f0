//! Reads an ONNX file into a [`Graph`], tolerating what real-world files do: unsorted node lists, IR 3
//! initializers repeated in `graph.input`, external data, other domains, `-1` and symbolic dims, and values
//! hidden inside `If`/`Loop`/`Scan` bodies (listed, not captured).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use prost::Message;
use sha2::{Digest, Sha256};
use tract_onnx::pb::{self, type_proto, GraphProto, ModelProto};

use super::{Dim, Graph, HiddenValue, InitInfo, Node, ValueInfo};
use crate::error::{Error, Result};
use crate::tensor::formats::Format;
use crate::tensor::DType;

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
    Ok(Graph {
        path: path.to_path_buf(),
        bytes: Arc::new(bytes),
        sha256,
        ir_version: model.ir_version,
        opsets: model
            .opset_import
            .iter()
            .map(|o| (o.domain.clone(), o.version))
            .collect(),
        producer: format!("{} {}", model.producer_name, model.producer_version)
            .trim()
            .to_string(),
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
    })
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

/// Kahn's algorithm, stable with respect to file order. Errors on cycles and on inputs nothing produces.
fn sort_nodes(
    g: &GraphProto,
    inits: &HashMap<String, InitInfo>,
    path: &Path,
) -> Result<(Vec<Node>, bool)> {
    let mut available: HashSet<&str> = g.input.iter().map(|i| i.name.as_str()).collect();
    available.extend(inits.keys().map(|s| s.as_str()));
    available.insert("");
    let producer = producers(g, path)?;
    let deps = dependencies(g, &available, &producer, path)?;
    let order = node_order(g, &deps, &producer, path)?;
    let unsorted = order.iter().enumerate().any(|(k, &i)| k != i);
    Ok((named_nodes(g, &order), unsorted))
}

/// The node that produces each value; errors on a value produced twice.
fn producers<'g>(g: &'g GraphProto, path: &Path) -> Result<HashMap<&'g str, usize>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in g.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if let Some(first) = producer.insert(o.as_str(), i) {
                return Err(Error::MalformedModel {
                    path: path.to_path_buf(),
                    reason: format!(
                        "value `{o}` is produced by two nodes ({} and {}): ONNX graphs assign each value once",
                        label(g, first),
                        label(g, i)
                    ),
                });
            }
        }
    }
    Ok(producer)
}

/// The values each node waits on: its inputs and what its bodies read from outside, less those `available` from
/// the start. Errors on a value no node produces.
fn dependencies(
    g: &GraphProto,
    available: &HashSet<&str>,
    producer: &HashMap<&str, usize>,
    path: &Path,
) -> Result<Vec<Vec<String>>> {
    let deps: Vec<Vec<String>> = g
        .node
        .iter()
        .map(|n| {
            super::surgery::reads(n)
                .into_iter()
                .filter(|v| !available.contains(v.as_str()))
                .collect()
        })
        .collect();
    for (i, d) in deps.iter().enumerate() {
        if let Some(missing) = d.iter().find(|v| !producer.contains_key(v.as_str())) {
            return Err(Error::MalformedModel {
                path: path.to_path_buf(),
                reason: format!(
                    "{} reads `{missing}`, which is no graph input, initializer or node output",
                    label(g, i)
                ),
            });
        }
    }
    Ok(deps)
}

/// The order to run the nodes in: file order when it is already topological, otherwise the earliest ready node in
/// file order first. Errors on a cycle.
fn node_order(
    g: &GraphProto,
    deps: &[Vec<String>],
    producer: &HashMap<&str, usize>,
    path: &Path,
) -> Result<Vec<usize>> {
    // A file order that is already topological is kept as it is.
    let in_order = deps
        .iter()
        .enumerate()
        .all(|(i, d)| d.iter().all(|v| producer[v.as_str()] < i));
    let mut pending: Vec<usize> = deps.iter().map(|d| d.len()).collect();
    let users = users_of(deps, producer);
    // Otherwise the earliest ready node in file order runs first.
    let mut ready: BinaryHeap<Reverse<usize>> = (0..g.node.len())
        .filter(|&i| pending[i] == 0 && !in_order)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(g.node.len());
    let mut queued: Vec<bool> = pending.iter().map(|&p| p == 0).collect();
    if in_order {
        order.extend(0..g.node.len());
        queued.iter_mut().for_each(|q| *q = true);
    }
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        let mut woken = Vec::new();
        for o in g.node[i].output.iter().filter(|o| !o.is_empty()) {
            for &u in users.get(o.as_str()).map(|v| v.as_slice()).unwrap_or(&[]) {
                pending[u] -= 1;
                if pending[u] == 0 && !queued[u] {
                    queued[u] = true;
                    woken.push(u);
                }
            }
        }
        ready.extend(woken.into_iter().map(Reverse));
    }
    if order.len() != g.node.len() {
        let stuck: Vec<String> = (0..g.node.len())
            .filter(|i| !queued[*i])
            .take(5)
            .map(|i| label(g, i))
            .collect();
        return Err(Error::MalformedModel {
            path: path.to_path_buf(),
            reason: format!(
                "the graph has a cycle: these nodes wait on each other and can never run: {}",
                stuck.join(", ")
            ),
        });
    }
    Ok(order)
}

/// The nodes waiting on each value, by the value's name as `producer` holds it.
fn users_of<'g>(
    deps: &[Vec<String>],
    producer: &HashMap<&'g str, usize>,
) -> HashMap<&'g str, Vec<usize>> {
    let mut users: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, d) in deps.iter().enumerate() {
        for v in d {
            users
                .entry(
                    producer
                        .get_key_value(v.as_str())
                        .map(|(k, _)| *k)
                        .unwrap_or(""),
                )
                .or_default()
                .push(i);
        }
    }
    users
}

/// The nodes of `g` in `order`, each with a unique name (`{Op}_{index}` for an unnamed one, `#index` appended to
/// a repeated one).
fn named_nodes(g: &GraphProto, order: &[usize]) -> Vec<Node> {
    let mut taken: HashSet<String> = HashSet::new();
    order
        .iter()
        .enumerate()
        .map(|(index, &i)| {
            let n = &g.node[i];
            let mut name = if n.name.is_empty() {
                format!("{}_{index}", n.op_type)
            } else {
                n.name.clone()
            };
            if !taken.insert(name.clone()) {
                name = format!("{name}#{index}");
                taken.insert(name.clone());
            }
            Node {
                index,
                source_index: i,
                name,
                op_type: n.op_type.clone(),
                domain: n.domain.clone(),
                inputs: n.input.clone(),
                outputs: n.output.clone(),
                subgraph_nodes: subgraphs(n).map(count_nodes).sum(),
            }
        })
        .collect()
}

/// `node `name` (Op)`, or `node #i (Op)` for an unnamed node.
fn label(g: &pb::GraphProto, i: usize) -> String {
    let n = &g.node[i];
    match n.name.is_empty() {
        true => format!("node #{i} ({})", n.op_type),
        false => format!("node `{}` ({})", n.name, n.op_type),
    }
}
