//! Rewrites a float32/float16/bfloat16 model as float64 before tract sees it, so that everything tract computes at import
//! (constant folding, BatchNorm scale/shift, expansion constants built from initializers) happens in f64 too.
//!
//! FLOAT, FLOAT16 and BFLOAT16 become DOUBLE in graph inputs, outputs, value_info, initializers (external data is read and
//! inlined), tensor attributes, `Constant` value_float(s), `Cast`/`EyeLike`/random-op dtypes, recursively in
//! control-flow bodies. Float *attributes* (alpha, epsilon...) stay float32, as the ONNX spec types them. Inputs
//! tract requires in float32 (Resize roi and scales, quantization scales) are left as they are when they are
//! initializers, and cast to float32 in front of the op when the graph computes them (the rest of the graph stays f64).

use std::collections::HashSet;
use std::path::Path;

use rayon::prelude::*;

use tract_onnx::pb::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto,
};

use tract_onnx::prelude::{Datum, DatumType, TractResult, TypedModel};
use tract_onnx::tract_core::floats::FloatPrecisionTranslator;
use tract_onnx::tract_core::model::translator::Translate;
use tract_onnx::tract_core::ops::logic::IfThenElse;

use super::Rounding;
use crate::error::Result;
use crate::model::proto::{stored_bytes, tensor_from_proto, tensor_to_proto};
use crate::tensor::DType;

const FLOAT: i32 = 1;
const FLOAT16: i32 = 10;
const DOUBLE: i32 = 11;
const BFLOAT16: i32 = 16;

fn narrow_float(code: i32) -> bool {
    code == FLOAT || code == FLOAT16 || code == BFLOAT16
}

/// Widens every float32/float16/bfloat16 tensor and type in `model` to float64. Returns how many tensors were widened.
/// With `round`, top-level initializers and constants are first rounded to the element type it names for them
/// (the emulated low-precision run).
pub fn widen(
    model: &mut ModelProto,
    base: Option<&Path>,
    round: Option<&Rounding>,
) -> Result<usize> {
    let mut n = 0;
    if let Some(g) = model.graph.as_mut() {
        widen_graph(g, base, &mut n, round)?;
    }
    Ok(n)
}

fn widen_tensor(
    t: &mut TensorProto,
    base: Option<&Path>,
    n: &mut usize,
    round_as: Option<DType>,
) -> Result<()> {
    if round_as.is_none() {
        if let Some(raw) = widened_raw(t, base)? {
            let mut wide = TensorProto {
                name: std::mem::take(&mut t.name),
                dims: std::mem::take(&mut t.dims),
                data_type: DOUBLE,
                raw_data: raw,
                ..Default::default()
            };
            wide.doc_string = std::mem::take(&mut t.doc_string);
            *t = wide;
            *n += 1;
            return Ok(());
        }
    }
    if narrow_float(t.data_type) {
        let host = tensor_from_proto(t, base)?;
        let host = match round_as {
            Some(d) => host.cast(d).expect("floats cast"),
            None => host,
        };
        let wide = host.cast(DType::F64).expect("floats cast to f64");
        *t = tensor_to_proto(&t.name, &wide);
        *n += 1;
    }
    Ok(())
}

/// A float32/float16/bfloat16 tensor's stored bytes (inline or external) widened straight to float64's raw bytes:
/// one pass and one buffer, where decoding, casting and encoding again took three (a third of a decoder's reference
/// run went there). `None` where the tensor is not such a tensor, keeps its numbers in a typed field, or its bytes
/// do not match its dims (the general path then says what is wrong).
fn widened_raw(t: &TensorProto, base: Option<&Path>) -> Result<Option<Vec<u8>>> {
    let (size, get): (usize, fn(&[u8]) -> f64) = match t.data_type {
        FLOAT => (4, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
        FLOAT16 => (2, |b| half::f16::from_le_bytes([b[0], b[1]]).to_f64()),
        BFLOAT16 => (2, |b| half::bf16::from_le_bytes([b[0], b[1]]).to_f64()),
        _ => return Ok(None),
    };
    if t.data_location != Some(1) && t.raw_data.is_empty() {
        return Ok(None);
    }
    let elems = t.dims.iter().try_fold(1usize, |acc, &d| {
        usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    });
    let Some(bytes) = stored_bytes(t, base)? else {
        return Ok(None);
    };
    if elems.and_then(|e| e.checked_mul(size)) != Some(bytes.len()) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(bytes.len() / size * 8);
    for b in bytes.chunks_exact(size) {
        out.extend_from_slice(&get(b).to_le_bytes());
    }
    Ok(Some(out))
}

fn widen_types(g: &mut GraphProto) {
    use tract_onnx::pb::type_proto::Value;
    for vi in g
        .input
        .iter_mut()
        .chain(g.output.iter_mut())
        .chain(g.value_info.iter_mut())
    {
        if let Some(Value::TensorType(t)) = vi.r#type.as_mut().and_then(|t| t.value.as_mut()) {
            if narrow_float(t.elem_type) {
                t.elem_type = DOUBLE;
            }
        }
    }
}

fn scalar_double(name: &str, values: &[f32], scalar: bool) -> AttributeProto {
    let t = TensorProto {
        dims: if scalar {
            vec![]
        } else {
            vec![values.len() as i64]
        },
        data_type: DOUBLE,
        double_data: values.iter().map(|&v| v as f64).collect(),
        ..Default::default()
    };
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Tensor as i32,
        t: Some(t),
        ..Default::default()
    }
}

fn widen_node(
    node: &mut NodeProto,
    base: Option<&Path>,
    n: &mut usize,
    round: Option<&Rounding>,
) -> Result<()> {
    let op = node.op_type.clone();
    if op == "LayerNormalization" {
        stash_in_f64(node);
    }
    let round_as = match (round, node.output.first()) {
        (Some(r), Some(o)) => r.get(o).copied(),
        _ => None,
    };
    for a in node.attribute.iter_mut() {
        if let Some(t) = a.t.as_mut() {
            widen_tensor(t, base, n, round_as)?;
        }
        for t in a.tensors.iter_mut() {
            widen_tensor(t, base, n, round_as)?;
        }
        if let Some(g) = a.g.as_mut() {
            widen_graph(g, base, n, None)?;
        }
        for g in a.graphs.iter_mut() {
            widen_graph(g, base, n, None)?;
        }
        let dtype_attr = matches!(
            (op.as_str(), a.name.as_str()),
            ("Cast", "to")
                | (
                    "EyeLike"
                        | "RandomNormal"
                        | "RandomUniform"
                        | "RandomNormalLike"
                        | "RandomUniformLike"
                        | "Bernoulli",
                    "dtype"
                )
        );
        if dtype_attr && narrow_float(a.i as i32) {
            a.i = DOUBLE as i64;
        }
        let r = |v: f32| match round_as {
            Some(DType::F16) => half::f16::from_f32(v).to_f32(),
            Some(DType::Bf16) => half::bf16::from_f32(v).to_f32(),
            _ => v,
        };
        if op == "Constant" && a.name == "value_float" {
            *a = scalar_double("value", &[r(a.f)], true);
            *n += 1;
        } else if op == "Constant" && a.name == "value_floats" {
            let v: Vec<f32> = a.floats.iter().map(|&v| r(v)).collect();
            *a = scalar_double("value", &v, false);
            *n += 1;
        }
    }
    Ok(())
}

/// LayerNormalization computes in its `stash_type` (float32 by default): tract casts its input to that type, and
/// when tract folds a LayerNormalization of constants at typing, before the model is translated to f64, the result
/// is float32's (3e-7 off on unit-scale values). Stash in f64 instead.
fn stash_in_f64(node: &mut NodeProto) {
    match node.attribute.iter_mut().find(|a| a.name == "stash_type") {
        Some(a) => a.i = DOUBLE as i64,
        None => node.attribute.push(AttributeProto {
            name: "stash_type".into(),
            r#type: AttributeType::Int as i32,
            i: DOUBLE as i64,
            ..Default::default()
        }),
    }
}

/// Values tract only accepts as float32: (op, input slot).
const KEEP_F32: &[(&str, usize)] = &[
    ("Resize", 1),
    ("Resize", 2),
    ("QuantizeLinear", 1),
    ("DequantizeLinear", 1),
    ("Upsample", 1),
];

/// The initializers of `g` read in a slot tract only accepts as float32 ([`KEEP_F32`]): left as they are.
pub fn kept_f32(g: &GraphProto) -> HashSet<String> {
    let inits: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    (g.node.iter())
        .flat_map(|node| {
            KEEP_F32
                .iter()
                .filter(|(op, _)| *op == node.op_type)
                .filter_map(|(_, i)| node.input.get(*i).cloned())
        })
        .filter(|name| inits.contains(name.as_str()))
        .collect()
}

/// A computed value in a slot tract only accepts as float32 (Resize scales made by a Concat or a Div) is float64 in
/// the widened graph: a Cast to float32 is put in front of that slot. Returns the casts' outputs (kept as they are).
fn cast_computed_f32_inputs(g: &mut GraphProto, inits: &HashSet<String>) -> Vec<String> {
    let mut made = vec![];
    let mut k = 0;
    while k < g.node.len() {
        let node = &g.node[k];
        let slots: Vec<usize> = KEEP_F32
            .iter()
            .filter(|(op, _)| *op == node.op_type)
            .map(|(_, i)| *i)
            .filter(|&i| {
                node.input
                    .get(i)
                    .is_some_and(|n| !n.is_empty() && !inits.contains(n))
            })
            .collect();
        for i in slots {
            let src = g.node[k].input[i].clone();
            let cast_out = format!("{src}\u{1}f32");
            g.node[k].input[i] = cast_out.clone();
            made.push(cast_out.clone());
            g.node.insert(
                k,
                NodeProto {
                    name: format!("\u{1}keep_f32/{src}"),
                    op_type: "Cast".into(),
                    input: vec![src],
                    output: vec![cast_out],
                    attribute: vec![AttributeProto {
                        name: "to".into(),
                        i: 1,
                        r#type: AttributeType::Int as i32,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            );
            k += 1;
        }
        k += 1;
    }
    made
}

fn widen_graph(
    g: &mut GraphProto,
    base: Option<&Path>,
    n: &mut usize,
    round: Option<&Rounding>,
) -> Result<()> {
    widen_types(g);
    let inits: HashSet<String> = g.initializer.iter().map(|t| t.name.clone()).collect();
    let mut keep = kept_f32(g);
    keep.extend(cast_computed_f32_inputs(g, &inits));
    // Weights convert independently, on every core (a third of the reference's parse on a 28M-weight Swin-T).
    let widened = (g.initializer.par_iter_mut())
        .filter(|t| !keep.contains(&t.name))
        .map(|t| {
            let (round_as, mut k) = (round.and_then(|r| r.get(&t.name).copied()), 0);
            widen_tensor(t, base, &mut k, round_as).map(|_| k)
        })
        .collect::<Result<Vec<usize>>>()?;
    *n += widened.iter().sum::<usize>();
    for s in g.sparse_initializer.iter_mut() {
        if let Some(v) = s.values.as_mut() {
            widen_tensor(v, base, n, None)?;
        }
    }
    for node in g
        .node
        .iter_mut()
        .filter(|node| !node.output.iter().any(|o| keep.contains(o)))
    {
        widen_node(node, base, n, round)?;
    }
    Ok(())
}

/// Translates f32 and f16 to f64, including `If` bodies (tract's translator leaves those alone). tract's IsNaN and
/// IsInf type their output as their input when it is f64 (they have no f64 kernel; phantom's own computes them), so
/// they are told their output is bool before the translation types what reads them (a `Where`).
pub(super) fn to_f64(model: &TypedModel) -> TractResult<TypedModel> {
    use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
    use tract_onnx::tract_core::ops::math::{IsInf, IsNan};
    let mut m = model.clone();
    for node in m.nodes.iter_mut() {
        if let Some(ite) = node.op_as_mut::<IfThenElse>() {
            ite.then_body = to_f64(&ite.then_body)?;
            ite.else_body = to_f64(&ite.else_body)?;
        }
        if let Some(ew) = node.op_as_mut::<ElementWiseOp>() {
            if ew.0.downcast_ref::<IsNan>().is_some() || ew.0.downcast_ref::<IsInf>().is_some() {
                ew.1 = Some(bool::datum_type());
            }
        }
    }
    let translate = |m: &TypedModel, from: DatumType| {
        FloatPrecisionTranslator::new(from, f64::datum_type()).translate_model(m)
    };
    translate(&m, f32::datum_type())
        .and_then(|m| translate(&m, tract_onnx::prelude::f16::datum_type()))
}
