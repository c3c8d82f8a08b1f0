//! `Resize` of integer tensors (the uint8 images pre-processing resizes): computed in f64 from the integers, as
//! [`super::resize`] computes floats, then converted back as the ONNX reference does (`astype`: toward zero),
//! saturated to the type's range (cubic overshoots it). Interpolating modes make that conversion a decision
//! ([`adopt`]): ONNX Runtime's integer bilinear kernel holds each axis's weights in 10-bit fixed point and floors
//! the sum, so an output whose exact value lies within that arithmetic's error of an integer may land one level
//! either side, a faithful execution. Where the target's level is the other neighbour of the exact value and the
//! exact value lies within [`WINDOW`] of the input's spread from the boundary, the reference takes the target's
//! level (counted as flips); anything further stays and is compared.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::nn::resize::Interpolator;
use tract_onnx_opl::resize::Resize;

use super::decide::{self, Adopted, Decisions};

/// The error of interpolation weights held in 10-bit fixed point, per axis of two: 2 · 2⁻¹⁰ of the input's spread.
pub const WINDOW: f64 = 2.0 / 1024.0;

/// The exact f64 resize of `node`'s integer input, with its element type; `None` where it is not an integer
/// Resize phantom computes.
fn exact(node: &TypedNode, ins: &TVec<TValue>) -> Option<(Vec<f64>, TValue, DatumType)> {
    node.op_as::<Resize>()?;
    let x = ins.first()?;
    let dt = x.datum_type();
    if !dt.is_integer() {
        return None;
    }
    let mut wide = ins.clone();
    wide[0] = x.cast_to::<f64>().ok()?.into_owned().into_tvalue();
    let y = super::resize::eval(node, &wide)?.ok()?.remove(0);
    Some((decide::f64s(&y)?, y, dt))
}

/// Toward zero, saturated to `dt`'s range.
fn convert(v: f64, dt: DatumType) -> f64 {
    let (lo, hi) = range(dt);
    v.trunc().clamp(lo, hi)
}

fn range(dt: DatumType) -> (f64, f64) {
    match dt {
        DatumType::U8 => (0.0, 255.0),
        DatumType::I8 => (-128.0, 127.0),
        DatumType::U16 => (0.0, 65535.0),
        DatumType::I16 => (-32768.0, 32767.0),
        DatumType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DatumType::U32 => (0.0, u32::MAX as f64),
        _ => (f64::MIN, f64::MAX),
    }
}

/// `node` computed in f64 and converted back, when it is an integer Resize.
pub fn eval(node: &TypedNode, ins: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    let (v, y, dt) = exact(node, ins)?;
    let conv: Vec<f64> = v.iter().map(|&e| convert(e, dt)).collect();
    let out = decide::shaped_like(&y, conv).and_then(|t| Ok(t.cast_to_dt(dt)?.into_owned()));
    Some(out.map(|t| tvec!(t.into_tvalue())))
}

/// Whether `node` interpolates (linear, cubic): its integer outputs are decisions; nearest only selects.
fn interpolates(node: &TypedNode) -> bool {
    node.op_as::<Resize>()
        .is_some_and(|r| !matches!(r.interpolator, Interpolator::Nearest))
}

/// The target's levels taken where they are the exact value's other neighbour within the window.
pub fn adopt(
    d: &Decisions,
    names: &[(usize, String)],
    node: &TypedNode,
    ins: &TVec<TValue>,
    out: &mut TVec<TValue>,
) -> Vec<(String, Adopted)> {
    let (Some((x, _, dt)), true) = (exact(node, ins), interpolates(node)) else {
        return vec![];
    };
    let input = ins.first().and_then(decide::f64s).unwrap_or_default();
    let spread = input.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        - input.iter().copied().fold(f64::INFINITY, f64::min);
    let w = WINDOW * spread.max(0.0);
    let mut found = vec![];
    for (slot, name) in names {
        let (Some(dec), Some(o)) = (d.get(name), out.get(*slot)) else {
            continue;
        };
        let (Some(ours), theirs) = (decide::f64s(o), decide::target_f64s(dec)) else {
            continue;
        };
        if ours.len() != x.len() || theirs.len() != x.len() {
            continue;
        }
        let bounds = |f: f64| {
            let at = |s: f64| x.iter().map(|&e| convert(e + s * f * w, dt)).collect();
            Some((at(-1.0), at(1.0)))
        };
        let settled = decide::settle(&ours, &theirs, bounds, |_| false);
        match settled {
            Some((v, a)) => {
                if let Ok(t) = decide::shaped_like(o, v) {
                    out[*slot] = t;
                    found.push((name.clone(), a));
                }
            }
            None => found.push((name.clone(), Adopted::default())),
        }
    }
    found
}
