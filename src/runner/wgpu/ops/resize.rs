//! `Resize` of the two innermost axes (NCHW images), nearest or bilinear (`layout/resize.wgsl`); other forms
//! (cubic, cropping, antialias, axes, kept aspect ratio) run on the host.

use super::{done, host, Params};
use crate::error::Result;
use crate::runner::wgpu::ctx::{Ctx, Out};

pub fn resize(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let xs = x.shape.clone();
    if xs.len() != 4 {
        return host("Resize of a tensor that is not 4-D");
    }
    let mode = match ctx.attr_s("mode", "nearest").as_str() {
        "nearest" => 0,
        "linear" | "bilinear" => 1,
        m => return host(format!("Resize mode {m}")),
    };
    let coord = match ctx
        .attr_s("coordinate_transformation_mode", "half_pixel")
        .as_str()
    {
        "half_pixel" => 0,
        "asymmetric" => 1,
        "align_corners" => 2,
        "pytorch_half_pixel" => 3,
        m => return host(format!("Resize coordinate mode {m}")),
    };
    let coord = if ctx.opset < 11 { 1 } else { coord };
    let near = match ctx.attr_s("nearest_mode", "round_prefer_floor").as_str() {
        "round_prefer_ceil" => 1,
        "floor" => 2,
        "ceil" => 3,
        _ => 0,
    };
    let near = if ctx.opset < 11 { 2 } else { near };
    if ctx.attr_i("antialias", 0) != 0
        || ctx.attr_ints("axes").is_some()
        || ctx.attr_s("keep_aspect_ratio_policy", "stretch") != "stretch"
    {
        return host("Resize with antialias, axes or a kept aspect ratio");
    }
    let (scales_at, sizes_at) = if ctx.opset < 11 { (1, 99) } else { (2, 3) };
    let scales = ctx
        .has(scales_at)
        .then(|| ctx.floats(scales_at))
        .flatten()
        .filter(|v| !v.is_empty());
    let sizes = ctx
        .has(sizes_at)
        .then(|| ctx.ints(sizes_at))
        .flatten()
        .filter(|v| !v.is_empty());
    let (out, sc): (Vec<usize>, Vec<f64>) = match (scales, sizes) {
        (Some(s), _) if s.len() == 4 => (
            xs.iter()
                .zip(&s)
                .map(|(&d, &f)| (d as f64 * f).floor() as usize)
                .collect(),
            s,
        ),
        (_, Some(z)) if z.len() == 4 => {
            let out: Vec<usize> = z.iter().map(|&d| d.max(0) as usize).collect();
            let sc = xs
                .iter()
                .zip(&out)
                .map(|(&i, &o)| o as f64 / i.max(1) as f64)
                .collect();
            (out, sc)
        }
        _ => return host("Resize without usable scales or sizes"),
    };
    if out[0] != xs[0] || out[1] != xs[1] {
        return host("Resize of the batch or channel axis");
    }
    let y = ctx.output(out.clone(), ctx.out_dtype());
    let n = y.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .dims(1, &[xs[2], xs[3], out[2], out[3]])
        .set(5, mode)
        .set(6, coord)
        .set(7, near)
        .set_f(8, sc[2] as f32)
        .set_f(9, sc[3] as f32)
        .set_f(10, (sc[2] * xs[2] as f64) as f32)
        .set_f(11, (sc[3] * xs[3] as f64) as f32);
    if n > 0 {
        ctx.run("layout/resize", "main", &p.0, &[Some(&x.buf)], &y, n)?;
    }
    done(ctx, y)
}
