//! The imported ONNX model: nodes in topological order and named values, keyed by ONNX tensor name.
//!
//! Import reads the protobuf only for structure (the runners get the original bytes), so nothing the model
//! holds is lost or rewritten here. See [`import`] for what real-world files need.

// The layers below, under the names the code uses.
pub(crate) use phantom_core::{error, fsutil, tensor, units, work};

pub mod budget;
pub mod custom_ops;
pub mod cut;
pub mod dims;
pub mod dims_genai;
pub mod dims_model;
pub mod external;
pub mod functions;
pub mod image;
pub mod import;
pub mod inline;
pub mod inputs;
pub mod loader_data;
pub mod loader_rules;
pub mod nchwc;
pub mod npy;
pub mod onnx_attrs;
pub mod optional;
pub mod proto;
pub mod random;
pub mod scan;
pub mod sequences;
pub mod skeleton;
pub mod surgery;
pub mod tract;
pub mod types;
pub mod unroll;
pub mod validate;

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::tensor::DType;

pub use import::load;

/// One dimension of a declared shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Dim {
    Fixed(i64),
    Symbolic(String),
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Fixed(v) if *v < 0 => f.write_str("?"),
            Dim::Fixed(v) => write!(f, "{v}"),
            Dim::Symbolic(s) => f.write_str(s),
        }
    }
}

/// A declared graph input, output or value_info entry.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ValueInfo {
    pub name: String,
    /// Element type; `None` when the model does not declare one (or declares a non-tensor type).
    pub dtype: Option<DType>,
    /// Declared shape; `None` when the rank is unknown.
    pub dims: Option<Vec<Dim>>,
    /// The narrow number format it is declared as (float8, int4...), whose values `dtype` carries exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<crate::tensor::formats::Format>,
}

impl ValueInfo {
    pub fn shape_text(&self) -> String {
        match &self.dims {
            None => "?".into(),
            Some(d) => d
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("x"),
        }
    }
}

/// One node of the top-level graph.
#[derive(Clone, Debug)]
pub struct Node {
    /// Position in topological order.
    pub index: usize,
    /// Position in the file's node list.
    pub source_index: usize,
    /// The ONNX node name, or `<op_type>_<index>` when the model leaves it empty.
    pub name: String,
    pub op_type: String,
    /// Operator domain; empty for the default ONNX domain.
    pub domain: String,
    /// Input value names; empty strings stand for omitted optional inputs.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    /// Number of nodes inside this node's `If`/`Loop`/`Scan` bodies (recursively).
    pub subgraph_nodes: usize,
}

impl Node {
    /// True for ops whose float outputs are copies of input elements (relayouts, selections, joins, zero padding):
    /// they cannot round, so an element's error is the one it had where it came from.
    pub fn copies_elements(&self) -> bool {
        self.domain.is_empty()
            && matches!(
                self.op_type.as_str(),
                "Reshape"
                    | "Transpose"
                    | "Flatten"
                    | "Squeeze"
                    | "Unsqueeze"
                    | "Identity"
                    | "Concat"
                    | "Split"
                    | "Slice"
                    | "Gather"
                    | "GatherElements"
                    | "GatherND"
                    | "Expand"
                    | "Tile"
                    | "Pad"
                    | "DepthToSpace"
                    | "SpaceToDepth"
            )
    }
}

/// Shape and type of an initializer (its data stays in the original bytes).
#[derive(Clone, Debug)]
pub struct InitInfo {
    pub dtype: DType,
    pub dims: Vec<i64>,
    /// True when the data lives in an external file.
    pub external: bool,
}

/// A value computed inside a control-flow body, which graph outputs cannot expose.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct HiddenValue {
    pub name: String,
    /// Name of the `If`/`Loop`/`Scan` node whose body computes it.
    pub parent: String,
}

/// The imported model.
#[derive(Clone, Debug)]
pub struct Graph {
    pub path: PathBuf,
    /// The unmodified model bytes, as read.
    pub bytes: std::sync::Arc<Vec<u8>>,
    pub sha256: String,
    pub ir_version: i64,
    /// (domain, version); the default domain is `ai.onnx`.
    pub opsets: Vec<(String, i64)>,
    pub producer: String,
    /// Graph inputs that are not initializers.
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
    /// Top-level nodes in topological order.
    pub nodes: Vec<Node>,
    pub initializers: HashMap<String, InitInfo>,
    /// Declared types of intermediate values, where the model has them.
    pub value_info: HashMap<String, ValueInfo>,
    /// Values inside control-flow bodies: not reachable as graph outputs.
    pub hidden: Vec<HiddenValue>,
    /// True when the file's node order was not topological (valid for ORT, rejected by onnx.checker).
    pub was_unsorted: bool,
    /// What phantom changed before comparing (an `If` replaced by its taken branch...).
    pub notes: Vec<String>,
    /// Declared outputs that are not outputs of the model compared (a segment's cut: the values it hands on).
    /// Targets take them from the run that exposes every value, like any intermediate, not from the plain run.
    pub handed_on: Vec<String>,
    /// The seed its random ops were replaced with ([`random::seeded`]): a `--target-model` is seeded alike, so both
    /// sides draw the same numbers.
    pub random_seed: Option<u64>,
    /// The `ModelProto` import decoded from `bytes`, kept for the first later full decode of them to take
    /// ([`import::decoded`]); graphs cloned from this one share it.
    pub decoded: Decoded,
}

/// A graph's decoded model, kept from import until one full decode takes it (take once): a small model is then
/// decoded once per run. Empty for a model larger than [`import::KEEP_DECODED_UP_TO`].
#[derive(Clone, Default)]
pub struct Decoded(std::sync::Arc<std::sync::Mutex<Option<tract_onnx::pb::ModelProto>>>);

impl Decoded {
    /// Keeps `model`, the decoding of the graph's bytes.
    pub fn keep(model: tract_onnx::pb::ModelProto) -> Decoded {
        Decoded(std::sync::Arc::new(std::sync::Mutex::new(Some(model))))
    }

    /// The kept model, if it was not taken yet.
    pub fn take(&self) -> Option<tract_onnx::pb::ModelProto> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl std::fmt::Debug for Decoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().map(|k| k.is_some()).unwrap_or(false);
        write!(f, "Decoded({})", if kept { "kept" } else { "none" })
    }
}

impl Graph {
    /// Index of the node producing each value.
    pub fn producers(&self) -> HashMap<&str, usize> {
        let mut m = HashMap::new();
        for n in &self.nodes {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                m.insert(o.as_str(), n.index);
            }
        }
        m
    }

    /// Bytes of the model's weights as the reference holds them (floats in f64).
    pub fn f64_weight_bytes(&self) -> u64 {
        self.initializers.values().fold(0u64, |acc, w| {
            let elems = w
                .dims
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d.max(0) as u64))
                .unwrap_or(u64::MAX);
            let size = if w.dtype.is_float() {
                8
            } else {
                w.dtype.size() as u64
            };
            acc.saturating_add(elems.saturating_mul(size))
        })
    }

    /// Bytes the f64 reference holds for the weights at once: float32/float16/bfloat16 weights of at least
    /// [`budget::STORED_MIN_BYTES`] are kept as stored and widened as each is used (inline ones held as stored,
    /// external ones memory-mapped and released after use), the largest of them widened to f64; other float weights
    /// in f64; the rest as stored.
    pub fn reference_weight_bytes(&self) -> u64 {
        let (mut held, mut widest) = (0u64, 0u64);
        for w in self.initializers.values() {
            let elems = (w.dims.iter())
                .try_fold(1u64, |n, &d| n.checked_mul(d.max(0) as u64))
                .unwrap_or(u64::MAX);
            let stored = elems.saturating_mul(w.dtype.size() as u64);
            let narrow = matches!(w.dtype, DType::F32 | DType::F16 | DType::Bf16);
            if narrow && stored >= budget::STORED_MIN_BYTES as u64 {
                held = held.saturating_add(if w.external { 0 } else { stored });
                widest = widest.max(elems.saturating_mul(8));
            } else {
                let size = if w.dtype.is_float() {
                    8
                } else {
                    w.dtype.size() as u64
                };
                held = held.saturating_add(elems.saturating_mul(size));
            }
        }
        held.saturating_add(widest)
    }

    /// Nodes consuming each value, in topological order.
    pub fn consumers(&self) -> HashMap<&str, Vec<usize>> {
        let mut m: HashMap<&str, Vec<usize>> = HashMap::new();
        for n in &self.nodes {
            for i in n.inputs.iter().filter(|i| !i.is_empty()) {
                m.entry(i.as_str()).or_default().push(n.index);
            }
        }
        m
    }

    /// Values computed from initializers alone (no graph input among their ancestors).
    pub fn constant_derived(&self) -> std::collections::HashSet<&str> {
        let mut constants: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for n in &self.nodes {
            let constant = n.inputs.iter().filter(|i| !i.is_empty()).all(|i| {
                self.initializers.contains_key(i.as_str()) || constants.contains(i.as_str())
            });
            if constant && n.subgraph_nodes == 0 && !n.op_type.starts_with("Random") {
                constants.extend(
                    n.outputs
                        .iter()
                        .map(String::as_str)
                        .filter(|o| !o.is_empty()),
                );
            }
        }
        constants
    }

    /// Every value computed by a top-level node, in topological order.
    pub fn computed_values(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .flat_map(|n| n.outputs.iter())
            .filter(|o| !o.is_empty())
            .map(|s| s.as_str())
            .collect()
    }

    /// Op type histogram, most frequent first.
    pub fn op_histogram(&self) -> Vec<(String, usize)> {
        let mut m: HashMap<String, usize> = HashMap::new();
        for n in &self.nodes {
            let key = if n.domain.is_empty() || n.domain == "ai.onnx" {
                n.op_type.clone()
            } else {
                format!("{}:{}", n.domain, n.op_type)
            };
            *m.entry(key).or_default() += 1;
        }
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Opset version of the default domain.
    pub fn default_opset(&self) -> Option<i64> {
        self.opsets
            .iter()
            .find(|(d, _)| d.is_empty() || d == "ai.onnx")
            .map(|(_, v)| *v)
    }
}
