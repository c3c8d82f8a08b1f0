//! ONNX's losses on the device (`reduce/loss.wgsl`): NegativeLogLikelihoodLoss, and SoftmaxCrossEntropyLoss as
//! LogSoftmax over the class axis (`reduce/softmax.wgsl`, also its optional `log_prob` output) followed by the
//! same NLL. Reductions `none`, `sum` and `mean` (the sum over the weights of the targets not ignored), with
//! optional per-class weights and `ignore_index`, as the reference's `loss` kernel defines them.

use super::reduce::softmax_rows;
use super::{finish, host, Params, Row};
use crate::error::Result;
use crate::wgpu::ctx::{Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[
    Row::new("NegativeLogLikelihoodLoss", loss),
    Row::new("SoftmaxCrossEntropyLoss", loss),
];

/// Positions one workgroup reduces (each of its 256 invocations walks fewer than lavapipe's loop limit).
const MAX_REDUCED: usize = 256 * 60_000;

fn loss(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let (Some(xs), Some(ts)) = (ctx.shape(0), ctx.shape(1)) else {
        return host(format!("{op}: missing input"));
    };
    if xs.len() < 2 || ts.len() != xs.len() - 1 || ts[0] != xs[0] || ts[1..] != xs[2..] {
        return host(format!(
            "{op}: scores {xs:?} and targets {ts:?} that do not match"
        ));
    }
    if ctx.has(2) && !ctx.is_float(2) {
        return host(format!("{op}: integer weights"));
    }
    let (n, c) = (xs[0], xs[1]);
    let d: usize = xs[2..].iter().product();
    let positions = n * d;
    let reduction = ctx.attr_s("reduction", "mean");
    if !matches!(reduction.as_str(), "none" | "sum" | "mean") || positions > MAX_REDUCED {
        return host(format!(
            "{op}: reduction {reduction} over {positions} positions"
        ));
    }
    let mut x = ctx.dev(0)?;
    let sce = op == "SoftmaxCrossEntropyLoss";
    if sce {
        x = softmax_rows(ctx, &x, (n, c, d), 1)?;
    }
    let tg = ctx.dev_words(1)?;
    let w = match ctx.has(2) {
        true => Some(ctx.dev(2)?),
        false => None,
    };
    let ignore = ctx.node.attribute.iter().find(|a| a.name == "ignore_index");
    let mut p = Params::new();
    p.set(0, positions as u32)
        .set(1, c as u32)
        .set(2, d.max(1) as u32)
        .set(3, w.is_some() as u32)
        .set_i(4, ignore.map_or(0, |a| a.i))
        .set(5, ignore.is_some() as u32)
        .set(6, (reduction == "mean") as u32);
    let wb = w.as_ref().map_or(&*x.buf, |w| &*w.buf);
    let ins = [Some(&*x.buf), Some(&*tg), Some(wb)];
    let out = match reduction.as_str() {
        "none" => {
            let out = ctx.output(ts.clone(), ctx.out_dtype());
            if positions > 0 {
                ctx.run("reduce/loss", "nll", &p.0, &ins, &out, positions)?;
            }
            out
        }
        _ => {
            let out = ctx.output(vec![], ctx.out_dtype());
            ctx.run_groups("reduce/loss", "nll_reduce", &p.0, &ins, &out, [1, 1, 1])?;
            out
        }
    };
    let mut outs: Vec<DevVal> = vec![finish(ctx, out)?];
    if sce {
        outs.push(finish(ctx, x)?);
    }
    Ok(Out::Dev(outs))
}
