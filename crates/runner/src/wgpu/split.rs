//! Nodes whose values exceed the adapter's storage-binding limit, run in slabs. The output is cut along one axis;
//! each input follows it (the same range of one of its axes, a convolution window of rows, or bound whole), and
//! each slab is copied into a buffer of its own with `copy_buffer_to_buffer` (which no binding limit applies to),
//! computed by the op's ordinary shader path as a smaller node, and copied into place in the full output. Every
//! output element is computed exactly as it would be unsplit, so values are bit-identical.
//!
//! Which axis and how the inputs follow is the op's [`Plan`] (`ops::split`). Element-wise ops chunk by byte range
//! without copies (`Ctx::run_chunked`); ops without a plan still run on the host and say why.

use super::ctx::{Ctx, DevVal};
use super::gpu::Buf;
use super::ops::OpFn;
use super::slab::slab;
use crate::error::Result;

/// How one input follows the output's cut.
#[derive(Clone, Debug, PartialEq)]
pub enum Follow {
    /// Bound whole (weights, broadcast operands, integer inputs on the host).
    Whole,
    /// The same range along this axis of the input.
    Same(usize),
    /// Convolution rows along `axis`: output row `o` reads input rows `o·stride − begin …` over `extent` rows. The
    /// slab's node gets explicit `pads` with the begin and end pads of that axis (slots `pad_at`, `pad_at + rank`)
    /// rewritten for the rows it holds.
    Window {
        axis: usize,
        stride: usize,
        begin: usize,
        extent: usize,
        pads: Vec<i64>,
        pad_at: usize,
    },
    /// Transposed-convolution rows along `axis`: output row `o` takes input rows `ih` with `o = ih·stride + j − begin`
    /// for `j` below `extent`. The slab's node gets `pads` and `output_padding` rewritten so that its output is
    /// exactly the slab's rows.
    Scatter {
        axis: usize,
        stride: usize,
        begin: usize,
        extent: usize,
        pads: Vec<i64>,
        out_pad: Vec<i64>,
        pad_at: usize,
    },
    /// An integer `sizes` input on the host whose entry `axis` becomes the slab's length (Resize).
    Sizes(usize),
}

/// A way to cut a node: the output axis, its length, and how each input follows.
#[derive(Clone, Debug)]
pub struct Plan {
    pub axis: usize,
    pub extent: usize,
    pub inputs: Vec<Follow>,
}

pub(super) enum Fail {
    /// A slab (or a whole-bound input) is still beyond the limit: cut finer.
    TooBig,
    Other(String),
}

pub(super) const PREFIX: &str = "\u{1}slab";

/// Runs `ctx.node` by the first of `plans` that works; `Err(reason)` when none does.
pub fn run(
    ctx: &mut Ctx,
    f: OpFn,
    plans: &[Plan],
) -> Result<std::result::Result<Vec<DevVal>, String>> {
    let r = run_at(ctx, f, plans, 0)?;
    if r.is_ok() {
        *ctx.gpu.cut_nodes.borrow_mut() += 1;
    }
    Ok(r)
}

/// Slabs of slabs: a slab still beyond the limit because of an input its plan binds whole (MatMul's B when cutting
/// A's rows) is cut again by another plan, once.
pub(super) const MAX_DEPTH: usize = 1;

pub(super) fn run_at(
    ctx: &mut Ctx,
    f: OpFn,
    plans: &[Plan],
    depth: usize,
) -> Result<std::result::Result<Vec<DevVal>, String>> {
    let limit = ctx.gpu.max_binding();
    let op = ctx.node.op_type.clone();
    let mut why: Vec<String> = vec![];
    'plans: for plan in plans {
        // An input bound whole must fit as it is, unless another plan cuts it (a slab is cut again).
        for (i, follow) in plan.inputs.iter().enumerate() {
            let recut = depth < MAX_DEPTH
                && plans
                    .iter()
                    .any(|p| p.inputs.get(i).is_some_and(|f| *f != Follow::Whole));
            if *follow == Follow::Whole && ctx.has(i) && whole_bytes(ctx, i) > limit && !recut {
                why.push(format!(
                    "along axis {} input {i} stays whole, beyond the limit",
                    plan.axis
                ));
                continue 'plans;
            }
        }
        let biggest = (0..plan.inputs.len())
            .filter(|&i| ctx.has(i) && plan.inputs[i] != Follow::Whole)
            .map(|i| whole_bytes(ctx, i))
            .max()
            .unwrap_or(0);
        let mut k = (biggest.div_ceil(limit.max(1)) as usize).max(2);
        loop {
            let k_now = k.min(plan.extent.max(1));
            match slabs(ctx, f, plan, k_now, depth)? {
                Ok(outs) => return Ok(Ok(outs)),
                Err(Fail::Other(reason)) => {
                    why.push(format!("along axis {}: {reason}", plan.axis));
                    continue 'plans;
                }
                Err(Fail::TooBig) if k_now >= plan.extent => {
                    why.push(format!(
                        "one slab along axis {} is still beyond the limit",
                        plan.axis
                    ));
                    continue 'plans;
                }
                Err(Fail::TooBig) => k = k_now * 2,
            }
        }
    }
    Ok(Err(match why.is_empty() {
        true => format!("phantom has no way to cut {op} into slabs"),
        false => format!("phantom could not cut {op} into slabs ({})", why.join("; ")),
    }))
}

fn whole_bytes(ctx: &Ctx, i: usize) -> u64 {
    let n: usize = ctx.shape(i).map(|s| s.iter().product()).unwrap_or(0);
    n as u64 * ctx.gpu.mode.elem_bytes()
}

/// The node computed in `k` slabs.
fn slabs(
    ctx: &mut Ctx,
    f: OpFn,
    plan: &Plan,
    k: usize,
    depth: usize,
) -> Result<std::result::Result<Vec<DevVal>, Fail>> {
    let per = plan.extent.div_ceil(k).max(1);
    let mut full: Vec<DevVal> = vec![];
    let mut o0 = 0;
    while o0 < plan.extent {
        let o1 = (o0 + per).min(plan.extent);
        let outs = match slab(ctx, f, plan, o0, o1, depth)? {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        for (j, v) in outs.iter().enumerate() {
            if full.len() <= j {
                if v.shape.len() <= plan.axis || v.shape[plan.axis] != o1 - o0 {
                    return Ok(Err(Fail::Other(format!(
                        "output {j} does not follow axis {}",
                        plan.axis
                    ))));
                }
                let mut shape = v.shape.clone();
                shape[plan.axis] = plan.extent;
                let bytes = shape.iter().product::<usize>() as u64 * ctx.gpu.mode.elem_bytes();
                if bytes.next_power_of_two() > ctx.gpu.adapter.max_buffer_size {
                    return Ok(Err(Fail::Other(format!(
                        "the output ({} MiB) is beyond the adapter's buffer size limit",
                        bytes >> 20
                    ))));
                }
                full.push(ctx.output(shape, v.dtype));
            }
            let eb = ctx.gpu.mode.elem_bytes();
            let (dst, src) = (&full[j], &v.buf);
            if !copy_slab(
                &mut ctx.enc,
                src,
                &v.shape,
                plan.axis,
                0,
                o1 - o0,
                &dst.buf,
                plan.extent,
                o0,
                eb,
            ) {
                return Ok(Err(Fail::Other(
                    "a slab of the output is not 4-byte aligned for copying (f16 with odd extents)"
                        .into(),
                )));
            }
        }
        o0 = o1;
    }
    Ok(Ok(full))
}

/// Copies rows `r0 .. r0 + len` along `axis` of a tensor of `shape` (`src`) to rows `d0 ..` of a tensor that has
/// `dst_len` rows along that axis and the same other dims. `false` when a run is not 4-byte aligned.
#[allow(clippy::too_many_arguments)]
pub(super) fn copy_slab(
    enc: &mut wgpu::CommandEncoder,
    src: &Buf,
    shape: &[usize],
    axis: usize,
    r0: usize,
    len: usize,
    dst: &Buf,
    dst_len: usize,
    d0: usize,
    eb: u64,
) -> bool {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let src_len = shape[axis];
    let runs: Vec<(u64, u64, u64)> = match (len == src_len && len == dst_len, outer) {
        // The whole tensor, or one run: a single copy.
        (true, _) | (_, 1) => vec![(
            (r0 * inner) as u64 * eb,
            (d0 * inner) as u64 * eb,
            (outer * len * inner) as u64 * eb,
        )],
        _ => (0..outer)
            .map(|o| {
                (
                    ((o * src_len + r0) * inner) as u64 * eb,
                    ((o * dst_len + d0) * inner) as u64 * eb,
                    (len * inner) as u64 * eb,
                )
            })
            .collect(),
    };
    if runs
        .iter()
        .any(|&(s, d, n)| s % 4 != 0 || d % 4 != 0 || n % 4 != 0)
    {
        return false;
    }
    for (s, d, n) in runs {
        if n > 0 {
            enc.copy_buffer_to_buffer(&src.raw, s, &dst.raw, d, n);
        }
    }
    true
}
