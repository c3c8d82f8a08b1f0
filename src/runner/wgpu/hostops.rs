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

/// The outputs of `n` from `ins` (host values), or `None` when this form is not handled here.
pub fn eval(n: &NodeProto, ins: &[Option<&Tensor>], opset: i64) -> Option<Vec<Tensor>> {
    let get = |i: usize| ins.get(i).copied().flatten();
    let out = match n.op_type.as_str() {
        "Constant" => {
            let a = n.attribute.first()?;
            match a.name.as_str() {
                "value" => crate::model::proto::tensor_from_proto(a.t.as_ref()?, None).ok()?,
                "value_int" => Tensor::I64(ArrayD::from_elem(IxDyn(&[]), a.i)),
                "value_ints" => vec1(a.ints.clone()),
                "value_float" => Tensor::F32(ArrayD::from_elem(IxDyn(&[]), a.f)),
                "value_floats" => Tensor::F32(
                    ArrayD::from_shape_vec(IxDyn(&[a.floats.len()]), a.floats.clone()).ok()?,
                ),
                _ => return None,
            }
        }
        "Shape" => {
            let s: Vec<i64> = get(0)?.shape().iter().map(|&d| d as i64).collect();
            let r = s.len() as i64;
            let clip = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let start = attr(n, "start").map(|a| clip(a.i)).unwrap_or(0);
            let end = attr(n, "end").map(|a| clip(a.i)).unwrap_or(r as usize);
            vec1(s[start..end.max(start)].to_vec())
        }
        "Size" => Tensor::I64(ArrayD::from_elem(IxDyn(&[]), get(0)?.len() as i64)),
        "Cast" => {
            let x = get(0)?;
            let to = DType::from_onnx(attr(n, "to")?.i as i32);
            if x.dtype().is_float() || to.is_float() || matches!(to, DType::String | DType::Other) {
                return None;
            }
            x.cast(to)?
        }
        "Gather" => {
            let (x, idx) = (i64s(get(0)?)?, get(1)?);
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
            Tensor::I64(
                picked
                    .as_standard_layout()
                    .into_owned()
                    .into_shape_with_order(IxDyn(&shape))
                    .ok()?,
            )
        }
        "Unsqueeze" | "Squeeze" | "Reshape" | "Flatten" => {
            let x = i64s(get(0)?)?;
            let shape = crate::runner::wgpu::ops::reshaped(
                n,
                opset,
                x.shape(),
                get(1).and_then(i64s).map(|a| a.iter().copied().collect()),
            )?;
            Tensor::I64(
                x.as_standard_layout()
                    .into_owned()
                    .into_shape_with_order(IxDyn(&shape))
                    .ok()?,
            )
        }
        "Concat" => {
            let parts: Vec<&ArrayD<i64>> = (0..n.input.len())
                .map(|i| get(i).and_then(i64s))
                .collect::<Option<_>>()?;
            let ax = axis(attr(n, "axis")?.i, parts.first()?.ndim())?;
            let views: Vec<_> = parts.iter().map(|a| a.view()).collect();
            Tensor::I64(ndarray::concatenate(Axis(ax), &views).ok()?)
        }
        "Add" | "Sub" | "Mul" | "Div" | "Equal" => {
            let (a, b) = (i64s(get(0)?)?, i64s(get(1)?)?);
            if n.op_type == "Div" && b.iter().any(|&v| v == 0) {
                return None;
            }
            let shape = crate::runner::wgpu::ops::broadcast(&[a.shape(), b.shape()])?;
            let a = a.broadcast(IxDyn(&shape))?;
            let b = b.broadcast(IxDyn(&shape))?;
            let op = n.op_type.as_str();
            match op {
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
            }
        }
        "ConstantOfShape" => {
            let shape: Vec<usize> = i64s(get(0)?)?.iter().map(|&d| d.max(0) as usize).collect();
            let value = match attr(n, "value").and_then(|a| a.t.as_ref()) {
                Some(t) => crate::model::proto::tensor_from_proto(t, None).ok()?,
                None => Tensor::F32(ArrayD::zeros(IxDyn(&[1]))),
            };
            let v = *value.to_f64_array().iter().next()?;
            Tensor::from_f64(value.dtype(), ArrayD::from_elem(IxDyn(&shape), v))?
        }
        "Range" => {
            let s = |i: usize| i64s(get(i)?).and_then(|a| a.iter().next().copied());
            let (start, limit, delta) = (s(0)?, s(1)?, s(2)?);
            if delta == 0 {
                return None;
            }
            let count = ((limit - start) as f64 / delta as f64).ceil().max(0.0) as i64;
            vec1((0..count).map(|k| start + k * delta).collect())
        }
        "Slice" if opset >= 10 => {
            let x = i64s(get(0)?)?;
            if x.ndim() != 1
                || ins.len() > 3
                    && get(3)
                        .is_some_and(|a| a.to_f64_array().iter().any(|&v| v != 0.0 && v != -1.0))
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
            vec1(
                x.iter()
                    .copied()
                    .skip(a)
                    .take(b.saturating_sub(a))
                    .collect(),
            )
        }
        _ => return None,
    };
    Some(vec![out])
}
