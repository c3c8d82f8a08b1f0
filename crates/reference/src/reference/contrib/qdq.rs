//! ONNX `QuantizeLinear` and `DequantizeLinear` (and ORT's `com.microsoft` copies) in f64: the QDQ format that
//! `quantize_static`, TensorRT and QNN deployments use. tract dequantizes in float32 only (a widened model's
//! `DequantizeLinear` then fails, and everything after it went unchecked) and folds the weights' in float32.
//!
//! Per tensor, per axis and blocked (opset 21 `block_size`) scales and zero points; 8- and 16-bit integers and int32
//! (QDQ biases). `y = saturate(round_half_even(x / scale) + zero_point)` and `x = (q − zero_point) · scale`, with
//! the scale as stored (a float32 value, read exactly) and the arithmetic in f64. The narrow formats (int4, int2,
//! float8, float4) quantize onto their own grid (`Format::quantize`: saturating, round half to even) and dequantize
//! from their carrier.

use tract_onnx::prelude::*;

use super::super::formats::FORMAT_ATTR;
use super::kernel::{Kernel, Row};
use super::narrow_cast::carrier;
use super::node::{Fact, Node};
use super::util::{f64s, fact, opt, values};
use crate::tensor::formats::Format;

/// Claimed in the ONNX and contrib domains by [`claims_qdq`].
pub(super) const TABLE: &[Row] = &[
    Row::new("QuantizeLinear", &Quantize),
    Row::new("DequantizeLinear", &Dequantize),
];

/// Whether phantom evaluates `n`: a Q/DQ node of the ONNX domain or ORT's.
pub fn claims_qdq(n: &tract_onnx::pb::NodeProto) -> bool {
    TABLE.iter().any(|r| r.op == n.op_type)
        && (n.domain.is_empty() || n.domain == "ai.onnx" || n.domain == "com.microsoft")
}

/// Where each element's scale sits: one scale, one per index of `axis`, or one per block of `block` along it.
struct Layout {
    axis: usize,
    block: usize,
    /// The scale tensor's shape (empty or `[1]` for per tensor).
    scale_shape: Vec<usize>,
}

impl Layout {
    fn of(n: &Node, x: &[usize], scale: &[usize]) -> TractResult<Layout> {
        let rank = x.len();
        let a = n.int("axis", 1);
        let per_tensor = scale.iter().product::<usize>() == 1 && scale.len() <= 1;
        let axis = match per_tensor {
            true => 0,
            false => usize::try_from(if a < 0 { a + rank as i64 } else { a })
                .ok()
                .filter(|&k| k < rank)
                .ok_or_else(|| anyhow::anyhow!("{}: axis {a} outside rank {rank}", n.proto.name))?,
        };
        let block = n.int("block_size", 0).max(0) as usize;
        let fits = per_tensor
            || (block == 0 && scale == [x[axis]])
            || (block > 0
                && scale.len() == rank
                && (0..rank).all(|d| match d == axis {
                    true => scale[d] == x[d].div_ceil(block),
                    false => scale[d] == x[d],
                }));
        anyhow::ensure!(
            fits,
            "{}: a scale of shape {scale:?} does not fit an input of shape {x:?} (axis {axis}, block_size {block})",
            n.proto.name
        );
        Ok(Layout {
            axis,
            block,
            scale_shape: scale.to_vec(),
        })
    }

    /// The scale index of each element of a tensor of shape `x`, row-major.
    fn indices(&self, x: &[usize]) -> Vec<usize> {
        let total: usize = x.iter().product();
        if self.scale_shape.iter().product::<usize>() == 1 {
            return vec![0; total];
        }
        let inner: usize = x[self.axis + 1..].iter().product();
        if self.block == 0 {
            return (0..total).map(|i| (i / inner) % x[self.axis]).collect();
        }
        // Blocked: the scale tensor has the input's shape with the axis divided into blocks.
        let mut out = Vec::with_capacity(total);
        let mut idx = vec![0usize; x.len()];
        for _ in 0..total {
            let mut k = 0;
            for (d, &i) in idx.iter().enumerate() {
                let j = if d == self.axis { i / self.block } else { i };
                k = k * self.scale_shape[d] + j;
            }
            out.push(k);
            for d in (0..x.len()).rev() {
                idx[d] += 1;
                if idx[d] < x[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }
}

/// The zero points as f64 (zero where absent).
fn zero_points(ins: &[Option<&Tensor>], count: usize) -> TractResult<Vec<f64>> {
    match ins.get(2).copied().flatten() {
        Some(z) => values::<f64>(z),
        None => Ok(vec![0.0; count]),
    }
}

/// The narrow format (int4, float8...) of the node's quantized side, where the model declares one
/// ([`super::super::formats`] tells it in an attribute).
fn format(n: &Node) -> Option<Format> {
    Format::from_onnx(n.int(FORMAT_ATTR, 0) as i32)
}

/// The integer range of `dt` (of the node's narrow format, where it has one).
fn range(n: &Node, dt: DatumType) -> TractResult<(f64, f64)> {
    if let Some(r) = format(n).and_then(|f| f.int_range()) {
        return Ok(r);
    }
    Ok(match dt {
        DatumType::U8 => (0.0, 255.0),
        DatumType::I8 => (-128.0, 127.0),
        DatumType::U16 => (0.0, 65535.0),
        DatumType::I16 => (-32768.0, 32767.0),
        DatumType::I32 => (i32::MIN as f64, i32::MAX as f64),
        other => anyhow::bail!(
            "{}: quantized type {other:?} is not computed by phantom's f64 kernel (8/16-bit integers and int32 are)",
            n.proto.name
        ),
    })
}

/// ONNX element type code → the integer type QuantizeLinear writes (`output_dtype`).
fn code_type(code: i64) -> Option<DatumType> {
    Some(match code {
        2 => DatumType::U8,
        3 => DatumType::I8,
        4 => DatumType::U16,
        5 => DatumType::I16,
        6 => DatumType::I32,
        _ => return None,
    })
}

struct Quantize;

impl Quantize {
    fn output_type(n: &Node, zp: Option<&Fact>) -> TractResult<DatumType> {
        if let Some(f) = format(n) {
            return Ok(carrier(f));
        }
        if let Some((dt, _)) = zp {
            return Ok(*dt);
        }
        match n.int("output_dtype", 0) {
            0 => Ok(DatumType::U8),
            c => code_type(c).ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: output_dtype {c} is not an 8/16/32-bit integer",
                    n.proto.name
                )
            }),
        }
    }
}

impl Kernel for Quantize {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, x) = fact(n, ins, 0)?;
        let dt = Self::output_type(n, ins.get(2).copied().flatten())?;
        Ok(vec![(dt, x.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let scale = opt(n, ins, 1)?;
        let layout = Layout::of(n, x.shape(), scale.shape())?;
        let scales = values::<f64>(scale)?;
        let zps = zero_points(ins, scales.len())?;
        let zp_fact = ins
            .get(2)
            .copied()
            .flatten()
            .map(|t| (t.datum_type(), t.shape().to_vec()));
        let dt = Self::output_type(n, zp_fact.as_ref())?;
        // The level of a scaled value and a zero point: rounded before the zero point is added (integers).
        let level: Box<dyn Fn(f64, f64) -> f64> = match format(n).filter(|f| f.is_float()) {
            Some(f) => {
                let saturate = n.int("saturate", 1) != 0;
                Box::new(move |v, z| f.quantize(v + z, saturate))
            }
            None => {
                let (lo, hi) = range(n, dt)?;
                Box::new(move |v: f64, z| (v.round_ties_even() + z).clamp(lo, hi))
            }
        };
        let q: Vec<f64> = x
            .iter()
            .zip(layout.indices(x.shape()))
            .map(|(&v, k)| level(v / scales[k], zps[k]))
            .collect();
        let q = super::util::shaped(x.shape(), q)?;
        Ok(vec![q.cast_to_dt(dt)?.into_owned()])
    }
}

struct Dequantize;

impl Kernel for Dequantize {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, x) = fact(n, ins, 0)?;
        if !format(n).is_some_and(|f| f.is_float()) {
            range(n, *dt)?;
        }
        Ok(vec![(f64::datum_type(), x.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let q = opt(n, ins, 0)?;
        if !format(n).is_some_and(|f| f.is_float()) {
            range(n, q.datum_type())?;
        }
        let x = f64s(n, ins, 0)?;
        let scale = opt(n, ins, 1)?;
        let layout = Layout::of(n, x.shape(), scale.shape())?;
        let scales = values::<f64>(scale)?;
        let zps = zero_points(ins, scales.len())?;
        let y: Vec<f64> = x
            .iter()
            .zip(layout.indices(x.shape()))
            .map(|(&v, k)| (v - zps[k]) * scales[k])
            .collect();
        Ok(vec![super::util::shaped(x.shape(), y)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, attrs: &[(&str, i64)]) -> Node {
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: format!("phantom.{op}"),
            name: op.into(),
            input: vec!["x".into(), "s".into(), "z".into()],
            output: vec!["y".into()],
            attribute: attrs
                .iter()
                .map(|(k, v)| tract_onnx::pb::AttributeProto {
                    name: k.to_string(),
                    r#type: 2,
                    i: *v,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
    }

    #[test]
    fn quantize_rounds_half_to_even_and_saturates() {
        let n = node("QuantizeLinear", &[]);
        let x = tensor1(&[0.5f64, 1.5, 2.5, -300.0, 300.0]);
        let (s, z) = (tensor0(1f32), tensor0(10u8));
        let y = Quantize.eval(&n, &[Some(&x), Some(&s), Some(&z)]).unwrap();
        assert_eq!(values::<u8>(&y[0]).unwrap(), vec![10, 12, 12, 0, 255]);
    }

    #[test]
    fn dequantize_per_axis_uses_each_channel_s_scale() {
        let n = node("DequantizeLinear", &[("axis", 0)]);
        let x = tensor2(&[[1i8, 2], [3, 4]]);
        let (s, z) = (tensor1(&[0.5f32, 2.0]), tensor1(&[1i8, 0]));
        let y = Dequantize
            .eval(&n, &[Some(&x), Some(&s), Some(&z)])
            .unwrap();
        assert_eq!(values::<f64>(&y[0]).unwrap(), vec![0.0, 0.5, 6.0, 8.0]);
    }

    #[test]
    fn dequantize_blocked_scales_cover_their_block() {
        let n = node("DequantizeLinear", &[("axis", 1), ("block_size", 2)]);
        let x = tensor2(&[[1i8, 1, 1], [1, 1, 1]]);
        let s = tensor2(&[[1f32, 10.0], [100.0, 1000.0]]);
        let y = Dequantize.eval(&n, &[Some(&x), Some(&s), None]).unwrap();
        assert_eq!(
            values::<f64>(&y[0]).unwrap(),
            vec![1.0, 1.0, 10.0, 100.0, 100.0, 1000.0]
        );
    }
}
