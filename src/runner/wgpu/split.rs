//! Nodes whose values exceed the adapter's storage-binding limit, run in slabs. The output is cut along one axis;
//! each input follows it (the same range of one of its axes, a convolution window of rows, or bound whole), and
//! each slab is copied into a buffer of its own with `copy_buffer_to_buffer` (which no binding limit applies to),
//! computed by the op's ordinary shader path as a smaller node, and copied into place in the full output. Every
//! output element is computed exactly as it would be unsplit, so values are bit-identical.
//!
//! Which axis and how the inputs follow is the op's [`Plan`] (`ops::split`). Element-wise ops chunk by byte range
//! without copies (`Ctx::run_chunked`); ops without a plan still run on the host and say why.

use tract_onnx::pb::NodeProto;

use super::ctx::{Ctx, DevVal, Out};
use super::gpu::Buf;
use super::ops::OpFn;
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

enum Fail {
    /// A slab (or a whole-bound input) is still beyond the limit: cut finer.
    TooBig,
    Other(String),
}

const PREFIX: &str = "\u{1}slab";

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
const MAX_DEPTH: usize = 1;

fn run_at(
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

/// One slab `o0..o1` of the output: inputs staged, the node run on them, its outputs returned.
fn slab(
    ctx: &mut Ctx,
    f: OpFn,
    plan: &Plan,
    o0: usize,
    o1: usize,
    depth: usize,
) -> Result<std::result::Result<Vec<DevVal>, Fail>> {
    let limit = ctx.gpu.max_binding();
    let eb = ctx.gpu.mode.elem_bytes();
    let mut sub: NodeProto = ctx.node.clone();
    let mut staged: Vec<String> = vec![];
    for (i, follow) in plan.inputs.iter().enumerate() {
        if !ctx.has(i) {
            continue;
        }
        let name = format!("{PREFIX}{depth}/{}/{i}", ctx.node.name);
        let (ax, r0, r1) = match follow {
            Follow::Whole => continue,
            Follow::Sizes(ax) => {
                let Some(mut sizes) = ctx.ints(i) else {
                    return Ok(Err(Fail::Other("sizes not known on the host".into())));
                };
                if let Some(s) = sizes.get_mut(*ax) {
                    *s = (o1 - o0) as i64;
                }
                let t = crate::tensor::Tensor::I64(
                    ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[sizes.len()]), sizes)
                        .expect("1-D"),
                );
                ctx.store.host.insert(name.clone(), t);
                sub.input[i] = name.clone();
                staged.push(name);
                continue;
            }
            Follow::Same(ax) => (*ax, o0 as i64, o1 as i64),
            Follow::Scatter {
                axis,
                stride,
                begin,
                extent,
                pads,
                out_pad,
                pad_at,
            } => {
                let dim = ctx
                    .shape(i)
                    .and_then(|s| s.get(*axis).copied())
                    .unwrap_or(0) as i64;
                let (s, b, e) = (*stride as i64, *begin as i64, *extent as i64);
                let i0 = ((o0 as i64 + b - e + 1).max(0) as u64).div_ceil(s as u64) as i64;
                let i0 = i0.min(dim);
                let i1 = ((o1 as i64 - 1 + b) / s + 1).clamp(0, dim);
                if i1 <= i0 {
                    return Ok(Err(Fail::Other("a slab takes no input rows".into())));
                }
                let pb = o0 as i64 + b - i0 * s;
                let pe = s * (i1 - i0 - 1) + e - pb - (o1 - o0) as i64;
                let mut p = pads.clone();
                let rank_sp = p.len() / 2;
                p[*pad_at] = pb;
                p[pad_at + rank_sp] = pe.max(0);
                let mut op = out_pad.clone();
                op[*pad_at] = (-pe).max(0);
                set_ints(&mut sub, "pads", p);
                set_ints(&mut sub, "output_padding", op);
                (*axis, i0, i1)
            }
            Follow::Window {
                axis,
                stride,
                begin,
                extent,
                pads,
                pad_at,
            } => {
                let dim = ctx
                    .shape(i)
                    .and_then(|s| s.get(*axis).copied())
                    .unwrap_or(0) as i64;
                let i0 = (o0 * stride) as i64 - *begin as i64;
                let i1 = ((o1 - 1) * stride + extent) as i64 - *begin as i64;
                let (c0, c1) = (i0.clamp(0, dim), i1.clamp(0, dim));
                let mut p = pads.clone();
                let rank_sp = p.len() / 2;
                p[*pad_at] = c0 - i0;
                p[pad_at + rank_sp] = i1 - c1;
                set_ints(&mut sub, "pads", p);
                if c1 <= c0 {
                    return Ok(Err(Fail::Other("a slab reads padding only".into())));
                }
                (*axis, c0, c1)
            }
        };
        // Integer and boolean inputs (Where's condition) are sliced on the host.
        if let Some(t) = ctx.host(i).filter(|t| !t.dtype().is_float()) {
            let a = t.to_f64_array();
            if ax >= a.ndim() {
                return Ok(Err(Fail::Other(format!("input {i} has no axis {ax}"))));
            }
            let s = a.slice_axis(
                ndarray::Axis(ax),
                ndarray::Slice::from(r0 as isize..r1 as isize),
            );
            let t = crate::tensor::Tensor::I64(s.mapv(|v| v as i64));
            ctx.store.host.insert(name.clone(), t);
            sub.input[i] = name.clone();
            staged.push(name);
            continue;
        }
        let x = ctx.dev(i)?;
        let mut shape = x.shape.clone();
        if ax >= shape.len() {
            return Ok(Err(Fail::Other(format!("input {i} has no axis {ax}"))));
        }
        let full_len = shape[ax];
        shape[ax] = (r1 - r0) as usize;
        let n: usize = shape.iter().product();
        if n as u64 * eb > limit {
            drop_staged(ctx, &staged);
            return Ok(Err(Fail::TooBig));
        }
        let v = ctx.output(shape.clone(), x.dtype);
        if !copy_slab(
            &mut ctx.enc,
            &x.buf,
            &x.shape,
            ax,
            r0 as usize,
            shape[ax],
            &v.buf,
            shape[ax],
            0,
            eb,
        ) {
            drop_staged(ctx, &staged);
            return Ok(Err(Fail::Other(format!(
                "a slab of input {i} is not 4-byte aligned for copying (f16 with odd extents)"
            ))));
        }
        debug_assert!(r1 as usize <= full_len);
        ctx.store.dev.insert(name.clone(), v);
        sub.input[i] = name.clone();
        staged.push(name);
    }
    for (j, o) in sub.output.iter_mut().enumerate() {
        if !o.is_empty() {
            *o = format!("{PREFIX}{depth}/{}/out{j}", ctx.node.name);
        }
    }
    let enc = std::mem::replace(&mut ctx.enc, ctx.gpu.encoder("slab"));
    let mut inner = Ctx {
        gpu: ctx.gpu,
        node: &sub,
        opset: ctx.opset,
        enc,
        store: &mut *ctx.store,
        too_big: false,
    };
    let mut r = f(&mut inner);
    if inner.too_big && depth < MAX_DEPTH && r.is_ok() {
        inner.too_big = false;
        let plans = super::ops::split::plans(&inner);
        r = match run_at(&mut inner, f, &plans, depth + 1) {
            Ok(Ok(v)) => Ok(Out::Dev(v)),
            Ok(Err(why)) => Ok(Out::Host(why)),
            Err(e) => Err(e),
        };
    }
    let (enc, too_big) = (inner.enc, inner.too_big);
    ctx.enc = enc;
    drop_staged(ctx, &staged);
    match r? {
        _ if too_big => Ok(Err(Fail::TooBig)),
        Out::Dev(v) => Ok(Ok(v)),
        Out::Host(why) => Ok(Err(Fail::Other(why))),
    }
}

fn drop_staged(ctx: &mut Ctx, names: &[String]) {
    for n in names {
        ctx.store.dev.remove(n);
        ctx.store.host.remove(n);
        ctx.store.aux.remove(n);
    }
}

/// Sets an ints attribute (explicit pads replace `auto_pad`).
fn set_ints(node: &mut NodeProto, name: &str, ints: Vec<i64>) {
    node.attribute
        .retain(|a| a.name != name && !(name == "pads" && a.name == "auto_pad"));
    node.attribute.push(tract_onnx::pb::AttributeProto {
        name: name.into(),
        ints,
        r#type: tract_onnx::pb::attribute_proto::AttributeType::Ints as i32,
        ..Default::default()
    });
}

/// Copies rows `r0 .. r0 + len` along `axis` of a tensor of `shape` (`src`) to rows `d0 ..` of a tensor that has
/// `dst_len` rows along that axis and the same other dims. `false` when a run is not 4-byte aligned.
#[allow(clippy::too_many_arguments)]
fn copy_slab(
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
