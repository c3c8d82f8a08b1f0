//! Element types of every value of an ONNX graph, without running it: declared types first (inputs, outputs,
//! initializers, value_info), then per-op rules in topological order (Shape is int64, Equal is bool, Cast is its
//! `to`, most ops take the type of their first typed input...), recursively for `If`/`Loop`/`Scan` bodies.

use std::collections::HashMap;

use tract_onnx::pb::{type_proto, GraphProto, NodeProto, ValueInfoProto};

pub const FLOAT: i32 = 1;
pub const UINT8: i32 = 2;
pub const INT32: i32 = 6;
pub const INT64: i32 = 7;
pub const STRING: i32 = 8;
pub const BOOL: i32 = 9;
pub const FLOAT16: i32 = 10;
pub const BFLOAT16: i32 = 16;

/// The element type a value info declares.
pub fn declared(vi: &ValueInfoProto) -> Option<i32> {
    match vi.r#type.as_ref()?.value.as_ref()? {
        type_proto::Value::TensorType(t) if t.elem_type != 0 => Some(t.elem_type),
        _ => None,
    }
}

/// Sets the element type a value info declares (tensor types only).
pub fn set_declared(vi: &mut ValueInfoProto, code: i32) {
    if let Some(type_proto::Value::TensorType(t)) =
        vi.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = code;
    }
}

fn attr_i(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

fn attr_graph<'a>(n: &'a NodeProto, name: &str) -> Option<&'a GraphProto> {
    n.attribute
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.g.as_ref())
}

/// Element types of the outputs of `n`, given the types known so far.
fn node_types(n: &NodeProto, known: &HashMap<String, i32>) -> Vec<Option<i32>> {
    let input = |k: usize| n.input.get(k).and_then(|i| known.get(i)).copied();
    let first = n.input.iter().find_map(|i| known.get(i)).copied();
    let all = |t: Option<i32>| vec![t; n.output.len()];
    let body_outputs = |g: &GraphProto, skip: usize| -> Vec<Option<i32>> {
        let inner = infer(g, known);
        g.output
            .iter()
            .skip(skip)
            .map(|o| declared(o).or_else(|| inner.get(&o.name).copied()))
            .collect()
    };
    match n.op_type.as_str() {
        "Constant" => {
            let a = n.attribute.first();
            all(a.map(|a| match a.name.as_str() {
                "value" => a.t.as_ref().map(|t| t.data_type).unwrap_or(FLOAT),
                "value_float" | "value_floats" => FLOAT,
                "value_int" | "value_ints" => INT64,
                _ => STRING,
            }))
        }
        "Cast" => all(attr_i(n, "to").map(|v| v as i32)),
        "CastLike" => all(input(1)),
        "Shape" | "Size" | "NonZero" | "ArgMax" | "ArgMin" | "NonMaxSuppression" => {
            all(Some(INT64))
        }
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor"
        | "Not" | "IsNaN" | "IsInf" => all(Some(BOOL)),
        "TopK" | "MaxPool" => vec![first, Some(INT64)],
        // Dropout's second output is its mask.
        "Dropout" => vec![first, Some(BOOL)],
        // ai.onnx.ml: labels (int64, or strings when the classes are named), then float scores.
        "TreeEnsembleClassifier" | "LinearClassifier" | "SVMClassifier" => {
            let strings = n.attribute.iter().any(|a| a.name == "classlabels_strings");
            vec![Some(if strings { STRING } else { INT64 }), Some(FLOAT)]
        }
        "TreeEnsembleRegressor"
        | "LinearRegressor"
        | "SVMRegressor"
        | "Scaler"
        | "Normalizer"
        | "FeatureVectorizer" => all(Some(FLOAT)),
        "Unique" => vec![first, Some(INT64), Some(INT64), Some(INT64)],
        "ConstantOfShape" => all(Some(
            n.attribute
                .iter()
                .find(|a| a.name == "value")
                .and_then(|a| a.t.as_ref())
                .map(|t| t.data_type)
                .unwrap_or(FLOAT),
        )),
        "QuantizeLinear" => all(attr_i(n, "output_dtype")
            .filter(|&d| d != 0)
            .map(|d| d as i32)
            .or(input(2))
            .or(Some(UINT8))),
        "DequantizeLinear" => all(input(1)),
        "DynamicQuantizeLinear" => vec![Some(UINT8), Some(FLOAT), Some(UINT8)],
        "MatMulInteger" | "ConvInteger" => all(Some(INT32)),
        "QLinearConv" | "QLinearMatMul" => all(input(7)),
        "Where" => all(input(1)),
        // ONNX Runtime's contrib ops whose first input is not of the output's type.
        "EmbedLayerNormalization" => vec![input(2), Some(INT32), input(2)],
        "GatherBlockQuantized" | "DynamicQuantizeMatMul" | "MatMulIntegerToFloat" => all(input(2)),
        "MatMulNBits" | "RotaryEmbedding" => all(input(0)),
        "OneHot" => all(input(2)),
        "Multinomial" => all(attr_i(n, "dtype").map(|d| d as i32).or(Some(INT32))),
        "EyeLike" | "RandomNormalLike" | "RandomUniformLike" | "Bernoulli" => {
            all(attr_i(n, "dtype")
                .filter(|&d| d != 0)
                .map(|d| d as i32)
                .or(first))
        }
        "RandomNormal" | "RandomUniform" => {
            all(attr_i(n, "dtype").map(|d| d as i32).or(Some(FLOAT)))
        }
        "If" => attr_graph(n, "then_branch")
            .map(|g| body_outputs(g, 0))
            .unwrap_or_else(|| all(None)),
        "Loop" => attr_graph(n, "body")
            .map(|g| body_outputs(g, 1))
            .unwrap_or_else(|| all(None)),
        "Scan" => attr_graph(n, "body")
            .map(|g| body_outputs(g, 0))
            .unwrap_or_else(|| all(None)),
        _ => all(first),
    }
}

/// Element type of every value of `g` that can be known; `outer` holds the types visible from enclosing graphs.
pub fn infer(g: &GraphProto, outer: &HashMap<String, i32>) -> HashMap<String, i32> {
    let mut known = outer.clone();
    for vi in g.input.iter().chain(&g.output).chain(&g.value_info) {
        if let Some(t) = declared(vi) {
            known.insert(vi.name.clone(), t);
        }
    }
    for t in &g.initializer {
        known.insert(t.name.clone(), t.data_type);
    }
    // Nodes may be listed out of order: repeat until nothing new is learnt.
    loop {
        let mut learnt = false;
        for n in &g.node {
            let types = node_types(n, &known);
            for (o, t) in n.output.iter().zip(types) {
                if let (false, Some(t)) = (o.is_empty(), t) {
                    if !known.contains_key(o) {
                        known.insert(o.clone(), t);
                        learnt = true;
                    }
                }
            }
        }
        if !learnt {
            break;
        }
    }
    known
}

/// The element type (an ONNX code) of every value of `graph` that [`infer`] learns; empty when the model cannot be
/// decoded. The weights are not decoded: only their element types are needed.
pub fn element_types(graph: &crate::Graph) -> HashMap<String, i32> {
    match crate::skeleton::Skeleton::of(graph) {
        Ok(s) => infer(&s.proto.graph.unwrap_or_default(), &s.types),
        Err(_) => HashMap::new(),
    }
}

/// The values of `graph` held in a narrow float format (float8, float4), by name, from the element types [`infer`]
/// learns (declared types, Cast targets, QuantizeLinear's output type...). Empty for a model whose default-domain
/// opset is below 19, which has no such type, and when the model cannot be decoded. The weights are not decoded.
pub fn narrow_floats(graph: &crate::Graph) -> HashMap<String, crate::tensor::formats::Format> {
    let opset = (graph.opsets.iter())
        .find(|(d, _)| d.is_empty() || d == "ai.onnx")
        .map_or(0, |(_, v)| *v);
    if opset < 19 {
        return HashMap::new();
    }
    (element_types(graph).into_iter())
        .filter_map(|(name, code)| {
            let f = crate::tensor::formats::Format::from_onnx(code)?;
            f.is_float().then_some((name, f))
        })
        .collect()
}
