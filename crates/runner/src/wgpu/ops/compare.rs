//! Ops on floats with boolean or index outputs: comparisons and classifications (`elementwise/compare.wgsl`:
//! Equal, Less, Greater, LessOrEqual, GreaterOrEqual with broadcasting, IsNaN, IsInf) and ArgMax/ArgMin
//! (`reduce/arg.wgsl`), TopK (`reduce/topk.wgsl` ranks, then the values gathered at the indices). Results are held as one 32-bit word per element and read back as booleans or int64;
//! `Where` reads a boolean as its condition without leaving the device.

use super::{axis, bcast_strides, broadcast, fits, host, Params, Row};
use crate::error::Result;
use crate::tensor::DType;
use crate::wgpu::ctx::{Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("Equal", compare),
    Row::new("Less", compare),
    Row::new("Greater", compare),
    Row::new("LessOrEqual", compare),
    Row::new("GreaterOrEqual", compare),
    Row::new("IsNaN", compare),
    Row::new("IsInf", compare),
    Row::new("ArgMax", arg),
    Row::new("ArgMin", arg),
    Row::new("TopK", topk),
];

fn code(op: &str) -> Option<u32> {
    Some(match op {
        "Equal" => 0,
        "Less" => 1,
        "Greater" => 2,
        "LessOrEqual" => 3,
        "GreaterOrEqual" => 4,
        "IsNaN" => 5,
        "IsInf" => 6,
        _ => return None,
    })
}

fn compare(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let code = code(&op).expect("found");
    let unary = code >= 5;
    let b_at = if unary { 0 } else { 1 };
    if !ctx.is_float(0) || !ctx.is_float(b_at) {
        return host(format!("{op} of integer values has no shader path"));
    }
    let (Some(sa), Some(sb)) = (ctx.shape(0), ctx.shape(b_at)) else {
        return host(format!("{op}: missing input"));
    };
    let Some(shape) = broadcast(&[&sa, &sb]).filter(|s| fits(s)) else {
        return host(format!("{op}: shapes that do not broadcast"));
    };
    let a = ctx.dev(0)?;
    let b = ctx.dev(b_at)?;
    let out = ctx.output_words(shape.clone(), DType::Bool);
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, shape.len() as u32)
        .set(2, code)
        .dims(4, &shape)
        .strides(12, &bcast_strides(&sa, &shape))
        .strides(20, &bcast_strides(&sb, &shape))
        .set(30, ctx.attr_i("detect_positive", 1) as u32)
        .set(31, ctx.attr_i("detect_negative", 1) as u32);
    ctx.run(
        "elementwise/compare",
        "main",
        &p.0,
        &[Some(&a.buf), Some(&b.buf)],
        &out,
        n,
    )?;
    Ok(Out::Dev(vec![out]))
}

/// A boolean of `x`'s shape, true everywhere.
pub(super) fn all_true(ctx: &mut Ctx, x: &DevVal) -> Result<DevVal> {
    let out = ctx.output_words(x.shape.clone(), DType::Bool);
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32).set(1, 0).set(2, 7);
    if n > 0 {
        let ins = [Some(&*x.buf), Some(&*x.buf)];
        ctx.run("elementwise/compare", "main", &p.0, &ins, &out, n)?;
    }
    Ok(out)
}

/// The longest lane an invocation walks (lavapipe stops loops near 65,535 iterations).
const MAX_LANE: usize = 60_000;

fn arg(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let Some(shape) = ctx.shape(0).filter(|s| !s.is_empty()) else {
        return host(format!("{op} of a scalar or a missing input"));
    };
    let Some(a) = axis(ctx.attr_i("axis", 0), shape.len()) else {
        return host(format!("{op}: axis out of range"));
    };
    let len = shape[a];
    if len == 0 || len > MAX_LANE || !fits(&shape) {
        return host(format!("{op} over an axis of {len} elements"));
    }
    let inner: usize = shape[a + 1..].iter().product();
    let mut oshape = shape.clone();
    oshape[a] = 1;
    let x = ctx.dev(0)?;
    let out = ctx.output_words(oshape.clone(), DType::I64);
    let n = out.len();
    if ctx.attr_i("keepdims", 1) == 0 {
        oshape.remove(a);
    }
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, len as u32)
        .set(2, inner as u32)
        .set(3, (op == "ArgMax") as u32)
        .set(4, ctx.attr_i("select_last_index", 0) as u32);
    if n > 0 {
        ctx.run("reduce/arg", "main", &p.0, &[Some(&x.buf)], &out, n)?;
    }
    Ok(Out::Dev(vec![crate::wgpu::ctx::DevVal {
        shape: oshape,
        ..out
    }]))
}

/// The longest lane TopK ranks (each element reads its whole lane).
const MAX_TOPK_LANE: usize = 4096;

/// K from input 1 (the attribute before opset 10) along `axis`; indices in lane order for equal values.
fn topk(ctx: &mut Ctx) -> Result<Out> {
    let Some(shape) = ctx.shape(0).filter(|s| !s.is_empty() && fits(s)) else {
        return host("TopK of a scalar or a missing input");
    };
    let Some(a) = axis(ctx.attr_i("axis", -1), shape.len()) else {
        return host("TopK: axis out of range");
    };
    let k = match ctx.opset < 10 {
        true => Some(ctx.attr_i("k", -1)),
        false => ctx.ints(1).and_then(|v| v.first().copied()),
    };
    let len = shape[a];
    let Some(k) = k
        .filter(|&k| k >= 0 && k as usize <= len)
        .map(|k| k as usize)
    else {
        return host("TopK: k not known on the host or beyond the axis");
    };
    if len > MAX_TOPK_LANE {
        return host(format!("TopK over an axis of {len} elements"));
    }
    let inner: usize = shape[a + 1..].iter().product();
    let mut oshape = shape.clone();
    oshape[a] = k;
    let x = ctx.dev(0)?;
    let idx = ctx.output_words(oshape.clone(), DType::I64);
    let n = x.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, len as u32)
        .set(2, inner.max(1) as u32)
        .set(3, k as u32)
        .set(4, ctx.attr_i("largest", 1) as u32);
    if n > 0 && k > 0 {
        ctx.run("reduce/topk", "main", &p.0, &[Some(&x.buf)], &idx, n)?;
    }
    let values = super::scatter::gather_along(ctx, &x, &idx.buf, oshape, a)?;
    Ok(Out::Dev(vec![super::finish(ctx, values)?, idx]))
}
