//! Layout ops. Reshape-like ops alias the input buffer under a new shape (no copy); Transpose, Slice, Expand, Tile,
//! Concat and Split are strided copies (`layout/copy.wgsl`); Gather, Resize/Upsample and GridSample have their own
//! shaders.

use super::{axis, bcast_strides, broadcast, contiguous, done, fits, host, Params, Row};
use crate::error::Result;
use tract_onnx::pb::NodeProto;

use crate::wgpu::ctx::{attr, Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("Reshape", reshape),
    Row::new("Flatten", reshape),
    Row::new("Squeeze", reshape),
    Row::new("Unsqueeze", reshape),
    Row::new("Transpose", transpose),
    Row::new("Slice", slice),
    Row::new("Expand", expand),
    Row::new("Concat", concat),
    Row::new("Split", split),
    Row::new("Gather", gather),
    Row::new("Resize", super::resize::resize),
    Row::new("Upsample", super::resize::resize),
    Row::new("GridSample", super::resize::grid_sample),
    Row::new("AffineGrid", super::resize::affine_grid),
    Row::new("Tile", tile),
];

/// The output shape of a Reshape, Flatten, Squeeze or Unsqueeze node `n` on an input of `shape`; `in1` is its second
/// input (the target shape, or the axes from opset 13 on) when given.
pub fn reshaped(
    n: &NodeProto,
    opset: i64,
    shape: &[usize],
    in1: Option<Vec<i64>>,
) -> Option<Vec<usize>> {
    let rank = shape.len();
    let attr_i = |name: &str, d: i64| attr(n, name).map(|a| a.i).unwrap_or(d);
    let given = n.input.get(1).is_some_and(|i| !i.is_empty());
    let axes_in = || -> Option<Vec<i64>> {
        match opset >= 13 {
            true if given => in1.clone(),
            true => Some(vec![]),
            false => Some(attr(n, "axes").map(|a| a.ints.clone()).unwrap_or_default()),
        }
    };
    match n.op_type.as_str() {
        "Reshape" => {
            let spec = in1.clone()?;
            let allow_zero = attr_i("allowzero", 0) == 1;
            let total: usize = shape.iter().product();
            let mut out: Vec<i64> = spec
                .iter()
                .enumerate()
                .map(|(k, &d)| match (d, allow_zero) {
                    (0, false) => shape.get(k).map(|&v| v as i64).unwrap_or(0),
                    _ => d,
                })
                .collect();
            let known: i64 = out.iter().filter(|&&d| d >= 0).product();
            if let Some(p) = out.iter().position(|&d| d == -1) {
                out[p] = if known == 0 { 0 } else { total as i64 / known };
            }
            let out: Vec<usize> = out.iter().map(|&d| d.max(0) as usize).collect();
            (out.iter().product::<usize>() == total).then_some(out)
        }
        "Flatten" => {
            let a = attr_i("axis", 1);
            let a = if a < 0 { a + rank as i64 } else { a } as usize;
            let a = a.min(rank);
            Some(vec![
                shape[..a].iter().product(),
                shape[a..].iter().product(),
            ])
        }
        "Squeeze" => {
            let axes = axes_in()?;
            let axes: Vec<usize> = axes.iter().map(|&a| axis(a, rank)).collect::<Option<_>>()?;
            Some(
                shape
                    .iter()
                    .enumerate()
                    .filter(|(k, &d)| !(axes.is_empty() && d == 1 || axes.contains(k)))
                    .map(|(_, &d)| d)
                    .collect(),
            )
        }
        _ => {
            let axes = axes_in()?;
            let out_rank = rank + axes.len();
            let axes: Vec<usize> = axes
                .iter()
                .map(|&a| axis(a, out_rank))
                .collect::<Option<_>>()?;
            let mut it = shape.iter();
            Some(
                (0..out_rank)
                    .map(|k| match axes.contains(&k) {
                        true => 1,
                        false => *it.next().unwrap_or(&1),
                    })
                    .collect(),
            )
        }
    }
}

fn reshape(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let in1 = if ctx.has(1) { ctx.ints(1) } else { None };
    let Some(shape) = reshaped(ctx.node, ctx.opset, &x.shape, in1) else {
        return host(format!(
            "{}: target shape not known on the host",
            ctx.node.op_type
        ));
    };
    Ok(Out::Dev(vec![DevVal { shape, ..x }]))
}

/// A strided copy from `x` into `out`: `iter` elements, read at `in_off` + strides, written at `out_off` + strides.
#[allow(clippy::too_many_arguments)]
pub fn copy(
    ctx: &mut Ctx,
    x: &DevVal,
    out: &DevVal,
    iter: &[usize],
    in_off: i64,
    in_strides: &[i64],
    out_off: i64,
    out_strides: &[i64],
) -> Result<()> {
    let n: usize = iter.iter().product();
    if n == 0 {
        return Ok(());
    }
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, iter.len() as u32)
        .set_i(2, in_off)
        .set_i(3, out_off)
        .dims(4, iter)
        .strides(12, in_strides)
        .strides(20, out_strides);
    ctx.run("layout/copy", "main", &p.0, &[Some(&x.buf)], out, n)
}

fn transpose(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let rank = x.shape.len();
    let perm: Vec<usize> = match ctx.attr_ints("perm") {
        Some(p) => p.iter().map(|&a| a as usize).collect(),
        None => (0..rank).rev().collect(),
    };
    if perm.len() != rank || !fits(&x.shape) {
        return host("Transpose: unusual permutation or rank");
    }
    let own = contiguous(&x.shape);
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    let ins: Vec<i64> = perm.iter().map(|&p| own[p]).collect();
    let out = ctx.output(shape.clone(), x.dtype);
    copy(ctx, &x, &out, &shape, 0, &ins, 0, &contiguous(&shape))?;
    done(ctx, out)
}

fn slice(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let rank = x.shape.len();
    let (starts, ends, axes, steps) = if ctx.opset < 10 {
        (
            ctx.attr_ints("starts"),
            ctx.attr_ints("ends"),
            ctx.attr_ints("axes"),
            None,
        )
    } else {
        (
            ctx.ints(1),
            ctx.ints(2),
            ctx.has(3).then(|| ctx.ints(3)).flatten(),
            ctx.has(4).then(|| ctx.ints(4)).flatten(),
        )
    };
    let (Some(starts), Some(ends)) = (starts, ends) else {
        return host("Slice bounds not known on the host");
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    let own = contiguous(&x.shape);
    let mut shape = x.shape.clone();
    let mut ins = own.clone();
    let mut off = 0i64;
    for k in 0..starts.len() {
        let Some(a) = axis(axes[k], rank) else {
            return host("Slice axis out of range");
        };
        let dim = x.shape[a] as i64;
        let step = steps[k];
        if step == 0 {
            return host("Slice step 0");
        }
        let fix = |v: i64| if v < 0 { v + dim } else { v };
        let (s, e) = match step > 0 {
            true => (fix(starts[k]).clamp(0, dim), fix(ends[k]).clamp(0, dim)),
            false => (
                fix(starts[k]).clamp(0, dim - 1),
                fix(ends[k]).clamp(-1, dim - 1),
            ),
        };
        let len = match step > 0 {
            true => (e - s + step - 1).div_euclid(step).max(0),
            false => (s - e + (-step) - 1).div_euclid(-step).max(0),
        };
        shape[a] = len as usize;
        ins[a] = own[a] * step;
        off += s.max(0) * own[a];
    }
    let out = ctx.output(shape.clone(), x.dtype);
    copy(ctx, &x, &out, &shape, off, &ins, 0, &contiguous(&shape))?;
    done(ctx, out)
}

/// Tile as a strided copy: x (d0, d1, …) read as (r0, d0, r1, d1, …) with stride 0 along each repeat.
fn tile(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let rank = x.shape.len();
    let Some(reps) = ctx.ints(1).filter(|r| r.len() == rank) else {
        return host("Tile repeats not known on the host");
    };
    if 2 * rank > super::MAX_RANK {
        return host("Tile beyond the strided shaders' rank");
    }
    let own = contiguous(&x.shape);
    let mut iter = vec![];
    let mut ins = vec![];
    for d in 0..rank {
        iter.extend([reps[d].max(0) as usize, x.shape[d]]);
        ins.extend([0, own[d]]);
    }
    let shape: Vec<usize> = (0..rank).map(|d| iter[2 * d] * iter[2 * d + 1]).collect();
    if !fits(&shape) {
        return host("Tile beyond 2^31 elements");
    }
    let out = ctx.output(shape, x.dtype);
    copy(ctx, &x, &out, &iter, 0, &ins, 0, &contiguous(&iter))?;
    done(ctx, out)
}

fn expand(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let Some(spec) = ctx.ints(1) else {
        return host("Expand shape not known on the host");
    };
    let spec: Vec<usize> = spec.iter().map(|&d| d.max(0) as usize).collect();
    let Some(shape) = broadcast(&[&x.shape, &spec]).filter(|s| fits(s)) else {
        return host("Expand: shapes that do not broadcast");
    };
    let out = ctx.output(shape.clone(), x.dtype);
    let ins = bcast_strides(&x.shape, &shape);
    copy(ctx, &x, &out, &shape, 0, &ins, 0, &contiguous(&shape))?;
    done(ctx, out)
}

fn concat(ctx: &mut Ctx) -> Result<Out> {
    let n_in = ctx.node.input.len();
    if (0..n_in).any(|i| !ctx.is_float(i)) {
        return host("host: Concat of integer values");
    }
    let xs: Vec<DevVal> = (0..n_in).map(|i| ctx.dev(i)).collect::<Result<_>>()?;
    let rank = xs[0].shape.len();
    let Some(a) = axis(ctx.attr_i("axis", 0), rank) else {
        return host("Concat axis out of range");
    };
    let mut shape = xs[0].shape.clone();
    shape[a] = xs.iter().map(|x| x.shape[a]).sum();
    if !fits(&shape) {
        return host("Concat beyond the strided shaders' rank");
    }
    let out = ctx.output(shape.clone(), ctx.out_dtype());
    let os = contiguous(&shape);
    let mut at = 0i64;
    for x in &xs {
        copy(
            ctx,
            x,
            &out,
            &x.shape,
            0,
            &contiguous(&x.shape),
            at * os[a],
            &os,
        )?;
        at += x.shape[a] as i64;
    }
    done(ctx, out)
}

fn split(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let rank = x.shape.len();
    let Some(a) = axis(ctx.attr_i("axis", 0), rank) else {
        return host("Split axis out of range");
    };
    let n_out = ctx.node.output.len();
    let dim = x.shape[a];
    let sizes: Vec<usize> = match (ctx.opset >= 13 && ctx.has(1), ctx.attr_ints("split")) {
        (true, _) => match ctx.ints(1) {
            Some(v) => v.iter().map(|&d| d as usize).collect(),
            None => return host("Split sizes not known on the host"),
        },
        (false, Some(v)) if !v.is_empty() => v.iter().map(|&d| d as usize).collect(),
        _ => {
            let parts = ctx.attr_i("num_outputs", n_out as i64).max(1) as usize;
            let each = dim.div_ceil(parts);
            (0..parts)
                .map(|k| each.min(dim.saturating_sub(k * each)))
                .collect()
        }
    };
    if sizes.len() != n_out || sizes.iter().sum::<usize>() != dim {
        return host("Split sizes do not add up");
    }
    let own = contiguous(&x.shape);
    let mut outs = vec![];
    let mut at = 0i64;
    for &s in &sizes {
        let mut shape = x.shape.clone();
        shape[a] = s;
        let out = ctx.output(shape.clone(), x.dtype);
        copy(
            ctx,
            &x,
            &out,
            &shape,
            at * own[a],
            &own,
            0,
            &contiguous(&shape),
        )?;
        outs.push(super::finish(ctx, out)?);
        at += s as i64;
    }
    Ok(Out::Dev(outs))
}

fn gather(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let Some(ishape) = ctx.shape(1) else {
        return host("Gather: no indices");
    };
    let Some(a) = axis(ctx.attr_i("axis", 0), x.shape.len()) else {
        return host("Gather axis out of range");
    };
    let idx = ctx.dev_words(1)?;
    let mut shape: Vec<usize> = x.shape[..a].to_vec();
    shape.extend(&ishape);
    shape.extend(&x.shape[a + 1..]);
    let inner: usize = x.shape[a + 1..].iter().product();
    let nidx: usize = ishape.iter().product();
    let out = ctx.output(shape, x.dtype);
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, inner.max(1) as u32)
        .set(2, nidx.max(1) as u32)
        .set(3, x.shape[a] as u32);
    if n > 0 {
        ctx.run(
            "layout/gather",
            "main",
            &p.0,
            &[Some(&x.buf), Some(&idx)],
            &out,
            n,
        )?;
    }
    done(ctx, out)
}
