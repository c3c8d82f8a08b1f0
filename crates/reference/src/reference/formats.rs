//! The model rewritten so that tract can hold ONNX's narrow number formats (float8, float4, int4, int2), before
//! it is widened: every value, initializer and constant of such a format takes its carrier type (float32 for the
//! float formats, then widened to f64 like every float; int8/uint8 for the integer ones), its data decoded exactly.
//! The format stays known where it decides a result: `Cast` keeps its target (phantom's kernel rounds onto it,
//! [`super::contrib`]), a `CastLike` to such a type becomes that `Cast`, and `QuantizeLinear`/`DequantizeLinear`
//! (and ORT's `GatherBlockQuantized`) of such a type are told their format in an attribute phantom's kernel reads.
//! A `Cast` or `CastLike` that narrows a value to float16, bfloat16 or float32 (from a wider float, or from an
//! integer) is marked with [`ROUND_ATTR`]: widening makes every float f64, and phantom's kernel then rounds the
//! value onto the type the model asks for, as the model computes it.

use std::collections::HashMap;
use std::path::Path;

use tract_onnx::pb::{
    attribute_proto::AttributeType, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto,
    TensorProto,
};

use crate::error::Result;
use crate::model::proto::{tensor_from_proto, tensor_to_proto};
use crate::model::types::infer;
use crate::tensor::formats::Format;

/// The attribute that tells a Q/DQ node the narrow format of its quantized side.
pub const FORMAT_ATTR: &str = "phantom_format";

/// The attribute that tells a widened `Cast` the float type (its ONNX code) it rounds onto.
pub const ROUND_ATTR: &str = "phantom_round_to";

const FLOAT: i32 = 1;
const FLOAT16: i32 = 10;
const DOUBLE: i32 = 11;
const BFLOAT16: i32 = 16;

/// Whether a `Cast` from element type `from` to `to` rounds a value: onto float16 or bfloat16 from any type that
/// holds values they do not (a wider float, the other 16-bit float, an integer, a narrow format whose range is
/// wider, as float8 E8M0's; not from strings or booleans), onto float32 from double. An integer cast to float32 is
/// left to tract: it is exact below 2^24, and shape arithmetic (lengths, sizes) runs through such casts, which tract
/// must see through. A float32 to float32
/// cast rounds nothing: the reference computes the model's float32 values exactly, in f64.
fn narrows(from: i32, to: i32) -> bool {
    let rounds = match to {
        FLOAT16 | BFLOAT16 => from != to && from != 0,
        FLOAT => from == DOUBLE,
        _ => false,
    };
    rounds && from != 8 && from != 9
}

/// Rewrites `model` as described above; returns how many tensors were decoded.
pub fn carry(model: &mut ModelProto, base: Option<&Path>) -> Result<usize> {
    let mut n = 0;
    if let Some(g) = model.graph.as_mut() {
        carry_graph(g, base, &HashMap::new(), &mut n)?;
    }
    Ok(n)
}

fn carry_graph(
    g: &mut GraphProto,
    base: Option<&Path>,
    outer: &HashMap<String, i32>,
    n: &mut usize,
) -> Result<()> {
    let types = infer(g, outer);
    for node in g.node.iter_mut() {
        mark(node, &types);
        for a in node.attribute.iter_mut() {
            for t in a.t.iter_mut().chain(a.tensors.iter_mut()) {
                carry_tensor(t, base, n)?;
            }
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                carry_graph(sub, base, &types, n)?;
            }
        }
    }
    for t in g.initializer.iter_mut() {
        carry_tensor(t, base, n)?;
    }
    for s in g.sparse_initializer.iter_mut() {
        if let Some(v) = s.values.as_mut() {
            carry_tensor(v, base, n)?;
        }
    }
    for vi in g
        .input
        .iter_mut()
        .chain(&mut g.output)
        .chain(&mut g.value_info)
    {
        if let Some(type_proto::Value::TensorType(t)) =
            vi.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            if let Some(f) = Format::from_onnx(t.elem_type) {
                t.elem_type = f.carrier().onnx_code();
            }
        }
    }
    Ok(())
}

/// A tensor of a narrow format decoded into its carrier.
fn carry_tensor(t: &mut TensorProto, base: Option<&Path>, n: &mut usize) -> Result<()> {
    if Format::from_onnx(t.data_type).is_some() {
        let host = tensor_from_proto(t, base)?;
        *t = tensor_to_proto(&t.name, &host);
        *n += 1;
    }
    Ok(())
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i,
        ..Default::default()
    }
}

/// Marks a `Cast` from element type `from` to `to` with [`ROUND_ATTR`] where it narrows.
fn mark_rounding(node: &mut NodeProto, from: Option<i32>, to: i32) {
    if from.is_some_and(|from| narrows(from, to)) {
        node.attribute.push(int_attr(ROUND_ATTR, to as i64));
    }
}

/// The format-deciding rewrites of one node, given the element types of the values around it.
fn mark(node: &mut NodeProto, types: &HashMap<String, i32>) {
    let format_of = |k: usize| {
        node.input
            .get(k)
            .and_then(|i| types.get(i))
            .and_then(|&c| Format::from_onnx(c))
    };
    let type_of = |k: usize| node.input.get(k).and_then(|i| types.get(i)).copied();
    match node.op_type.as_str() {
        "CastLike" => {
            let from = type_of(0);
            let to = match format_of(1) {
                Some(f) => Some(f.onnx_code()),
                None => type_of(1).filter(|&to| from.is_some_and(|from| narrows(from, to))),
            };
            if let Some(to) = to {
                node.op_type = "Cast".into();
                node.input.truncate(1);
                node.attribute.push(int_attr("to", to as i64));
                mark_rounding(node, from, to);
            }
        }
        "Cast" => {
            let to = node
                .attribute
                .iter()
                .find(|a| a.name == "to")
                .map(|a| a.i as i32);
            if let Some(to) = to {
                mark_rounding(node, type_of(0), to);
            }
        }
        "QuantizeLinear" => {
            let by_attr = node
                .attribute
                .iter()
                .find(|a| a.name == "output_dtype")
                .and_then(|a| Format::from_onnx(a.i as i32));
            if let Some(f) = format_of(2).or(by_attr) {
                node.attribute.retain(|a| a.name != "output_dtype");
                node.attribute
                    .push(int_attr(FORMAT_ATTR, f.onnx_code() as i64));
            }
        }
        "DequantizeLinear" | "GatherBlockQuantized" => {
            if let Some(f) = format_of(0) {
                node.attribute
                    .push(int_attr(FORMAT_ATTR, f.onnx_code() as i64));
            }
        }
        _ => {}
    }
}
