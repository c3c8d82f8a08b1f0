//! Integer shape arithmetic evaluated in-process (Constant, Shape, Size, Gather, Unsqueeze, Squeeze, Reshape,
//! Concat, Cast, Add/Sub/Mul/Div, Equal, ConstantOfShape, Range, 1-D Slice on int64): models carry hundreds of these
//! nodes, and a one-node ONNX Runtime session for each costs milliseconds. Anything else (other types, other
//! forms) returns `None` and runs as a one-node ONNX Runtime session ([`super::host`]).

use ndarray::{ArrayD, Axis, IxDyn};
use tract_onnx::pb::NodeProto;

use super::ctx::attr;
use crate::tensor::{DType, Tensor};

fn i64s(t: &Tensor) -> Option<&ArrayD<i64>> {
    match t {
        Tensor::I64(a) => Some(a),
        _ => None,
    }
}

fn vec1(v: Vec<i64>) -> Tensor {
    let n = v.len();
    Tensor::I64(ArrayD::from_shape_vec(IxDyn(&[n]), v).expect("1-D"))
}

fn axis(a: i64, rank: usize) -> Option<usize> {
    let v = if a < 0 { a + rank as i64 } else { a };
    (0..rank.max(1) as i64).contains(&v).then_some(v as usize)
}

/// Input `i` of `ins`, when given and held on the host.
fn input<'t>(ins: &[Option<&'t Tensor>], i: usize) -> Option<&'t Tensor> {
    ins.get(i).copied().flatten()
}

/// The outputs of `n` from `ins` (host values), or `None` when this form is not handled here.
pub fn eval(n: &NodeProto, ins: &[Option<&Tensor>], opset: i64) -> Option<Vec<Tensor>> {
    let get = |i: usize| input(ins, i);
    let out = match n.op_type.as_str() {
        "Constant" => constant(n)?,
        "ConstantOfShape" => constant_of_shape(n, get(0)?)?,
        "Range" => range(ins)?,
        "Shape" => shape(n, get(0)?),
        "Size" => Tensor::I64(ArrayD::from_elem(IxDyn(&[]), get(0)?.len() as i64)),
        "Cast" => cast(n, get(0)?)?,
        "Gather" => gather(n, i64s(get(0)?)?, get(1)?)?,
        "Unsqueeze" | "Squeeze" | "Reshape" | "Flatten" => reshape(n, opset, ins)?,
        "Concat" => concat(n, ins)?,
        "Add" | "Sub" | "Mul" | "Div" | "Equal" => arithmetic(n, ins)?,
        "Slice" if opset >= 10 => slice(ins)?,
        _ => return None,
    };
    Some(vec![out])
}

// Values made from attributes and scalars.

/// A Constant node's value (`value`, or a scalar or list attribute).
fn constant(n: &NodeProto) -> Option<Tensor> {
    let a = n.attribute.first()?;
    Some(match a.name.as_str() {
        "value" => crate::model::proto::tensor_from_proto(a.t.as_ref()?, None).ok()?,
        "value_int" => Tensor::I64(ArrayD::from_elem(IxDyn(&[]), a.i)),
        "value_ints" => vec1(a.ints.clone()),
        "value_float" => Tensor::F32(ArrayD::from_elem(IxDyn(&[]), a.f)),
        "value_floats" => {
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[a.floats.len()]), a.floats.clone()).ok()?)
        }
        _ => return None,
    })
}

/// ConstantOfShape: a tensor of the shape `shape` says, filled with the `value` attribute (0.0 f32 by default).
fn constant_of_shape(n: &NodeProto, shape: &Tensor) -> Option<Tensor> {
    let shape: Vec<usize> = i64s(shape)?.iter().map(|&d| d.max(0) as usize).collect();
    let value = match attr(n, "value").and_then(|a| a.t.as_ref()) {
        Some(t) => crate::model::proto::tensor_from_proto(t, None).ok()?,
        None => Tensor::F32(ArrayD::zeros(IxDyn(&[1]))),
    };
    let v = *value.to_f64_array().iter().next()?;
    Tensor::from_f64(value.dtype(), ArrayD::from_elem(IxDyn(&shape), v))
}

/// Range over int64 scalars `start`, `limit`, `delta` (a zero delta is not handled here).
fn range(ins: &[Option<&Tensor>]) -> Option<Tensor> {
    let s = |i: usize| i64s(input(ins, i)?).and_then(|a| a.iter().next().copied());
    let (start, limit, delta) = (s(0)?, s(1)?, s(2)?);
    if delta == 0 {
        return None;
    }
    let count = ((limit - start) as f64 / delta as f64).ceil().max(0.0) as i64;
    Some(vec1((0..count).map(|k| start + k * delta).collect()))
}

// What a value is: its shape, its element type.

/// Shape of `x`, cut to the `start` .. `end` attributes.
fn shape(n: &NodeProto, x: &Tensor) -> Tensor {
    let s: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
    let r = s.len() as i64;
    let clip = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = attr(n, "start").map(|a| clip(a.i)).unwrap_or(0);
    let end = attr(n, "end").map(|a| clip(a.i)).unwrap_or(r as usize);
    vec1(s[start..end.max(start)].to_vec())
}

/// Cast between integer and boolean types (float casts are not handled here).
fn cast(n: &NodeProto, x: &Tensor) -> Option<Tensor> {
    let to = DType::from_onnx(attr(n, "to")?.i as i32);
    if x.dtype().is_float() || to.is_float() || matches!(to, DType::String | DType::Other) {
        return None;
    }
    x.cast(to)
}

// Layout: picking, reshaping, joining and cutting int64 values.

/// Gather of int64 `x` at indices `idx` along the `axis` attribute (indices out of range are not handled here).
fn gather(n: &NodeProto, x: &ArrayD<i64>, idx: &Tensor) -> Option<Tensor> {
    let ax = axis(attr(n, "axis").map(|a| a.i).unwrap_or(0), x.ndim())?;
    let dim = x.shape()[ax] as i64;
    let ids: Vec<usize> = idx
        .to_f64_array()
        .iter()
        .map(|&v| {
            let v = v as i64;
            (if v < 0 { v + dim } else { v }) as usize
        })
        .collect();
    if ids.iter().any(|&k| k >= dim as usize) {
        return None;
    }
    let picked = x.select(Axis(ax), &ids);
    let mut shape = x.shape()[..ax].to_vec();
    shape.extend(idx.shape());
    shape.extend(&x.shape()[ax + 1..]);
    Some(Tensor::I64(
        picked
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&shape))
            .ok()?,
    ))
}

/// Unsqueeze, Squeeze, Reshape and Flatten of an int64 value: its elements under the new shape.
fn reshape(n: &NodeProto, opset: i64, ins: &[Option<&Tensor>]) -> Option<Tensor> {
    let x = i64s(input(ins, 0)?)?;
    let shape = crate::wgpu::ops::reshaped(
        n,
        opset,
        x.shape(),
        input(ins, 1)
            .and_then(i64s)
            .map(|a| a.iter().copied().collect()),
    )?;
    Some(Tensor::I64(
        x.as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&shape))
            .ok()?,
    ))
}

/// Concat of int64 values along the `axis` attribute.
fn concat(n: &NodeProto, ins: &[Option<&Tensor>]) -> Option<Tensor> {
    let parts: Vec<&ArrayD<i64>> = (0..n.input.len())
        .map(|i| input(ins, i).and_then(i64s))
        .collect::<Option<_>>()?;
    let ax = axis(attr(n, "axis")?.i, parts.first()?.ndim())?;
    let views: Vec<_> = parts.iter().map(|a| a.view()).collect();
    Some(Tensor::I64(ndarray::concatenate(Axis(ax), &views).ok()?))
}

/// Slice of a 1-D int64 value with step 1 along axis 0 (other forms are not handled here).
fn slice(ins: &[Option<&Tensor>]) -> Option<Tensor> {
    let get = |i: usize| input(ins, i);
    let x = i64s(get(0)?)?;
    if x.ndim() != 1
        || ins.len() > 3
            && get(3).is_some_and(|a| a.to_f64_array().iter().any(|&v| v != 0.0 && v != -1.0))
    {
        return None;
    }
    let first = |i: usize| get(i).and_then(i64s).and_then(|a| a.iter().next().copied());
    let (st, en) = (first(1)?, first(2)?);
    let step = if ins.len() > 4 {
        first(4).unwrap_or(1)
    } else {
        1
    };
    if step != 1 {
        return None;
    }
    let dim = x.len() as i64;
    let fix = |v: i64| (if v < 0 { v + dim } else { v }).clamp(0, dim) as usize;
    let (a, b) = (fix(st), fix(en));
    Some(vec1(
        x.iter()
            .copied()
            .skip(a)
            .take(b.saturating_sub(a))
            .collect(),
    ))
}

// Arithmetic.

/// Broadcasting Add, Sub, Mul (wrapping), Div (no zero divisor) and Equal of two int64 values.
fn arithmetic(n: &NodeProto, ins: &[Option<&Tensor>]) -> Option<Tensor> {
    let (a, b) = (i64s(input(ins, 0)?)?, i64s(input(ins, 1)?)?);
    if n.op_type == "Div" && b.iter().any(|&v| v == 0) {
        return None;
    }
    let shape = crate::wgpu::ops::broadcast(&[a.shape(), b.shape()])?;
    let a = a.broadcast(IxDyn(&shape))?;
    let b = b.broadcast(IxDyn(&shape))?;
    let op = n.op_type.as_str();
    Some(match op {
        "Equal" => Tensor::Bool(ndarray::Zip::from(&a).and(&b).map_collect(|x, y| x == y)),
        _ => Tensor::I64(
            ndarray::Zip::from(&a)
                .and(&b)
                .map_collect(|&x, &y| match op {
                    "Add" => x.wrapping_add(y),
                    "Sub" => x.wrapping_sub(y),
                    "Mul" => x.wrapping_mul(y),
                    _ => x / y,
                }),
        ),
    })
}
