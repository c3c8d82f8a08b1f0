//! `Resize` of the two innermost axes (NCHW images), nearest, bilinear or bicubic (`layout/resize.wgsl`), scales or
//! sizes given for every axis or for `axes`, with the aspect-ratio policies; antialiasing and `tf_crop_and_resize`
//! run on the host. `GridSample` samples at a grid's points (`layout/grid_sample.wgsl`); `AffineGrid` makes such a
//! grid (`layout/affine_grid.wgsl`).

use super::{done, host, Params};
use crate::error::Result;
use crate::wgpu::ctx::{Ctx, Out};

pub fn resize(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let xs = x.shape.clone();
    if xs.len() != 4 {
        return host("Resize of a tensor that is not 4-D");
    }
    let mode = match ctx.attr_s("mode", "nearest").as_str() {
        "nearest" => 0,
        "linear" | "bilinear" => 1,
        "cubic" | "bicubic" => 2,
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
        "half_pixel_symmetric" => 4,
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
    if ctx.attr_i("antialias", 0) != 0 {
        return host("Resize with antialias");
    }
    let axes: Vec<usize> = match ctx.attr_ints("axes") {
        Some(a) => match a.iter().map(|&v| super::axis(v, 4)).collect() {
            Some(v) => v,
            None => return host("Resize axes out of range"),
        },
        None => (0..4).collect(),
    };
    let (scales_at, sizes_at) = if ctx.opset < 11 { (1, 99) } else { (2, 3) };
    // Upsample (opsets 7 to 9) is Resize's ancestor: its scales are an attribute before opset 9.
    let scales = match ctx.has(scales_at) {
        true => ctx.floats(scales_at),
        false => crate::wgpu::ctx::attr(ctx.node, "scales")
            .map(|a| a.floats.iter().map(|&v| v as f64).collect()),
    }
    .filter(|v| !v.is_empty());
    let sizes = ctx
        .has(sizes_at)
        .then(|| ctx.ints(sizes_at))
        .flatten()
        .filter(|v| !v.is_empty());
    let policy = ctx.attr_s("keep_aspect_ratio_policy", "stretch");
    let Some((out, sc)) = plan(&xs, &axes, scales, sizes, &policy) else {
        return host("Resize without usable scales or sizes");
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
        .set_f(11, (sc[3] * xs[3] as f64) as f32)
        .set_f(12, ctx.attr_f("cubic_coeff_a", -0.75))
        .set(13, ctx.attr_i("exclude_outside", 0) as u32);
    if n > 0 {
        ctx.run("layout/resize", "main", &p.0, &[Some(&x.buf)], &y, n)?;
    }
    done(ctx, y)
}

/// Output lengths and per-axis scales over the four axes, as the reference derives them: from `scales` (the length
/// truncated), or from `sizes` (a kept aspect ratio takes the smallest or largest ratio, the length rounded);
/// `axes` name the axes given. `None` for anything else.
fn plan(
    xs: &[usize],
    axes: &[usize],
    scales: Option<Vec<f64>>,
    sizes: Option<Vec<i64>>,
    policy: &str,
) -> Option<(Vec<usize>, Vec<f64>)> {
    let (mut out, mut sc) = (xs.to_vec(), vec![1.0; xs.len()]);
    if let Some(s) = scales.filter(|s| s.len() == axes.len()) {
        for (&a, &v) in axes.iter().zip(&s) {
            sc[a] = v;
            out[a] = (v * xs[a] as f64) as usize;
        }
        return Some((out, sc));
    }
    let sizes = sizes.filter(|s| s.len() == axes.len())?;
    let ratios = axes
        .iter()
        .zip(&sizes)
        .map(|(&a, &v)| v as f64 / xs[a].max(1) as f64);
    let kept = match policy {
        "stretch" => None,
        "not_larger" => Some(ratios.clone().reduce(f64::min)?),
        "not_smaller" => Some(ratios.clone().reduce(f64::max)?),
        _ => return None,
    };
    for ((&a, &v), r) in axes.iter().zip(&sizes).zip(ratios) {
        sc[a] = kept.unwrap_or(r);
        out[a] = match kept {
            Some(p) => (p * xs[a] as f64 + 0.5) as usize,
            None => v.max(0) as usize,
        };
    }
    Some((out, sc))
}

/// `GridSample` over one to three spatial axes (`layout/grid_sample.wgsl`), every mode and padding mode.
pub fn grid_sample(ctx: &mut Ctx) -> Result<Out> {
    let (Some(xs), Some(gs)) = (ctx.shape(0), ctx.shape(1)) else {
        return host("GridSample: missing input");
    };
    let r = xs.len().saturating_sub(2);
    if !(1..=3).contains(&r) || gs.len() != r + 2 || gs[0] != xs[0] || gs[r + 1] != r {
        return host(format!("GridSample of X {xs:?} at a grid {gs:?}"));
    }
    let mode = match ctx.attr_s("mode", "linear").as_str() {
        "nearest" => 0,
        "linear" | "bilinear" => 1,
        "cubic" | "bicubic" => 2,
        m => return host(format!("GridSample mode {m}")),
    };
    let padding = match ctx.attr_s("padding_mode", "zeros").as_str() {
        "zeros" => 0,
        "border" => 1,
        "reflection" => 2,
        m => return host(format!("GridSample padding mode {m}")),
    };
    let x = ctx.dev(0)?;
    let g = ctx.dev(1)?;
    let mut shape = xs[..2].to_vec();
    shape.extend(&gs[1..=r]);
    let points: usize = gs[1..=r].iter().product();
    let out = ctx.output(shape, ctx.out_dtype());
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, r as u32)
        .set(2, xs[1] as u32)
        .set(3, mode)
        .set(4, padding)
        .set(5, ctx.attr_i("align_corners", 0) as u32)
        .set(6, points.max(1) as u32)
        .dims(8, &xs[2..]);
    if n > 0 {
        let ins = [Some(&*x.buf), Some(&*g.buf)];
        ctx.run("layout/grid_sample", "main", &p.0, &ins, &out, n)?;
    }
    done(ctx, out)
}

/// The grid of theta (N, r, r + 1) over `size` (N, C, [D,] H, W): (N, [D,] H, W, r).
pub fn affine_grid(ctx: &mut Ctx) -> Result<Out> {
    let (Some(ts), Some(size)) = (ctx.shape(0), ctx.ints(1)) else {
        return host("AffineGrid: size not known on the host");
    };
    let r = size.len().saturating_sub(2);
    if !(2..=3).contains(&r)
        || ts != [size[0].max(0) as usize, r, r + 1]
        || size.iter().any(|&s| s < 0)
    {
        return host(format!("AffineGrid of theta {ts:?} over size {size:?}"));
    }
    let spatial: Vec<usize> = size[2..].iter().map(|&s| s as usize).collect();
    let mut shape = vec![ts[0]];
    shape.extend(&spatial);
    shape.push(r);
    if !super::fits(&shape) {
        return host("AffineGrid: grid too large");
    }
    let theta = ctx.dev(0)?;
    let out = ctx.output(shape, ctx.out_dtype());
    let n = out.len();
    let mut three = vec![1; 3 - r];
    three.extend(&spatial);
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, r as u32)
        .set(2, ctx.attr_i("align_corners", 0) as u32)
        .dims(4, &three);
    if n > 0 {
        ctx.run(
            "layout/affine_grid",
            "main",
            &p.0,
            &[Some(&theta.buf)],
            &out,
            n,
        )?;
    }
    done(ctx, out)
}
