//! One validation pass over every model phantom evaluates, before tract, ONNX Runtime or the shaders see it: what
//! ONNX Runtime would refuse must not reach an engine that panics, divides by zero or loops on it (tract's type
//! inference loops forever on a LayerNormalization axis below −rank). Checked: opset versions and node domains,
//! `auto_pad` values, `kernel_shape`/`strides`/`dilations` (non-empty, positive) and `pads` (non-negative), Transpose
//! `perm` (a permutation), `axis`/`axes` attributes (within the input's rank where it is declared, and never absurd),
//! `If` branches (same number of outputs), ConstantOfShape/Expand/Tile sizes given by constants (within the input
//! memory budget), and a `Cast`'s declared output type (its `to`). Bodies of control-flow nodes are checked like the
//! main graph. Errors name the node and attribute.

use std::collections::HashMap;
use std::path::Path;

use tract_onnx::pb::{self, attribute_proto::AttributeType, GraphProto, ModelProto, NodeProto};

use crate::error::{Error, Result};

/// The newest default-domain opset phantom accepts: ONNX 1.23 defines 28 (the oracle cases use it); a little room
/// for newer releases, none for corrupt numbers such as 99.
pub const MAX_OPSET: i64 = 30;

/// No real tensor has this many axes; an axis attribute beyond it is corrupt whatever the rank.
const MAX_RANK: i64 = 32;

/// Domains with kernels in ONNX Runtime (the model's own functions are accepted too).
const DOMAINS: [&str; 8] = [
    "",
    "ai.onnx",
    "ai.onnx.ml",
    "ai.onnx.training",
    "ai.onnx.preview.training",
    "com.microsoft",
    "com.microsoft.nchwc",
    "com.microsoft.experimental",
];

/// Ops of ONNX's preview domain `ai.onnx.preview` that phantom's reference has f64 kernels for (ONNX Runtime has
/// none); its other ops stay refused with the custom-op domains.
const PREVIEW_OPS: [&str; 1] = ["FlexAttention"];

/// Checks `model` (read from `path`).
pub fn check(path: &Path, model: &ModelProto) -> Result<()> {
    let bad = |reason: String| Error::MalformedModel {
        path: path.to_path_buf(),
        reason,
    };
    for o in &model.opset_import {
        let default = o.domain.is_empty() || o.domain == "ai.onnx";
        if default && !(1..=MAX_OPSET).contains(&o.version) {
            return Err(bad(format!(
                "it imports opset {} of the default domain; phantom knows opsets 1 to {MAX_OPSET}",
                o.version
            )));
        }
    }
    super::loader_rules::check(model).map_err(bad)?;
    let local: Vec<&str> = model
        .functions
        .iter()
        .filter_map(|f| f.domain.as_deref())
        .collect();
    let declared: Vec<&str> = model
        .opset_import
        .iter()
        .map(|o| o.domain.as_str())
        .collect();
    let ctx = Ctx {
        local,
        declared,
        budget: crate::fsutil::input_budget(),
    };
    if let Some(g) = &model.graph {
        ctx.graph(g).map_err(bad)?;
        // Not malformed: a type the file states wrongly, which ONNX Runtime refuses.
        let types = (g.value_info.iter().chain(&g.output))
            .filter_map(|v| Some((v.name.as_str(), declared_type(v)?)))
            .collect();
        for n in g
            .node
            .iter()
            .filter(|n| n.op_type == "Cast" && n.domain.is_empty())
        {
            cast_declared(n, &types).map_err(|why| {
                Error::Usage(format!(
                    "{}: node `{}` (Cast): {why}",
                    path.display(),
                    n.name
                ))
            })?;
        }
    }
    Ok(())
}

struct Ctx<'m> {
    local: Vec<&'m str>,
    declared: Vec<&'m str>,
    budget: usize,
}

/// What a graph declares about its values: ranks and constant integer tensors.
struct Known<'g> {
    /// Declared dims (`None` where symbolic), by value name.
    dims: HashMap<&'g str, Vec<Option<i64>>>,
    ints: HashMap<&'g str, Vec<i64>>,
}

impl<'g> Known<'g> {
    fn of(g: &'g GraphProto) -> Known<'g> {
        let mut dims = HashMap::new();
        // Graph inputs only: value_info and output shapes are hints that exporters leave stale (ONNX Runtime
        // merges them leniently), so a rule read from them would refuse models that run.
        for v in &g.input {
            if let Some(d) = declared_dims(v) {
                dims.insert(v.name.as_str(), d);
            }
        }
        let fixed = |d: &[i64]| d.iter().map(|&v| Some(v)).collect::<Vec<_>>();
        let mut ints = HashMap::new();
        for t in &g.initializer {
            dims.insert(t.name.as_str(), fixed(&t.dims));
            if let Some(v) = int_values(t) {
                ints.insert(t.name.as_str(), v);
            }
        }
        for n in g.node.iter().filter(|n| n.op_type == "Constant") {
            let t = n
                .attribute
                .iter()
                .find(|a| a.name == "value")
                .and_then(|a| a.t.as_ref());
            if let (Some(t), Some(o)) = (t, n.output.first()) {
                dims.insert(o.as_str(), fixed(&t.dims));
                if let Some(v) = int_values(t) {
                    ints.insert(o.as_str(), v);
                }
            }
        }
        Known { dims, ints }
    }
}

/// The element type a value's declaration (`value_info`, a graph output) states, if it is a tensor's.
fn declared_type(v: &pb::ValueInfoProto) -> Option<i32> {
    let pb::type_proto::Value::TensorType(t) = v.r#type.as_ref()?.value.as_ref()?;
    Some(t.elem_type).filter(|&e| e != 0)
}

/// A `Cast` whose output the model declares of another element type than its `to`: ONNX Runtime refuses the file
/// ("Type Error … does not match expected type"). onnxconverter-common's float16 conversion writes such declarations
/// where the model casts to float32 itself.
fn cast_declared(n: &NodeProto, types: &HashMap<&str, i32>) -> std::result::Result<(), String> {
    let to = n
        .attribute
        .iter()
        .find(|a| a.name == "to")
        .map(|a| a.i as i32);
    let (Some(to), Some(out)) = (to, n.output.first()) else {
        return Ok(());
    };
    match types.get(out.as_str()) {
        Some(&declared) if declared != to => Err(format!(
            "it casts to {} but the model declares its output `{out}` {} (value_info): ONNX Runtime refuses such a \
             file. Declare `{out}` as {} or remove its value_info entry (onnxconverter-common's float16 conversion \
             leaves such declarations at the casts it keeps or inserts)",
            type_name(to),
            type_name(declared),
            type_name(to)
        )),
        _ => Ok(()),
    }
}

/// ONNX's name of an element type.
fn type_name(code: i32) -> String {
    pb::tensor_proto::DataType::try_from(code)
        .map(|d| d.as_str_name().to_lowercase())
        .unwrap_or_else(|_| format!("type {code}"))
}

fn declared_dims(v: &pb::ValueInfoProto) -> Option<Vec<Option<i64>>> {
    let pb::type_proto::Value::TensorType(t) = v.r#type.as_ref()?.value.as_ref()?;
    let dims = t.shape.as_ref()?.dim.iter().map(|d| match d.value {
        Some(pb::tensor_shape_proto::dimension::Value::DimValue(v)) => Some(v),
        _ => None,
    });
    Some(dims.collect())
}

/// The values of a small int64/int32 tensor (shapes, repeats, indices).
fn int_values(t: &pb::TensorProto) -> Option<Vec<i64>> {
    let n = crate::tensor::onnx_elements(&t.dims)?;
    if n > 64 {
        return None;
    }
    let v: Vec<i64> = match t.data_type {
        7 if !t.int64_data.is_empty() => t.int64_data.clone(),
        7 => t
            .raw_data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        6 if !t.int32_data.is_empty() => t.int32_data.iter().map(|&v| v as i64).collect(),
        6 => t
            .raw_data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64)
            .collect(),
        _ => return None,
    };
    (v.len() == n).then_some(v)
}

impl Ctx<'_> {
    fn graph(&self, g: &GraphProto) -> std::result::Result<(), String> {
        let known = Known::of(g);
        for (i, n) in g.node.iter().enumerate() {
            let at = match n.name.is_empty() {
                true => format!("node #{i} ({})", n.op_type),
                false => format!("node `{}` ({})", n.name, n.op_type),
            };
            self.node(n, &known).map_err(|why| format!("{at}: {why}"))?;
            for a in &n.attribute {
                if let Some(body) = &a.g {
                    self.graph(body)
                        .map_err(|why| format!("{at}, attribute `{}`: {why}", a.name))?;
                }
                for body in &a.graphs {
                    self.graph(body)
                        .map_err(|why| format!("{at}, attribute `{}`: {why}", a.name))?;
                }
            }
        }
        Ok(())
    }

    fn node(&self, n: &NodeProto, known: &Known) -> std::result::Result<(), String> {
        let domain = n.domain.as_str();
        if !self.local.contains(&domain) {
            let preview = domain == "ai.onnx.preview" && PREVIEW_OPS.contains(&n.op_type.as_str());
            if !DOMAINS.contains(&domain) && !preview {
                crate::custom_ops::covers(domain)?;
            }
            let default = domain.is_empty() || domain == "ai.onnx";
            let declared = self
                .declared
                .iter()
                .any(|d| *d == domain || default && (d.is_empty() || *d == "ai.onnx"));
            if !declared {
                return Err(format!(
                    "domain `{domain}` is used but the model imports no opset for it"
                ));
            }
        }
        attributes(n, known)?;
        match n.op_type.as_str() {
            "If" => if_branches(n),
            "ConstantOfShape" | "Expand" => self.constant_size(n, known, 1, false),
            "Tile" => self.constant_size(n, known, 1, true),
            "Gather" => gather_indices(n, known),
            _ => Ok(()),
        }
    }

    /// A size given by the constant input `slot` (a shape, or repeats multiplying the data's shape when `repeats`)
    /// must fit the input budget.
    fn constant_size(
        &self,
        n: &NodeProto,
        known: &Known,
        slot: usize,
        repeats: bool,
    ) -> std::result::Result<(), String> {
        let input = if n.op_type == "ConstantOfShape" {
            0
        } else {
            slot
        };
        let Some(values) = n.input.get(input).and_then(|s| known.ints.get(s.as_str())) else {
            return Ok(());
        };
        if let Some(v) = values.iter().find(|&&v| v < 0) {
            return Err(format!(
                "its {} holds {v}",
                if repeats { "repeats" } else { "shape" }
            ));
        }
        let dims: Vec<usize> = values.iter().map(|&v| v as usize).collect();
        match crate::tensor::checked_nbytes(&dims, 4) {
            Some(b) if b <= self.budget => Ok(()),
            _ => Err(format!(
                "its constant {} {values:?} make a tensor beyond the memory phantom allows ({})",
                if repeats { "repeats" } else { "shape" },
                crate::units::fmt_size(self.budget)
            )),
        }
    }
}

/// Attribute values every engine relies on.
fn attributes(n: &NodeProto, known: &Known) -> std::result::Result<(), String> {
    let rank = n
        .input
        .get(data_input(n))
        .and_then(|i| known.dims.get(i.as_str()))
        .map(Vec::len);
    for a in &n.attribute {
        let name = a.name.as_str();
        let ints = a.r#type == AttributeType::Ints as i32;
        match name {
            "auto_pad" => {
                let v = String::from_utf8_lossy(&a.s);
                if !["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", ""].contains(&v.as_ref()) {
                    return Err(format!(
                        "auto_pad `{v}` is none of NOTSET, SAME_UPPER, SAME_LOWER, VALID"
                    ));
                }
            }
            "kernel_shape" | "strides" | "dilations"
                if ints && (a.ints.is_empty() || a.ints.iter().any(|&v| v <= 0)) =>
            {
                return Err(format!(
                    "attribute `{name}` {:?} must list positive sizes",
                    a.ints
                ));
            }
            "pads" if ints && n.op_type != "Pad" && a.ints.iter().any(|&v| v < 0) => {
                return Err(format!(
                    "attribute `pads` {:?} must not be negative",
                    a.ints
                ));
            }
            "perm" if n.op_type == "Transpose" && !a.ints.is_empty() => {
                let mut seen = vec![false; a.ints.len()];
                let ok = a.ints.iter().all(|&p| {
                    usize::try_from(p)
                        .ok()
                        .filter(|&p| p < seen.len())
                        .is_some_and(|p| !std::mem::replace(&mut seen[p], true))
                });
                if !ok || rank.is_some_and(|r| r != a.ints.len()) {
                    return Err(format!(
                        "perm {:?} is not a permutation of the input's axes",
                        a.ints
                    ));
                }
            }
            // A per-tensor (de)quantization ignores its axis (ONNX Runtime writes `axis` 1 on a 1-D input).
            "axis" if per_tensor(n, known) => {}
            "axis" => axis_in_range(name, &[a.i], axis_rank(n, rank))?,
            "axes" if ints => axis_in_range(name, &a.ints, axis_rank(n, rank))?,
            _ => {}
        }
    }
    Ok(())
}

/// Whether `n` quantizes or dequantizes per tensor: its scale is known to hold one element. Its `axis` then names
/// no axis (ONNX Runtime reads it only for a per-axis scale).
fn per_tensor(n: &NodeProto, known: &Known) -> bool {
    let q = matches!(n.op_type.as_str(), "QuantizeLinear" | "DequantizeLinear");
    let scale = n.input.get(1).and_then(|s| known.dims.get(s.as_str()));
    q && scale.is_some_and(|d| d.iter().all(|&v| v == Some(1)))
}

/// The input whose axes a node's axis attributes count, as its schema orders the inputs: `QLinearConcat`'s tensors
/// come after the output's scale and zero point (then every third input), every other op's first.
fn data_input(n: &NodeProto) -> usize {
    match (n.domain.as_str(), n.op_type.as_str()) {
        ("com.microsoft", "QLinearConcat") => 2,
        _ => 0,
    }
}

/// The number of positions an axis attribute counts in: the input's rank, one more for ops that add an axis or
/// accept the end (Flatten's axis may equal the rank).
fn axis_rank(n: &NodeProto, rank: Option<usize>) -> Option<usize> {
    match n.op_type.as_str() {
        "Unsqueeze" | "ConcatFromSequence" => None,
        "OneHot" | "Flatten" => rank.map(|r| r + 1),
        _ => rank,
    }
}

fn axis_in_range(name: &str, axes: &[i64], rank: Option<usize>) -> std::result::Result<(), String> {
    let limit = rank.map(|r| r as i64).unwrap_or(MAX_RANK);
    match axes.iter().find(|&&a| a < -limit || a >= limit) {
        None => Ok(()),
        Some(a) => Err(match rank {
            Some(r) => {
                format!("attribute `{name}` {a} is outside the input's {r} axes ([-{r}, {r}))")
            }
            None => format!("attribute `{name}` {a} is beyond any real tensor's rank"),
        }),
    }
}

/// Constant Gather indices must address the data's axis when its size is declared.
fn gather_indices(n: &NodeProto, known: &Known) -> std::result::Result<(), String> {
    let (Some(data), Some(indices)) = (n.input.first(), n.input.get(1)) else {
        return Ok(());
    };
    let (Some(dims), Some(idx)) = (
        known.dims.get(data.as_str()),
        known.ints.get(indices.as_str()),
    ) else {
        return Ok(());
    };
    let axis = n
        .attribute
        .iter()
        .find(|a| a.name == "axis")
        .map_or(0, |a| a.i);
    let axis = if axis < 0 {
        axis + dims.len() as i64
    } else {
        axis
    };
    let Some(Some(size)) = usize::try_from(axis).ok().and_then(|a| dims.get(a)) else {
        return Ok(());
    };
    match idx.iter().find(|&&i| i < -size || i >= *size) {
        None => Ok(()),
        Some(i) => Err(format!(
            "constant index {i} is outside its data's axis {axis} of size {size} ([-{size}, {size}))"
        )),
    }
}

/// Both branches of an `If` must produce the same number of outputs, as many as the node has.
fn if_branches(n: &NodeProto) -> std::result::Result<(), String> {
    let outputs = |name: &str| {
        n.attribute
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.g.as_ref())
            .map(|g| g.output.len())
    };
    match (outputs("then_branch"), outputs("else_branch")) {
        (Some(t), Some(e)) if t == e && t == n.output.len() => Ok(()),
        (Some(t), Some(e)) => Err(format!(
            "its branches produce {t} and {e} outputs for the node's {}",
            n.output.len()
        )),
        _ => Err("it lacks a then_branch or else_branch graph".into()),
    }
}
