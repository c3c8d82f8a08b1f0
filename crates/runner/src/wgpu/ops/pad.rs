//! `Pad` (constant, reflect or edge) and `CenterCropPad` (a pad whose leading amounts may be negative: a crop), both
//! through `layout/pad.wgsl`; `Trilu`, which zeroes a triangle (`layout/trilu.wgsl`).

use super::{axis, contiguous, done, fits, host, Params, Row};
use crate::error::Result;
use crate::wgpu::ctx::{Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("Pad", pad),
    Row::new("CenterCropPad", center_crop_pad),
    Row::new("Trilu", trilu),
];

/// The amounts from the attribute (before opset 11) or the inputs, for every axis or for `axes`.
fn pad(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let rank = x.shape.len();
    let mode = match ctx.attr_s("mode", "constant").as_str() {
        "constant" => 0,
        "reflect" => 1,
        "edge" => 2,
        m => return host(format!("Pad mode {m}")),
    };
    let (pads, value) = if ctx.opset < 11 {
        (ctx.attr_ints("pads"), ctx.attr_f("value", 0.0))
    } else {
        let v = match ctx.has(2) {
            true => ctx
                .floats(2)
                .and_then(|v| v.first().copied())
                .unwrap_or(0.0) as f32,
            false => 0.0,
        };
        (ctx.ints(1), v)
    };
    let Some(pads) = pads else {
        return host("Pad amounts not known on the host");
    };
    let axes: Vec<usize> = match ctx.opset >= 18 && ctx.has(3) {
        true => match ctx.ints(3) {
            Some(v) => match v.iter().map(|&a| axis(a, rank)).collect() {
                Some(v) => v,
                None => return host("Pad axes out of range"),
            },
            None => return host("Pad axes not known on the host"),
        },
        false => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() || !fits(&x.shape) {
        return host("Pad: unusual pads");
    }
    let mut begin = vec![0i64; rank];
    let mut shape = x.shape.clone();
    for (k, &a) in axes.iter().enumerate() {
        begin[a] = pads[k];
        let len = x.shape[a] as i64 + pads[k] + pads[k + axes.len()];
        if len < 0 {
            return host("Pad: negative size");
        }
        shape[a] = len as usize;
    }
    launch(ctx, &x, shape, &begin, mode, value)
}

/// `x` placed in a tensor of `shape` from `begin` on along each axis (negative: cropped), the rest by `mode`.
fn launch(
    ctx: &mut Ctx,
    x: &DevVal,
    shape: Vec<usize>,
    begin: &[i64],
    mode: u32,
    value: f32,
) -> Result<Out> {
    let out = ctx.output(shape.clone(), x.dtype);
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, shape.len() as u32)
        .set(2, mode)
        .set_f(3, value)
        .dims(4, &shape)
        .strides(12, begin)
        .dims(20, &x.shape)
        .strides(28, &contiguous(&x.shape));
    if n > 0 {
        ctx.run("layout/pad", "main", &p.0, &[Some(&x.buf)], &out, n)?;
    }
    done(ctx, out)
}

/// Each listed axis cropped or zero-padded to its target length, centred (the odd element at the end).
fn center_crop_pad(ctx: &mut Ctx) -> Result<Out> {
    let (Some(xs), Some(target)) = (ctx.shape(0), ctx.ints(1)) else {
        return host("CenterCropPad: shape not known on the host");
    };
    let rank = xs.len();
    let axes: Vec<usize> = match ctx.attr_ints("axes") {
        Some(v) => match v.iter().map(|&a| axis(a, rank)).collect() {
            Some(v) => v,
            None => return host("CenterCropPad axes out of range"),
        },
        None => (0..rank).collect(),
    };
    if target.len() != axes.len() || target.iter().any(|&t| t < 0) || !fits(&xs) {
        return host("CenterCropPad: unusual shape");
    }
    let mut shape = xs.clone();
    let mut begin = vec![0i64; rank];
    for (&a, &t) in axes.iter().zip(&target) {
        let dim = xs[a] as i64;
        begin[a] = if t < dim {
            -((dim - t) / 2)
        } else {
            (t - dim) / 2
        };
        shape[a] = t as usize;
    }
    if !fits(&shape) {
        return host("CenterCropPad: output too large");
    }
    let x = ctx.dev(0)?;
    launch(ctx, &x, shape, &begin, 0, 0.0)
}

/// The diagonal offset k from input 1 (0 when absent).
fn trilu(ctx: &mut Ctx) -> Result<Out> {
    let k = match ctx.has(1) {
        true => match ctx.ints(1).and_then(|v| v.first().copied()) {
            Some(k) => k,
            None => return host("Trilu: k not known on the host"),
        },
        false => 0,
    };
    let x = ctx.dev(0)?;
    let r = x.shape.len();
    if r < 2 || !fits(&x.shape) {
        return host("Trilu of a tensor below rank 2");
    }
    let (rows, cols) = (x.shape[r - 2], x.shape[r - 1]);
    let k = k.clamp(-(rows as i64) - 1, cols as i64 + 1);
    let out = ctx.output(x.shape.clone(), x.dtype);
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, rows.max(1) as u32)
        .set(2, cols.max(1) as u32)
        .set_i(3, k)
        .set(4, ctx.attr_i("upper", 1) as u32);
    if n > 0 {
        ctx.run("layout/trilu", "main", &p.0, &[Some(&x.buf)], &out, n)?;
    }
    done(ctx, out)
}
