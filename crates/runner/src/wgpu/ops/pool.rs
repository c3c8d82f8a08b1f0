//! MaxPool (with its Indices output), AveragePool and LpPool over one to three spatial axes (`conv/pool.wgsl`,
//! `conv/pool_index.wgsl`).

use super::linalg::axes;
use super::{done, finish, host, Params, Row};
use crate::error::Result;
use crate::tensor::DType;
use crate::wgpu::ctx::{Ctx, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("MaxPool", pool),
    Row::new("AveragePool", pool),
    Row::new("LpPool", pool),
];

/// `v` (one entry per spatial axis) with leading `def`s up to three axes.
fn three(v: &[usize], def: usize) -> Vec<usize> {
    let mut o = vec![def; 3 - v.len()];
    o.extend_from_slice(v);
    o
}

fn pool(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let xs = x.shape.clone();
    let Some(kernel) = ctx.attr_ints("kernel_shape") else {
        return host("pool without kernel_shape");
    };
    let kernel: Vec<usize> = kernel.iter().map(|&k| k.max(0) as usize).collect();
    if xs.len() < 3 || xs.len() > 5 || kernel.len() != xs.len() - 2 {
        return host("pool over more than three spatial axes");
    }
    let ceil = ctx.attr_i("ceil_mode", 0) != 0;
    let Some(a) = axes(ctx, &xs[2..], &kernel, ceil, false) else {
        return host("pool: unusual geometry");
    };
    let mut shape = xs[..2].to_vec();
    shape.extend(&a.out);
    let mut p = Params::new();
    p.dims(1, &three(&xs[2..], 1))
        .dims(4, &three(&a.out, 1))
        .dims(7, &three(&a.k, 1))
        .dims(10, &three(&a.s, 1))
        .dims(13, &three(&a.begin, 0))
        .dims(16, &three(&a.d, 1))
        .dims(19, &three(&a.end, 0))
        .set(22, ctx.attr_i("count_include_pad", 0) as u32)
        .set_f(23, ctx.attr_i("p", 2) as f32)
        .set(24, ctx.attr_i("storage_order", 0) as u32);
    let out = ctx.output(shape.clone(), ctx.out_dtype());
    let n = out.len();
    p.set(0, n as u32);
    let entry = match ctx.node.op_type.as_str() {
        "MaxPool" => "maxpool",
        "LpPool" => "lppool",
        _ => "avgpool",
    };
    if n > 0 {
        ctx.run("conv/pool", entry, &p.0, &[Some(&x.buf)], &out, n)?;
    }
    if ctx.node.output.get(1).is_none_or(|o| o.is_empty()) {
        return done(ctx, out);
    }
    if xs.iter().product::<usize>() > u32::MAX as usize {
        return host("MaxPool's indices beyond 32 bits");
    }
    let idx = ctx.output_words(shape, DType::I64);
    if n > 0 {
        ctx.run("conv/pool_index", "main", &p.0, &[Some(&x.buf)], &idx, n)?;
    }
    Ok(Out::Dev(vec![finish(ctx, out)?, idx]))
}
