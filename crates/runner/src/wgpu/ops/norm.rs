//! LRN (`reduce/lane.wgsl`, along the channels) and GroupNormalization (`reduce/norm.wgsl`, one row per group).

use super::{done, host, Params, Row};
use crate::error::Result;
use crate::wgpu::ctx::{Ctx, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("LRN", lrn),
    Row::new("GroupNormalization", group_norm),
];

/// The longest lane one invocation walks (lavapipe stops loops near 65,535 iterations).
const MAX_LANE: usize = 60_000;

fn lrn(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let size = ctx.attr_i("size", 0);
    if x.shape.len() < 2 || size < 1 || x.shape[1] > MAX_LANE {
        return host("LRN of this shape or size");
    }
    let inner: usize = x.shape[2..].iter().product();
    let out = ctx.output(x.shape.clone(), ctx.out_dtype());
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, x.shape[1] as u32)
        .set(2, inner.max(1) as u32)
        .set(7, size as u32)
        .set_f(8, ctx.attr_f("alpha", 1e-4))
        .set_f(9, ctx.attr_f("beta", 0.75))
        .set_f(10, ctx.attr_f("bias", 1.0));
    if n > 0 {
        ctx.run("reduce/lane", "lrn", &p.0, &[Some(&x.buf)], &out, n)?;
    }
    done(ctx, out)
}

/// Scale and bias per channel (opset 21: C entries) or per group (opset 18: G entries).
fn group_norm(ctx: &mut Ctx) -> Result<Out> {
    let (Some(xs), Some(ss)) = (ctx.shape(0), ctx.shape(1)) else {
        return host("GroupNormalization: missing input");
    };
    let g = ctx.attr_i("num_groups", 0).max(0) as usize;
    if xs.len() < 2 || g == 0 || xs[1] % g != 0 || ss.len() != 1 {
        return host(format!("GroupNormalization of {xs:?} in {g} groups"));
    }
    let c = xs[1];
    let per_channel = match ss[0] {
        s if s == c => true,
        s if s == g => false,
        _ => return host("GroupNormalization: scale of an unusual length"),
    };
    let spatial: usize = xs[2..].iter().product();
    let rows = xs[0] * g;
    let r = c / g * spatial;
    let (x, s, b) = (ctx.dev(0)?, ctx.dev(1)?, ctx.dev(2)?);
    let out = ctx.output(xs, ctx.out_dtype());
    let mut p = Params::new();
    p.set(0, rows as u32)
        .set(1, r as u32)
        .set_f(2, ctx.attr_f("epsilon", 1e-5))
        .set(3, g as u32)
        .set(4, spatial.max(1) as u32)
        .set(5, per_channel as u32)
        .set(6, (c / g) as u32);
    if rows > 0 && r > 0 {
        let ins = [Some(&*x.buf), Some(&*s.buf), Some(&*b.buf)];
        ctx.run_rows("reduce/norm", "groupnorm", &p.0, &ins, &out, rows)?;
    }
    done(ctx, out)
}
