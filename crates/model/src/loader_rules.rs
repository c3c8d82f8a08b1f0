//! What ONNX Runtime's loader refuses before any kernel runs, checked by phantom for every target (the wgpu
//! shaders and `--target-model` runs included) so that a model ORT would refuse is refused everywhere, with the
//! node and attribute named: an IR version no ONNX release defines, an op's legacy definition at a default-domain
//! opset older than 7, a graph with nodes but no outputs, an attribute
//! given twice, not defined by its op or carrying data of another type than it declares, a name defined twice (a graph input or initializer that a node also writes), an initializer whose
//! dims are negative or overflow (and data that contradicts dims, a Reshape target no tensor can have: see
//! [`super::loader_data`]), and inputs of one-type ops (Add, MatMul, Conv…) whose declared element types
//! differ (a float64 initializer beside float32 activations).

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{
    attribute_proto, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, ValueInfoProto,
};

/// The element type a graph input declares.
fn declared(vi: &ValueInfoProto) -> Option<i32> {
    match vi.r#type.as_ref()?.value.as_ref()? {
        type_proto::Value::TensorType(t) if t.elem_type != 0 => Some(t.elem_type),
        _ => None,
    }
}

/// The newest IR version phantom accepts: ONNX's current releases write up to 14 (the backend node tests in
/// `tests/data/wgpu` have it; ONNX Runtime 1.31 reads up to 13 and refuses newer ones itself, on its targets), a
/// little room for newer releases, none for corrupt numbers such as 99.
pub const MAX_IR: i64 = 16;

/// The oldest default-domain opset ONNX Runtime supports: it "only guarantees support for models stamped with opset
/// version 7 or above", and has no kernel for most ops at their opset-1 versions (`Relu(1)`, `Add(1)`).
pub const MIN_OPSET: i64 = 7;

/// Ops whose listed input slots share one type parameter `T` in every opset.
const ONE_TYPE: &[(&str, &[usize])] = &[
    ("Add", &[0, 1]),
    ("Sub", &[0, 1]),
    ("Mul", &[0, 1]),
    ("Div", &[0, 1]),
    ("MatMul", &[0, 1]),
    ("Gemm", &[0, 1, 2]),
    ("Conv", &[0, 1, 2]),
    ("ConvTranspose", &[0, 1, 2]),
    ("PRelu", &[0, 1]),
    ("Equal", &[0, 1]),
    ("Less", &[0, 1]),
    ("Greater", &[0, 1]),
    ("Where", &[1, 2]),
    ("Concat", &[]),
    ("Sum", &[]),
    ("Max", &[]),
    ("Min", &[]),
    ("Mean", &[]),
];

/// Checks `model`; the error names the node or value and what is wrong.
pub fn check(model: &ModelProto) -> Result<(), String> {
    if model.ir_version > MAX_IR {
        return Err(format!(
            "IR version {} is newer than any ONNX release defines (phantom reads up to {MAX_IR}; ONNX Runtime \
             1.31 up to 13): the file is corrupt, or re-save it with an onnx release that writes IR 13",
            model.ir_version
        ));
    }
    opset(model)?;
    let Some(g) = &model.graph else {
        return Ok(());
    };
    if !g.node.is_empty() && g.output.is_empty() {
        return Err("the graph declares no outputs, so no node's value is asked for".into());
    }
    initializer_dims(g)?;
    super::loader_data::check_graph(g)?;
    defined_once(g)?;
    let opsets: HashMap<&str, i64> = model
        .opset_import
        .iter()
        .map(|o| match o.domain.as_str() {
            "ai.onnx" => ("", o.version),
            d => (d, o.version),
        })
        .collect();
    nodes(g, &opsets)
}

/// The default-domain opset is one ONNX Runtime supports: below opset 7 it implements an op only where its
/// definition at that opset is not a legacy one (`Relu(1)`, `Add(1)` carry `consumed_inputs` and have no kernel;
/// `Not(1)` does).
fn opset(model: &ModelProto) -> Result<(), String> {
    let default = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx");
    let (Some(o), Some(g)) = (default, model.graph.as_ref()) else {
        return Ok(());
    };
    if o.version >= MIN_OPSET {
        return Ok(());
    }
    let legacy = (g.node.iter())
        .filter(|n| n.domain.is_empty() || n.domain == "ai.onnx")
        .find(|n| {
            resolved("", &n.op_type, o.version).is_some_and(|(_, a)| a.contains(&"consumed_inputs"))
        });
    match legacy {
        Some(n) => Err(format!(
            "it imports ai.onnx opset {}, where {} is the legacy definition no ONNX Runtime implements (it supports \
             opset {MIN_OPSET} and later; ops such as Relu and Add have no kernel at their opset-1 versions): convert \
             it with onnx.version_converter.convert_version(model, 13)",
            o.version, n.op_type
        )),
        None => Ok(()),
    }
}

/// The definition of `op` in `domain` at `opset`: the version it was defined in and the attributes it defines.
fn resolved(domain: &str, op: &str, opset: i64) -> Option<(i64, &'static [&'static str])> {
    // The table is sorted by (domain, op, version): find the op's rows by binary search (a scan of all of them
    // per node was a tenth of a 6,000-node model's import).
    let table = super::onnx_attrs::ATTRIBUTES;
    let key = (domain, op);
    let first = table.partition_point(|(d, op, _, _)| (*d, *op) < key);
    table[first..]
        .iter()
        .take_while(|(d, op, _, _)| (*d, *op) == key)
        .filter(|(_, _, since, _)| *since <= opset)
        .max_by_key(|(_, _, since, _)| *since)
        .map(|(_, _, since, known)| (*since, *known))
}

pub(super) fn at(i: usize, n: &NodeProto) -> String {
    match n.name.is_empty() {
        true => format!("node #{i} ({})", n.op_type),
        false => format!("node `{}` ({})", n.name, n.op_type),
    }
}

fn initializer_dims(g: &GraphProto) -> Result<(), String> {
    for t in &g.initializer {
        let dims: Option<Vec<usize>> = t.dims.iter().map(|&d| usize::try_from(d).ok()).collect();
        let fits = dims.is_some_and(|d| crate::tensor::checked_nbytes(&d, 8).is_some());
        if !fits {
            return Err(format!(
                "initializer `{}` has dims {:?}: negative, or more elements than any memory holds",
                t.name, t.dims
            ));
        }
    }
    Ok(())
}

/// Each value is defined once: by a graph input and/or an initializer (IR 3 lists initializers as inputs too), or
/// by one node's output.
fn defined_once(g: &GraphProto) -> Result<(), String> {
    let outer: HashSet<&str> = g
        .input
        .iter()
        .map(|v| v.name.as_str())
        .chain(g.initializer.iter().map(|t| t.name.as_str()))
        .collect();
    let mut written: HashMap<&str, usize> = HashMap::new();
    for (i, n) in g.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if outer.contains(o.as_str()) {
                return Err(format!(
                    "{}: writes `{o}`, which is also a graph input or initializer (a name defined twice)",
                    at(i, n)
                ));
            }
            if let Some(first) = written.insert(o.as_str(), i) {
                return Err(format!(
                    "{}: writes `{o}`, which {} writes too (a name defined twice)",
                    at(i, n),
                    at(first, &g.node[first])
                ));
            }
        }
    }
    Ok(())
}

/// Per node, in this graph and every body: attributes given once, one-type inputs of one declared type.
fn nodes(g: &GraphProto, opsets: &HashMap<&str, i64>) -> Result<(), String> {
    let types: HashMap<&str, i32> = g
        .input
        .iter()
        .filter_map(|v| Some((v.name.as_str(), declared(v)?)))
        .chain(g.initializer.iter().map(|t| (t.name.as_str(), t.data_type)))
        .collect();
    for (i, n) in g.node.iter().enumerate() {
        let mut seen = HashSet::new();
        if let Some(a) = n.attribute.iter().find(|a| !seen.insert(a.name.as_str())) {
            return Err(format!(
                "{}: attribute `{}` is given twice",
                at(i, n),
                a.name
            ));
        }
        one_type(n, &types).map_err(|why| format!("{}: {why}", at(i, n)))?;
        defined_attributes(n, opsets).map_err(|why| format!("{}: {why}", at(i, n)))?;
        for a in &n.attribute {
            attribute_data(a).map_err(|why| format!("{}: {why}", at(i, n)))?;
        }
        window(n).map_err(|why| format!("{}: {why}", at(i, n)))?;
        for a in &n.attribute {
            for body in a.g.iter().chain(&a.graphs) {
                nodes(body, opsets)
                    .map_err(|why| format!("{}, attribute `{}`: {why}", at(i, n), a.name))?;
            }
        }
    }
    Ok(())
}

/// Every attribute of an `ai.onnx`/`ai.onnx.ml` node is one its op defines in the version the model's opset
/// resolves it to (ONNX Runtime refuses the model with "Unrecognized attribute" otherwise: an `axis` on an opset-17
/// `Add`, which only `Add-1` to `Add-6` had); ops ONNX does not define are left to the checks that know them.
fn defined_attributes(n: &NodeProto, opsets: &HashMap<&str, i64>) -> Result<(), String> {
    let domain = match n.domain.as_str() {
        "ai.onnx" => "",
        d => d,
    };
    let Some(&opset) = opsets.get(domain) else {
        return Ok(());
    };
    let Some((since, known)) = resolved(domain, &n.op_type, opset) else {
        // An op of the default domain that this opset does not define yet (LayerNormalization at opset 6).
        return match (domain.is_empty(), resolved(domain, &n.op_type, i64::MAX)) {
            (true, Some(_)) => Err(format!(
                "{} is not defined at opset {opset}, which the model imports (it came later): re-export with a \
                 newer opset",
                n.op_type
            )),
            _ => Ok(()),
        };
    };
    match n.attribute.iter().find(|a| !known.contains(&a.name.as_str())) {
        Some(a) => Err(format!(
            "attribute `{}` is not one {}-{since} defines ({}): remove it, or fix the exporter that wrote it",
            a.name,
            n.op_type,
            match known.is_empty() {
                true => "it takes none".to_string(),
                false => format!("it takes {}", known.join(", ")),
            }
        )),
        None => Ok(()),
    }
}

/// An attribute carries data of the type it declares only (ONNX Runtime: "type field and data field mismatch").
fn attribute_data(a: &AttributeProto) -> Result<(), String> {
    use attribute_proto::AttributeType as T;
    if a.r#type == T::Undefined as i32 {
        return Ok(());
    }
    let carried = [
        (T::Float, a.f != 0.0 || a.f.is_nan()),
        (T::Int, a.i != 0),
        (T::String, !a.s.is_empty()),
        (T::Tensor, a.t.is_some()),
        (T::Graph, a.g.is_some()),
        (T::Floats, !a.floats.is_empty()),
        (T::Ints, !a.ints.is_empty()),
        (T::Strings, !a.strings.is_empty()),
        (T::Tensors, !a.tensors.is_empty()),
        (T::Graphs, !a.graphs.is_empty()),
    ];
    match carried.iter().find(|(t, on)| *on && *t as i32 != a.r#type) {
        Some((t, _)) => Err(format!(
            "attribute `{}` declares type {} but carries {t:?} data: the file is corrupt or its writer is broken",
            a.name,
            T::try_from(a.r#type).map_or_else(|_| a.r#type.to_string(), |d| format!("{d:?}")),
        )),
        None => Ok(()),
    }
}

/// Ops with a sliding window, and whether they need `kernel_shape` (a Conv takes it from its weights).
const WINDOWED: &[(&str, bool)] = &[
    ("MaxPool", true),
    ("AveragePool", true),
    ("LpPool", true),
    ("Conv", false),
    ("ConvTranspose", false),
];

/// A window's attributes as ONNX Runtime's kernels require them before any value is seen: a positive
/// `kernel_shape`, positive `strides` and `dilations` of the kernel's rank, `pads` of twice its rank, none negative
/// and, on pools, each smaller than the kernel.
fn window(n: &NodeProto) -> Result<(), String> {
    let Some((_, needs_kernel)) = WINDOWED
        .iter()
        .find(|(op, _)| *op == n.op_type && (n.domain.is_empty() || n.domain == "ai.onnx"))
    else {
        return Ok(());
    };
    let ints = |name: &str| n.attribute.iter().find(|a| a.name == name).map(|a| &a.ints);
    let kernel = ints("kernel_shape");
    if *needs_kernel && kernel.is_none_or(|k| k.is_empty()) {
        return Err("attribute `kernel_shape` is missing or empty".into());
    }
    let rank = kernel.map(|k| k.len());
    for name in ["kernel_shape", "strides", "dilations"] {
        let Some(v) = ints(name) else { continue };
        if let Some(bad) = v.iter().find(|&&x| x <= 0) {
            return Err(format!(
                "attribute `{name}` has {bad}; every entry must be positive"
            ));
        }
        if rank.is_some_and(|r| r != v.len()) {
            return Err(format!(
                "attribute `{name}` has {} entries, `kernel_shape` {}",
                v.len(),
                rank.unwrap_or(0)
            ));
        }
    }
    if let Some(pads) = ints("pads") {
        if let Some(bad) = pads.iter().find(|&&p| p < 0) {
            return Err(format!(
                "attribute `pads` has {bad}; pads cannot be negative"
            ));
        }
        if let Some(k) = kernel {
            if pads.len() != 2 * k.len() {
                return Err(format!(
                    "attribute `pads` has {} entries; a {}-d kernel takes {}",
                    pads.len(),
                    k.len(),
                    2 * k.len()
                ));
            }
            let pool = *needs_kernel;
            if let Some(i) = (0..pads.len()).find(|&i| pool && pads[i] >= k[i % k.len()]) {
                return Err(format!(
                    "attribute `pads` entry {i} is {}, not smaller than the kernel's {} (ONNX Runtime requires it)",
                    pads[i],
                    k[i % k.len()]
                ));
            }
        }
    }
    Ok(())
}

fn one_type(n: &NodeProto, types: &HashMap<&str, i32>) -> Result<(), String> {
    let Some((_, slots)) = ONE_TYPE
        .iter()
        .find(|(op, _)| *op == n.op_type && n.domain.is_empty())
    else {
        return Ok(());
    };
    let all: Vec<usize> = (0..n.input.len()).collect();
    let slots = if slots.is_empty() { &all[..] } else { slots };
    let mut first: Option<(&str, i32)> = None;
    for name in slots
        .iter()
        .filter_map(|&k| n.input.get(k))
        .filter(|s| !s.is_empty())
    {
        let Some(&t) = types.get(name.as_str()) else {
            continue;
        };
        match first {
            None => first = Some((name, t)),
            Some((other, u)) if u != t => {
                let ty = |c| crate::tensor::DType::from_onnx(c).name();
                return Err(format!(
                    "input `{name}` is {} but `{other}` is {}; the op takes one element type (ONNX Runtime \
                     refuses it)",
                    ty(t),
                    ty(u)
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_attribute_table_is_sorted_for_its_binary_search() {
        let t = super::super::onnx_attrs::ATTRIBUTES;
        let unsorted = t
            .windows(2)
            .find(|w| (w[0].0, w[0].1, w[0].2) >= (w[1].0, w[1].1, w[1].2));
        assert!(unsorted.is_none(), "out of order: {unsorted:?}");
    }
}
