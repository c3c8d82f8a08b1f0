//! `Cast` to a narrow number format (float8 E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ/E8M0, float4 E2M1, int4/uint4,
//! int2/uint2), which tract cannot hold: the result is the format's value, rounded as the spec says
//! ([`Format::cast`]: `saturate`, E8M0's `round_mode`), held exactly in the format's carrier (f64 for the float
//! formats, int8/uint8 for the integer ones). Casts *from* such a format read the carrier and stay tract's. A `Cast`
//! that narrows to float16, bfloat16 or float32 (marked before widening, [`ROUND_ATTR`]) rounds onto that type here,
//! its result held in f64.

use tract_onnx::pb::NodeProto;
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact, string};
use crate::reference::formats::ROUND_ATTR;
use crate::tensor::formats::{E8m0Round, Format};
use crate::tensor::DType;

/// Claimed by [`claims`] where it casts to or rounds onto a narrow type.
pub(super) const TABLE: &[Row] = &[Row::new("Cast", &NarrowCast)];

/// Whether phantom evaluates `n`: a `Cast` whose target is a narrow format, or one that rounds onto a float type.
pub fn claims(n: &NodeProto) -> bool {
    n.op_type == "Cast"
        && n.attribute.iter().any(|a| {
            (a.name == "to" && Format::from_onnx(a.i as i32).is_some()) || a.name == ROUND_ATTR
        })
}

/// The float type a widened `Cast` rounds onto ([`ROUND_ATTR`]), if it is one.
fn rounds_to(n: &Node) -> Option<DType> {
    match n.int(ROUND_ATTR, 0) {
        1 => Some(DType::F32),
        10 => Some(DType::F16),
        16 => Some(DType::Bf16),
        _ => None,
    }
}

/// The carrier tract holds a format's values in.
pub fn carrier(f: Format) -> DatumType {
    match (f.is_float(), f.int_range()) {
        (true, _) => DatumType::F64,
        (false, Some((lo, _))) if lo < 0.0 => DatumType::I8,
        (false, _) => DatumType::U8,
    }
}

/// Values in `f`'s carrier.
pub fn carried(f: Format, shape: &[usize], v: Vec<f64>) -> TractResult<Tensor> {
    let t = super::util::shaped(shape, v)?;
    Ok(t.cast_to_dt(carrier(f))?.into_owned())
}

struct NarrowCast;

impl NarrowCast {
    fn target(n: &Node) -> TractResult<Format> {
        let to = n.req_int("to")?;
        Format::from_onnx(to as i32)
            .ok_or_else(|| anyhow::anyhow!("Cast `{}`: {to} is not a narrow format", n.proto.name))
    }
}

impl Kernel for NarrowCast {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        if rounds_to(n).is_some() {
            return Ok(vec![(DatumType::F64, shape.clone())]);
        }
        Ok(vec![(carrier(Self::target(n)?), shape.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        if let Some(d) = rounds_to(n) {
            let mut x = f64s(n, ins, 0)?;
            x.mapv_inplace(|v| crate::tensor::narrow::round_one(v, d));
            return Ok(vec![x.into_tensor()]);
        }
        let f = Self::target(n)?;
        let saturate = n.int("saturate", 1) != 0;
        let mode = string(n, "round_mode", "up");
        let round = E8m0Round::parse(&mode).ok_or_else(|| {
            anyhow::anyhow!(
                "Cast `{}`: round_mode `{mode}` is not up, down or nearest",
                n.proto.name
            )
        })?;
        let x = f64s(n, ins, 0)?;
        let y: Vec<f64> = x.iter().map(|&v| f.cast(v, saturate, round)).collect();
        Ok(vec![carried(f, x.shape(), y)?])
    }
}
