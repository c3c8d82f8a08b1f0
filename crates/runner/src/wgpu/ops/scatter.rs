//! ScatterElements (and its old name Scatter) and ScatterND on the device (`layout/scatter.wgsl`): every output
//! element applies, in order, the updates aimed at it, so duplicate indices and the reductions (`add`, `mul`,
//! `max`, `min`) give what the spec's sequential loop gives. Each element walks every update: nodes whose
//! elements × updates exceed [`MAX_WORK`] run on the host. GatherElements, their inverse, reads one element per
//! output (`layout/gather.wgsl`).

use super::{axis, contiguous, done, fits, host, Params, Row};
use crate::error::Result;
use crate::wgpu::ctx::{Ctx, DevVal, Out};
use crate::wgpu::gpu::Buf;

pub(super) const TABLE: &[Row] = &[
    Row::new("Scatter", scatter),
    Row::new("ScatterElements", scatter),
    Row::new("ScatterND", scatter),
    Row::new("GatherElements", gather_elements),
];

/// Output elements × updates beyond which the node runs on the host.
const MAX_WORK: usize = 1 << 28;

/// The most updates one invocation walks (lavapipe stops loops near 65,535 iterations).
const MAX_UPDATES: usize = 60_000;

fn scatter(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let (Some(xs), Some(is), Some(us)) = (ctx.shape(0), ctx.shape(1), ctx.shape(2)) else {
        return host(format!("{op}: missing input"));
    };
    let reduction = match ctx.attr_s("reduction", "none").as_str() {
        "none" => 0,
        "add" => 1,
        "mul" => 2,
        "max" => 3,
        "min" => 4,
        r => return host(format!("{op} with reduction {r}")),
    };
    let n: usize = xs.iter().product();
    let nd = op == "ScatterND";
    let k = if nd { *is.last().unwrap_or(&0) } else { 0 };
    let m: usize = match nd {
        true => is[..is.len().saturating_sub(1)].iter().product(),
        false => is.iter().product(),
    };
    let shapes_ok = match nd {
        true => {
            !is.is_empty()
                && (1..=xs.len()).contains(&k)
                && us[..] == [&is[..is.len() - 1], &xs[k..]].concat()[..]
        }
        false => is.len() == xs.len() && us == is,
    };
    if !shapes_ok || !fits(&xs) || !fits(&is) || !ctx.is_float(2) {
        return host(format!(
            "{op} of data {xs:?}, indices {is:?}, updates {us:?}"
        ));
    }
    if m > MAX_UPDATES || n.saturating_mul(m) > MAX_WORK {
        return host(format!("{op}: {m} updates into {n} elements"));
    }
    let Some(a) = axis(ctx.attr_i("axis", 0), xs.len()) else {
        return host(format!("{op} axis out of range"));
    };
    let x = ctx.dev(0)?;
    let idx = ctx.dev_words(1)?;
    let upd = ctx.dev(2)?;
    let out = ctx.output(xs.clone(), x.dtype);
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, xs.len() as u32)
        .set(2, a as u32)
        .set(3, m as u32)
        .set(4, reduction)
        .set(5, k as u32)
        .set(
            6,
            xs[k.min(xs.len())..].iter().product::<usize>().max(1) as u32,
        )
        .dims(8, &xs)
        .dims(16, &is);
    let entry = if nd { "nd" } else { "elements" };
    if n > 0 {
        let ins = [Some(&*x.buf), Some(&*idx), Some(&*upd.buf)];
        ctx.run("layout/scatter", entry, &p.0, &ins, &out, n)?;
    }
    done(ctx, out)
}

fn gather_elements(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let Some(ishape) = ctx.shape(1) else {
        return host("GatherElements: no indices");
    };
    let rank = x.shape.len();
    let Some(a) = axis(ctx.attr_i("axis", 0), rank) else {
        return host("GatherElements axis out of range");
    };
    if rank == 0 || ishape.len() != rank || !fits(&x.shape) || !fits(&ishape) {
        return host("GatherElements with indices of another rank");
    }
    let idx = ctx.dev_words(1)?;
    let out = gather_along(ctx, &x, &idx, ishape, a)?;
    done(ctx, out)
}

/// The elements of `x` that `idx` (words, of shape `ishape`, the rank of `x`) names along axis `a`.
pub(super) fn gather_along(
    ctx: &mut Ctx,
    x: &DevVal,
    idx: &Buf,
    ishape: Vec<usize>,
    a: usize,
) -> Result<DevVal> {
    let out = ctx.output(ishape.clone(), x.dtype);
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, ishape.len() as u32)
        .set(2, a as u32)
        .set(3, x.shape[a] as u32)
        .dims(4, &ishape)
        .strides(12, &contiguous(&x.shape));
    if n > 0 {
        ctx.run(
            "layout/gather",
            "elements",
            &p.0,
            &[Some(&x.buf), Some(idx)],
            &out,
            n,
        )?;
    }
    Ok(out)
}
