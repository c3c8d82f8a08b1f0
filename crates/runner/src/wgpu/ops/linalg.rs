//! Matrix products (`MatMul`, `Gemm`: `linalg/matmul.wgsl`), convolutions over one or two spatial axes
//! (`conv/conv.wgsl`), and the spatial geometry convolutions and pools share.

use super::{bcast_strides, broadcast, done, host, Params, Row};
use crate::error::Result;
use crate::wgpu::ctx::{Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("MatMul", matmul),
    Row::new("Gemm", gemm),
    Row::new("Conv", conv),
    Row::new("ConvTranspose", conv),
];

/// One matrix product: A is read at (m, k) = a_rs·m + a_cs·k, B at (k, n) = b_rs·k + b_cs·n, the batch
/// `batch` walked with strides `a_batch`/`b_batch`; C = alpha·A·B (+ beta·bias).
pub(super) struct Mm<'v> {
    pub a: &'v DevVal,
    pub b: &'v DevVal,
    pub c: Option<(&'v DevVal, i64, i64)>,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: Vec<usize>,
    pub a_batch: Vec<i64>,
    pub b_batch: Vec<i64>,
    pub a_rc: (i64, i64),
    pub b_rc: (i64, i64),
    pub alpha: f32,
    pub beta: f32,
}

fn run_mm(ctx: &mut Ctx, mm: Mm, out_shape: Vec<usize>) -> Result<Out> {
    match product(ctx, mm, out_shape)? {
        Some(out) => done(ctx, out),
        None => host("MatMul beyond the tiled shader's batch or size limits"),
    }
}

/// The product `mm` as a fresh value of `out_shape` (contiguous batch, m, n); `None` beyond the tiled shader's
/// batch or size limits.
pub(super) fn product(ctx: &mut Ctx, mm: Mm, out_shape: Vec<usize>) -> Result<Option<DevVal>> {
    let nb: usize = mm.batch.iter().product();
    if mm.batch.len() > 6 || nb > 65535 || mm.m.div_ceil(64) > 65535 || mm.n.div_ceil(64) > 65535 {
        return Ok(None);
    }
    let out = ctx.output(out_shape, ctx.out_dtype());
    let mut p = Params::new();
    p.set(0, mm.m as u32)
        .set(1, mm.n as u32)
        .set(2, mm.k as u32)
        .set(3, mm.batch.len() as u32)
        .set_i(4, mm.a_rc.0)
        .set_i(5, mm.a_rc.1)
        .set_i(6, mm.b_rc.0)
        .set_i(7, mm.b_rc.1)
        .dims(8, &mm.batch)
        .strides(14, &mm.a_batch)
        .strides(20, &mm.b_batch)
        .set(26, mm.c.is_some() as u32)
        .set_f(27, mm.alpha)
        .set_f(28, mm.beta);
    if let Some((_, rs, cs)) = mm.c {
        p.set_i(29, rs).set_i(30, cs);
    }
    if !out.is_empty() {
        let groups = [
            mm.n.div_ceil(64) as u32,
            mm.m.div_ceil(64) as u32,
            nb.max(1) as u32,
        ];
        let c = mm.c.map(|c| &*c.0.buf);
        ctx.run_groups(
            "linalg/matmul",
            "main",
            &p.0,
            &[Some(&mm.a.buf), Some(&mm.b.buf), c],
            &out,
            groups,
        )?;
    }
    Ok(Some(out))
}

fn matmul(ctx: &mut Ctx) -> Result<Out> {
    let a = ctx.dev(0)?;
    let b = ctx.dev(1)?;
    match matmul_of(ctx, &a, &b)? {
        Ok(out) => done(ctx, out),
        Err(why) => host(why),
    }
}

/// NumPy's matmul of `a` and `b` (1-D operands promoted and their axis dropped), or why it needs the host.
pub(super) fn matmul_of(
    ctx: &mut Ctx,
    a: &DevVal,
    b: &DevVal,
) -> Result<std::result::Result<DevVal, String>> {
    let no = |why: &str| Ok(Err(why.to_string()));
    if a.shape.is_empty() || b.shape.is_empty() {
        return no("MatMul of scalars");
    }
    let sa = if a.shape.len() == 1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.clone()
    };
    let sb = if b.shape.len() == 1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.clone()
    };
    let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let (k2, n) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    if k != k2 {
        return no("MatMul: inner dimensions differ");
    }
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let Some(batch) = broadcast(&[ba, bb]) else {
        return no("MatMul: batch dims that do not broadcast");
    };
    let mut out_shape = batch.clone();
    if a.shape.len() > 1 {
        out_shape.push(m);
    }
    if b.shape.len() > 1 {
        out_shape.push(n);
    }
    let scale = |s: Vec<i64>, by: usize| s.iter().map(|v| v * by as i64).collect::<Vec<_>>();
    let mm = Mm {
        a,
        b,
        c: None,
        m,
        n,
        k,
        a_batch: scale(bcast_strides(ba, &batch), m * k),
        b_batch: scale(bcast_strides(bb, &batch), k * n),
        batch,
        a_rc: (k as i64, 1),
        b_rc: (n as i64, 1),
        alpha: 1.0,
        beta: 0.0,
    };
    Ok(product(ctx, mm, out_shape)?
        .ok_or_else(|| "MatMul beyond the tiled shader's batch or size limits".into()))
}

fn gemm(ctx: &mut Ctx) -> Result<Out> {
    let a = ctx.dev(0)?;
    let b = ctx.dev(1)?;
    if a.shape.len() != 2 || b.shape.len() != 2 {
        return host("Gemm needs 2-D operands");
    }
    let ta = ctx.attr_i("transA", 0) != 0;
    let tb = ctx.attr_i("transB", 0) != 0;
    let (m, k) = match ta {
        true => (a.shape[1], a.shape[0]),
        false => (a.shape[0], a.shape[1]),
    };
    let n = if tb { b.shape[0] } else { b.shape[1] };
    let c = match ctx.has(2) {
        true => Some(ctx.dev(2)?),
        false => None,
    };
    let c_strides = match &c {
        None => None,
        Some(c) => {
            let s = &c.shape;
            let (rows, cols) = match s.len() {
                0 => (1, 1),
                1 => (1, s[0]),
                2 => (s[0], s[1]),
                _ => return host("Gemm: C of rank > 2"),
            };
            if (rows != 1 && rows != m) || (cols != 1 && cols != n) {
                return host("Gemm: C does not broadcast to M x N");
            }
            Some((
                if rows > 1 { cols as i64 } else { 0 },
                if cols > 1 { 1 } else { 0 },
            ))
        }
    };
    let mm = Mm {
        a: &a,
        b: &b,
        c: c.as_ref().zip(c_strides).map(|(c, (r, q))| (c, r, q)),
        m,
        n,
        k,
        batch: vec![],
        a_batch: vec![],
        b_batch: vec![],
        a_rc: if ta { (1, m as i64) } else { (k as i64, 1) },
        b_rc: if tb { (1, k as i64) } else { (n as i64, 1) },
        alpha: ctx.attr_f("alpha", 1.0),
        beta: ctx.attr_f("beta", 1.0),
    };
    run_mm(ctx, mm, vec![m, n])
}

/// Spatial geometry of a conv or pool over one or two axes, as 2-D (a 1-D op runs with H = 1).
pub(super) struct Geo {
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) k: [usize; 2],
    pub(super) s: [usize; 2],
    pub(super) d: [usize; 2],
    pub(super) begin: [usize; 2],
    pub(super) end: [usize; 2],
    pub(super) out: [usize; 2],
}

/// The geometry of a conv or pool along each spatial axis, any number of axes.
pub(super) struct Axes {
    pub(super) k: Vec<usize>,
    pub(super) s: Vec<usize>,
    pub(super) d: Vec<usize>,
    pub(super) begin: Vec<usize>,
    pub(super) end: Vec<usize>,
    pub(super) out: Vec<usize>,
}

/// One or two spatial axes as 2-D. With `transpose`, the output extent is that of a transposed convolution:
/// s·(in − 1) + output_padding + extent − pads.
pub(super) fn geometry(
    ctx: &Ctx,
    spatial: &[usize],
    kernel: &[usize],
    ceil: bool,
    transpose: bool,
) -> Option<Geo> {
    if spatial.len() > 2 {
        return None;
    }
    let a = axes(ctx, spatial, kernel, ceil, transpose)?;
    let two = |v: &[usize], def: usize| -> [usize; 2] {
        match v.len() {
            1 => [def, v[0]],
            _ => [v[0], v[1]],
        }
    };
    Some(Geo {
        h: two(spatial, 1)[0],
        w: two(spatial, 1)[1],
        k: two(kernel, 1),
        s: two(&a.s, 1),
        d: two(&a.d, 1),
        begin: two(&a.begin, 0),
        end: two(&a.end, 0),
        out: two(&a.out, 1),
    })
}

/// The per-axis geometry from the node's strides, dilations, pads, auto_pad and ceil mode.
pub(super) fn axes(
    ctx: &Ctx,
    spatial: &[usize],
    kernel: &[usize],
    ceil: bool,
    transpose: bool,
) -> Option<Axes> {
    let r = spatial.len();
    if r == 0 || kernel.len() != r || kernel.contains(&0) {
        return None;
    }
    let get = |name: &str, def: usize| -> Vec<usize> {
        ctx.attr_ints(name)
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().map(|&x| x.max(0) as usize).collect())
            .unwrap_or_else(|| vec![def; r])
    };
    let s = get("strides", 1);
    let d = get("dilations", 1);
    let pads = ctx
        .attr_ints("pads")
        .map(|v| v.iter().map(|&x| x.max(0) as usize).collect::<Vec<_>>())
        .unwrap_or_else(|| vec![0; 2 * r]);
    if s.len() != r || d.len() != r || pads.len() != 2 * r || s.contains(&0) {
        return None;
    }
    let auto = ctx.attr_s("auto_pad", "NOTSET");
    let mut begin = vec![0; r];
    let mut end = vec![0; r];
    let mut out = vec![0; r];
    for i in 0..r {
        let ext = (kernel[i] - 1) * d[i] + 1;
        match auto.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => {
                out[i] = spatial[i].div_ceil(s[i]);
                let total = ((out[i] - 1) * s[i] + ext).saturating_sub(spatial[i]);
                let small = total / 2;
                (begin[i], end[i]) = match auto == "SAME_UPPER" {
                    true => (small, total - small),
                    false => (total - small, small),
                };
            }
            "VALID" => {
                out[i] = (spatial[i] + 1).checked_sub(ext)?.div_ceil(s[i]);
            }
            _ if transpose => {
                begin[i] = pads[i];
                end[i] = pads[i + r];
                let extra = ctx
                    .attr_ints("output_padding")
                    .and_then(|v| v.get(i).copied())
                    .unwrap_or(0)
                    .max(0) as usize;
                out[i] = (s[i] * (spatial[i].max(1) - 1) + extra + ext)
                    .checked_sub(begin[i] + end[i])?;
            }
            _ => {
                begin[i] = pads[i];
                end[i] = pads[i + r];
                let span = (spatial[i] + begin[i] + end[i]).checked_sub(ext)?;
                out[i] = match ceil {
                    true => {
                        let mut o = span.div_ceil(s[i]) + 1;
                        if (o - 1) * s[i] >= spatial[i] + begin[i] {
                            o -= 1;
                        }
                        o
                    }
                    false => span / s[i] + 1,
                };
            }
        }
    }
    Some(Axes {
        k: kernel.to_vec(),
        s,
        d,
        begin,
        end,
        out,
    })
}

fn conv(ctx: &mut Ctx) -> Result<Out> {
    let transpose = ctx.node.op_type == "ConvTranspose";
    let x = ctx.dev(0)?;
    let w = ctx.dev(1)?;
    let bias = match ctx.has(2) {
        true => Some(ctx.dev(2)?),
        false => None,
    };
    let (xs, ws) = (&x.shape, &w.shape);
    if xs.len() < 3 || xs.len() > 4 || ws.len() != xs.len() {
        return host(format!(
            "{} over {} spatial axes",
            ctx.node.op_type,
            xs.len().saturating_sub(2)
        ));
    }
    let g = ctx.attr_i("group", 1).max(1) as usize;
    let kernel = &ws[2..];
    let cout = if transpose { ws[1] * g } else { ws[0] };
    if transpose
        && (ctx.attr_ints("output_shape").is_some() || ctx.attr_s("auto_pad", "NOTSET") != "NOTSET")
    {
        return host("ConvTranspose with output_shape or auto_pad");
    }
    let geo = geometry(ctx, &xs[2..], kernel, false, transpose);
    let Some(geo) = geo else {
        return host(format!("{}: unusual geometry", ctx.node.op_type));
    };
    let cin = xs[1];
    let mut shape = vec![xs[0], cout];
    shape.extend(if xs.len() == 3 {
        vec![geo.out[1]]
    } else {
        geo.out.to_vec()
    });
    let out = ctx.output(shape, ctx.out_dtype());
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .dims(
            1,
            &[
                cin, geo.h, geo.w, cout, geo.out[0], geo.out[1], geo.k[0], geo.k[1],
            ],
        )
        .dims(
            9,
            &[
                geo.s[0],
                geo.s[1],
                geo.begin[0],
                geo.begin[1],
                geo.d[0],
                geo.d[1],
                g,
            ],
        )
        .set(16, bias.is_some() as u32);
    p.set(17, xs[0] as u32);
    let og = cout / g;
    let cols = xs[0] * geo.out[0] * geo.out[1];
    let b = bias.as_ref().map(|b| &*b.buf);
    let ins = [Some(&*x.buf), Some(&*w.buf), b];
    let tiled = gemm_pays(&ctx.gpu.adapter.device_type);
    if n > 0 && !transpose && tiled && og >= 16 && cols.div_ceil(64) <= 65535 && g <= 65535 {
        let groups = [cols.div_ceil(64) as u32, og.div_ceil(64) as u32, g as u32];
        ctx.run_groups("conv/conv", "conv_gemm", &p.0, &ins, &out, groups)?;
    } else if n > 0 {
        let entry = if transpose { "conv_transpose" } else { "conv" };
        ctx.run("conv/conv", entry, &p.0, &ins, &out, n)?;
    }
    done(ctx, out)
}

/// Whether the implicit-GEMM convolution beats the direct one on this kind of device. Measured
/// (`benches/wgpu_throughput.rs`, 3×3 convolutions on 56×56): on lavapipe, a CPU, the tiled GEMM runs 3.2× the
/// direct shader at 64 channels; on an NVIDIA H200 the direct shader runs 4.7–8.3× the GEMM in f32 and 6.0–11.7× in
/// f16 at 64 and 256 channels (0.9–1.6 against 0.08–0.33 TFLOP/s).
fn gemm_pays(device_type: &str) -> bool {
    device_type == "cpu"
}
