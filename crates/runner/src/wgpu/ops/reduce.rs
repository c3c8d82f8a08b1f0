//! Reductions (`reduce/reduce.wgsl`: any axes, through strides), Softmax/LogSoftmax (`reduce/softmax.wgsl`),
//! LayerNormalization, RMSNormalization, ONNX Runtime's SimplifiedLayerNormalization and InstanceNormalization
//! (`reduce/norm.wgsl`), and the global pools as
//! reductions; CumSum, CumProd, Hardmax and LpNormalization read whole lanes along one axis (`reduce/lane.wgsl`).

use super::{axis, contiguous, done, host, Params, Row};
use crate::error::Result;
use crate::wgpu::ctx::{Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("ReduceMean", reduce),
    Row::new("ReduceSum", reduce),
    Row::new("ReduceMax", reduce),
    Row::new("ReduceMin", reduce),
    Row::new("ReduceSumSquare", reduce),
    Row::new("ReduceL2", reduce),
    Row::new("ReduceL1", reduce),
    Row::new("ReduceLogSum", reduce),
    Row::new("ReduceLogSumExp", reduce),
    Row::new("ReduceProd", reduce),
    Row::new("GlobalAveragePool", reduce),
    Row::new("GlobalMaxPool", reduce),
    Row::new("Softmax", softmax),
    Row::new("LogSoftmax", softmax),
    Row::new("LayerNormalization", layernorm),
    Row::new("RMSNormalization", layernorm),
    Row::new("SimplifiedLayerNormalization", layernorm),
    Row::new("InstanceNormalization", instancenorm),
    Row::new("CumSum", lane),
    Row::new("CumProd", lane),
    Row::new("Hardmax", lane),
    Row::new("LpNormalization", lane),
];

fn reduce_code(op: &str) -> Option<u32> {
    Some(match op {
        "ReduceSum" => 0,
        "ReduceMean" | "GlobalAveragePool" => 1,
        "ReduceMax" | "GlobalMaxPool" => 2,
        "ReduceMin" => 3,
        "ReduceSumSquare" => 4,
        "ReduceL2" => 5,
        "ReduceL1" => 6,
        "ReduceLogSum" => 7,
        "ReduceLogSumExp" => 8,
        "ReduceProd" => 9,
        _ => return None,
    })
}

fn reduce(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let code = reduce_code(&op).expect("found");
    let x = ctx.dev(0)?;
    let rank = x.shape.len();
    let global = op.starts_with("Global");
    // Axes moved from an attribute to an input at opset 13 (ReduceSum) or 18 (the others).
    let from_input = ctx.opset >= if op == "ReduceSum" { 13 } else { 18 };
    let axes: Option<Vec<i64>> = match (global, from_input) {
        (true, _) => Some((2..rank as i64).collect()),
        (false, true) if ctx.has(1) => ctx.ints(1),
        (false, true) => Some(vec![]),
        (false, false) => Some(ctx.attr_ints("axes").unwrap_or_default()),
    };
    let Some(axes) = axes else {
        return host(format!("{op}: axes not known on the host"));
    };
    let keep = global || ctx.attr_i("keepdims", 1) != 0;
    let mut red: Vec<usize> = match axes.iter().map(|&a| axis(a, rank)).collect() {
        Some(v) => v,
        None => return host(format!("{op}: axis out of range")),
    };
    if red.is_empty() {
        if ctx.attr_i("noop_with_empty_axes", 0) != 0 {
            return Ok(Out::Dev(vec![x]));
        }
        red = (0..rank).collect();
    }
    red.sort();
    red.dedup();
    let kept: Vec<usize> = (0..rank).filter(|d| !red.contains(d)).collect();
    if kept.len() > 6 || red.len() > 6 {
        return host(format!("{op} over more than six axes"));
    }
    let own = contiguous(&x.shape);
    let kshape: Vec<usize> = kept.iter().map(|&d| x.shape[d]).collect();
    let rshape: Vec<usize> = red.iter().map(|&d| x.shape[d]).collect();
    let r: usize = rshape.iter().product();
    let shape: Vec<usize> = match keep {
        true => (0..rank)
            .map(|d| if red.contains(&d) { 1 } else { x.shape[d] })
            .collect(),
        false => kshape.clone(),
    };
    let out = ctx.output(shape, ctx.out_dtype());
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, r as u32)
        .set(2, kept.len() as u32)
        .set(3, red.len() as u32)
        .set(4, code)
        .dims(5, &kshape)
        .strides(11, &kept.iter().map(|&d| own[d]).collect::<Vec<_>>())
        .dims(17, &rshape)
        .strides(23, &red.iter().map(|&d| own[d]).collect::<Vec<_>>());
    if n > 0 {
        ctx.run_rows("reduce/reduce", "main", &p.0, &[Some(&x.buf)], &out, n)?;
    }
    done(ctx, out)
}

fn softmax(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    let rank = x.shape.len();
    let default = if ctx.opset >= 13 { -1 } else { 1 };
    let Some(a) = axis(ctx.attr_i("axis", default), rank) else {
        return host("Softmax axis out of range");
    };
    // Before opset 13 the input is coerced to 2-D at `axis`; from 13 on, one axis.
    let (outer, r, inner): (usize, usize, usize) = match ctx.opset >= 13 {
        true => (
            x.shape[..a].iter().product(),
            x.shape[a],
            x.shape[a + 1..].iter().product(),
        ),
        false => (
            x.shape[..a].iter().product(),
            x.shape[a..].iter().product(),
            1,
        ),
    };
    let op = (ctx.node.op_type == "LogSoftmax") as u32;
    let out = softmax_rows(ctx, &x, (outer, r, inner), op)?;
    done(ctx, out)
}

/// Softmax (`op` 0), LogSoftmax (1) or attention's softmax (2: rows of −∞ only give zeros) of `x` viewed as
/// (outer, r, inner), along r.
pub(super) fn softmax_rows(
    ctx: &mut Ctx,
    x: &DevVal,
    (outer, r, inner): (usize, usize, usize),
    op: u32,
) -> Result<DevVal> {
    let out = ctx.output(x.shape.clone(), ctx.out_dtype());
    let n = outer * inner;
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, r as u32)
        .set(2, inner.max(1) as u32)
        .set(3, op);
    if n > 0 && r > 0 {
        ctx.run_rows("reduce/softmax", "main", &p.0, &[Some(&x.buf)], &out, n)?;
    }
    Ok(out)
}

/// LayerNormalization, and RMSNormalization and ONNX Runtime's SimplifiedLayerNormalization (the same without
/// centering, no bias; the latter's one optional output is the inverse standard deviation).
fn layernorm(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let simplified = op == "SimplifiedLayerNormalization";
    let rms = op == "RMSNormalization" || simplified;
    let x = ctx.dev(0)?;
    let rank = x.shape.len();
    let Some(a) = axis(ctx.attr_i("axis", -1), rank) else {
        return host(format!("{op} axis out of range"));
    };
    let r: usize = x.shape[a..].iter().product();
    let rows: usize = x.shape[..a].iter().product();
    let s = ctx.dev(1)?;
    let b = match ctx.has(2) && !rms {
        true => Some(ctx.dev(2)?),
        false => None,
    };
    if s.len() != r || b.as_ref().is_some_and(|b| b.len() != r) {
        return host(format!("{op} with broadcast scale or bias"));
    }
    let out = ctx.output(x.shape.clone(), ctx.out_dtype());
    let mut p = Params::new();
    p.set(0, rows as u32)
        .set(1, r as u32)
        .set_f(2, ctx.attr_f("epsilon", 1e-5))
        .set(3, b.is_some() as u32)
        .set(5, rms as u32);
    if rows > 0 && r > 0 {
        let bb = b.as_ref().map(|b| &*b.buf);
        ctx.run_rows(
            "reduce/norm",
            "layernorm",
            &p.0,
            &[Some(&x.buf), Some(&s.buf), bb],
            &out,
            rows,
        )?;
    }
    let mut outs = vec![super::finish(ctx, out)?];
    // The optional Mean and InvStdDev outputs: shape X.shape[..axis] followed by ones.
    let stats_shape: Vec<usize> = (0..rank)
        .map(|d| if d < a { x.shape[d] } else { 1 })
        .collect();
    for (k, name) in ctx.node.output.clone().iter().enumerate().skip(1) {
        let v = ctx.output(stats_shape.clone(), ctx.out_dtype());
        if !name.is_empty() && rows > 0 && r > 0 {
            p.set(4, k as u32 - 1 + simplified as u32);
            let bb = b.as_ref().map(|b| &*b.buf);
            ctx.run_rows(
                "reduce/norm",
                "layernorm_stats",
                &p.0,
                &[Some(&x.buf), Some(&s.buf), bb],
                &v,
                rows,
            )?;
        }
        outs.push(super::finish(ctx, v)?);
    }
    Ok(Out::Dev(outs))
}

fn instancenorm(ctx: &mut Ctx) -> Result<Out> {
    let x = ctx.dev(0)?;
    if x.shape.len() < 3 {
        return host("InstanceNormalization of a tensor below rank 3");
    }
    let c = x.shape[1];
    let rows = x.shape[0] * c;
    let r: usize = x.shape[2..].iter().product();
    let s = ctx.dev(1)?;
    let b = ctx.dev(2)?;
    let out = ctx.output(x.shape.clone(), ctx.out_dtype());
    let mut p = Params::new();
    p.set(0, rows as u32)
        .set(1, r as u32)
        .set_f(2, ctx.attr_f("epsilon", 1e-5))
        .set(3, c as u32);
    if rows > 0 && r > 0 {
        ctx.run_rows(
            "reduce/norm",
            "instancenorm",
            &p.0,
            &[Some(&x.buf), Some(&s.buf), Some(&b.buf)],
            &out,
            rows,
        )?;
    }
    done(ctx, out)
}

/// The longest lane one invocation walks (lavapipe stops loops near 65,535 iterations).
const MAX_LANE: usize = 60_000;

/// CumSum and CumProd (the axis from input 1), Hardmax (before opset 13 over the input coerced to 2-D at `axis`),
/// LpNormalization (p 1 or 2).
fn lane(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let x = ctx.dev(0)?;
    let rank = x.shape.len();
    if rank == 0 {
        return host(format!("{op} of a scalar"));
    }
    let hardmax = op == "Hardmax";
    let p_norm = ctx.attr_i("p", 2);
    if op == "LpNormalization" && !matches!(p_norm, 1 | 2) {
        return host(format!("LpNormalization with p = {p_norm}"));
    }
    let a = match op.as_str() {
        "Hardmax" => ctx.attr_i("axis", if ctx.opset >= 13 { -1 } else { 1 }),
        "LpNormalization" => ctx.attr_i("axis", -1),
        _ => match ctx.ints(1).and_then(|v| v.first().copied()) {
            Some(a) => a,
            None => return host(format!("{op}: axis not known on the host")),
        },
    };
    let Some(a) = axis(a, rank) else {
        return host(format!("{op} axis out of range"));
    };
    let (len, inner): (usize, usize) = match hardmax && ctx.opset < 13 {
        true => (x.shape[a..].iter().product(), 1),
        false => (x.shape[a], x.shape[a + 1..].iter().product()),
    };
    if len > MAX_LANE {
        return host(format!("{op} along {len} elements"));
    }
    let out = ctx.output(x.shape.clone(), ctx.out_dtype());
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32)
        .set(1, len as u32)
        .set(2, inner.max(1) as u32)
        .set(3, ctx.attr_i("exclusive", 0) as u32)
        .set(4, ctx.attr_i("reverse", 0) as u32)
        .set(5, (op == "CumProd") as u32)
        .set(6, p_norm as u32);
    let entry = match op.as_str() {
        "Hardmax" => "hardmax",
        "LpNormalization" => "lpnorm",
        _ => "cumulative",
    };
    if n > 0 {
        ctx.run("reduce/lane", entry, &p.0, &[Some(&x.buf)], &out, n)?;
    }
    done(ctx, out)
}
