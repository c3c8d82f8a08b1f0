//! One slab of a node cut by [`super::split`]: each input staged as its [`Follow`] says (rows copied into a buffer
//! of their own, integer inputs sliced on the host, `sizes` and convolution pads rewritten for the slab's rows), the
//! op's ordinary shader path run on them as a smaller node (cut again, once, when still beyond the limit), and the
//! staged values dropped.

use tract_onnx::pb::NodeProto;

use super::ctx::{Ctx, DevVal, Out};
use super::ops::OpFn;
use super::split::{copy_slab, run_at, Fail, Follow, Plan, MAX_DEPTH, PREFIX};
use crate::error::Result;

/// One slab being prepared: its output rows `o0..o1`, the nesting depth, the node rewritten for it and the names
/// of the values staged for it (dropped once it ran).
struct Slab {
    o0: usize,
    o1: usize,
    depth: usize,
    sub: NodeProto,
    staged: Vec<String>,
}

/// One slab `o0..o1` of the output: inputs staged, the node run on them, its outputs returned.
pub(super) fn slab(
    ctx: &mut Ctx,
    f: OpFn,
    plan: &Plan,
    o0: usize,
    o1: usize,
    depth: usize,
) -> Result<std::result::Result<Vec<DevVal>, Fail>> {
    let mut s = Slab {
        o0,
        o1,
        depth,
        sub: ctx.node.clone(),
        staged: vec![],
    };
    for (i, follow) in plan.inputs.iter().enumerate() {
        if !ctx.has(i) {
            continue;
        }
        if let Err(e) = s.stage(ctx, i, follow)? {
            return Ok(Err(e));
        }
    }
    s.run(ctx, f)
}

/// The length of input `i` along `axis` (0 when unknown).
fn input_dim(ctx: &Ctx, i: usize, axis: usize) -> i64 {
    ctx.shape(i).and_then(|s| s.get(axis).copied()).unwrap_or(0) as i64
}

impl Slab {
    /// Stages input `i` as `follow` says: its rows for this slab copied into a value of its own (or sliced on the
    /// host), the slab's node rewritten to read it. Whole inputs are left as they are.
    fn stage(
        &mut self,
        ctx: &mut Ctx,
        i: usize,
        follow: &Follow,
    ) -> Result<std::result::Result<(), Fail>> {
        let name = format!("{PREFIX}{}/{}/{i}", self.depth, ctx.node.name);
        let (o0, o1) = (self.o0, self.o1);
        let (ax, r0, r1) = match follow {
            Follow::Whole => return Ok(Ok(())),
            Follow::Sizes(ax) => return Ok(self.stage_sizes(ctx, i, *ax, name)),
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
                let dim = input_dim(ctx, i, *axis);
                match self.scatter_rows(dim, [*stride, *begin, *extent], pads, out_pad, *pad_at) {
                    Ok((i0, i1)) => (*axis, i0, i1),
                    Err(e) => return Ok(Err(e)),
                }
            }
            Follow::Window {
                axis,
                stride,
                begin,
                extent,
                pads,
                pad_at,
            } => {
                let dim = input_dim(ctx, i, *axis);
                match self.window_rows(dim, [*stride, *begin, *extent], pads, *pad_at) {
                    Ok((c0, c1)) => (*axis, c0, c1),
                    Err(e) => return Ok(Err(e)),
                }
            }
        };
        // Integer and boolean inputs (Where's condition) are sliced on the host.
        if let Some(a) = ctx
            .host(i)
            .filter(|t| !t.dtype().is_float())
            .map(|t| t.to_f64_array())
        {
            return Ok(self.stage_host_rows(ctx, i, &a, (ax, r0, r1), name));
        }
        self.stage_device_rows(ctx, i, (ax, r0, r1), name)
    }

    /// Input `i`, an integer `sizes` on the host, with entry `ax` set to the slab's length.
    fn stage_sizes(
        &mut self,
        ctx: &mut Ctx,
        i: usize,
        ax: usize,
        name: String,
    ) -> std::result::Result<(), Fail> {
        let Some(mut sizes) = ctx.ints(i) else {
            return Err(Fail::Other("sizes not known on the host".into()));
        };
        if let Some(s) = sizes.get_mut(ax) {
            *s = (self.o1 - self.o0) as i64;
        }
        let t = crate::tensor::Tensor::I64(
            ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[sizes.len()]), sizes).expect("1-D"),
        );
        ctx.store.host.insert(name.clone(), t);
        self.adopt(i, name);
        Ok(())
    }

    /// The input rows a transposed-convolution slab takes (`[stride, begin, extent]` of the rows), with the slab
    /// node's `pads` and `output_padding` rewritten so that its output is exactly the slab's rows.
    fn scatter_rows(
        &mut self,
        dim: i64,
        [stride, begin, extent]: [usize; 3],
        pads: &[i64],
        out_pad: &[i64],
        pad_at: usize,
    ) -> std::result::Result<(i64, i64), Fail> {
        let (o0, o1) = (self.o0, self.o1);
        let (s, b, e) = (stride as i64, begin as i64, extent as i64);
        let i0 = ((o0 as i64 + b - e + 1).max(0) as u64).div_ceil(s as u64) as i64;
        let i0 = i0.min(dim);
        let i1 = ((o1 as i64 - 1 + b) / s + 1).clamp(0, dim);
        if i1 <= i0 {
            return Err(Fail::Other("a slab takes no input rows".into()));
        }
        let pb = o0 as i64 + b - i0 * s;
        let pe = s * (i1 - i0 - 1) + e - pb - (o1 - o0) as i64;
        let mut p = pads.to_vec();
        let rank_sp = p.len() / 2;
        p[pad_at] = pb;
        p[pad_at + rank_sp] = pe.max(0);
        let mut op = out_pad.to_vec();
        op[pad_at] = (-pe).max(0);
        set_ints(&mut self.sub, "pads", p);
        set_ints(&mut self.sub, "output_padding", op);
        Ok((i0, i1))
    }

    /// The input rows a convolution slab reads (`[stride, begin, extent]` of its window), clamped to the input,
    /// with the slab node's `pads` rewritten for the rows cut off.
    fn window_rows(
        &mut self,
        dim: i64,
        [stride, begin, extent]: [usize; 3],
        pads: &[i64],
        pad_at: usize,
    ) -> std::result::Result<(i64, i64), Fail> {
        let i0 = (self.o0 * stride) as i64 - begin as i64;
        let i1 = ((self.o1 - 1) * stride + extent) as i64 - begin as i64;
        let (c0, c1) = (i0.clamp(0, dim), i1.clamp(0, dim));
        let mut p = pads.to_vec();
        let rank_sp = p.len() / 2;
        p[pad_at] = c0 - i0;
        p[pad_at + rank_sp] = i1 - c1;
        set_ints(&mut self.sub, "pads", p);
        if c1 <= c0 {
            return Err(Fail::Other("a slab reads padding only".into()));
        }
        Ok((c0, c1))
    }

    /// Rows `r0..r1` along `ax` of input `i`, an integer or boolean value on the host (`a`), staged on the host.
    fn stage_host_rows(
        &mut self,
        ctx: &mut Ctx,
        i: usize,
        a: &ndarray::ArrayD<f64>,
        (ax, r0, r1): (usize, i64, i64),
        name: String,
    ) -> std::result::Result<(), Fail> {
        if ax >= a.ndim() {
            return Err(Fail::Other(format!("input {i} has no axis {ax}")));
        }
        let s = a.slice_axis(
            ndarray::Axis(ax),
            ndarray::Slice::from(r0 as isize..r1 as isize),
        );
        let t = crate::tensor::Tensor::I64(s.mapv(|v| v as i64));
        ctx.store.host.insert(name.clone(), t);
        self.adopt(i, name);
        Ok(())
    }

    /// Rows `r0..r1` along `ax` of device input `i`, copied into a value of their own.
    fn stage_device_rows(
        &mut self,
        ctx: &mut Ctx,
        i: usize,
        (ax, r0, r1): (usize, i64, i64),
        name: String,
    ) -> Result<std::result::Result<(), Fail>> {
        let eb = ctx.gpu.mode.elem_bytes();
        let x = ctx.dev(i)?;
        let mut shape = x.shape.clone();
        if ax >= shape.len() {
            return Ok(Err(Fail::Other(format!("input {i} has no axis {ax}"))));
        }
        let full_len = shape[ax];
        shape[ax] = (r1 - r0) as usize;
        let n: usize = shape.iter().product();
        if n as u64 * eb > ctx.gpu.max_binding() {
            drop_staged(ctx, &self.staged);
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
            drop_staged(ctx, &self.staged);
            return Ok(Err(Fail::Other(format!(
                "a slab of input {i} is not 4-byte aligned for copying (f16 with odd extents)"
            ))));
        }
        debug_assert!(r1 as usize <= full_len);
        ctx.store.dev.insert(name.clone(), v);
        self.adopt(i, name);
        Ok(Ok(()))
    }

    /// Makes the slab's node read input `i` from the staged value `name`.
    fn adopt(&mut self, i: usize, name: String) {
        self.sub.input[i] = name.clone();
        self.staged.push(name);
    }

    /// Runs the slab's node on the staged inputs (cut again, once, when a slab is still beyond the limit) and
    /// drops what was staged.
    fn run(mut self, ctx: &mut Ctx, f: OpFn) -> Result<std::result::Result<Vec<DevVal>, Fail>> {
        let depth = self.depth;
        for (j, o) in self.sub.output.iter_mut().enumerate() {
            if !o.is_empty() {
                *o = format!("{PREFIX}{depth}/{}/out{j}", ctx.node.name);
            }
        }
        let enc = std::mem::replace(&mut ctx.enc, ctx.gpu.encoder("slab"));
        let mut inner = Ctx {
            gpu: ctx.gpu,
            node: &self.sub,
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
        drop_staged(ctx, &self.staged);
        match r? {
            _ if too_big => Ok(Err(Fail::TooBig)),
            Out::Dev(v) => Ok(Ok(v)),
            Out::Host(why) => Ok(Err(Fail::Other(why))),
        }
    }
}

/// Drops the values staged for a slab from the store.
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
