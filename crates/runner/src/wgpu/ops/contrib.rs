//! ONNX Runtime's contrib ops (domain `com.microsoft`) that its transformer optimizer writes, composed of phantom's
//! shaders as ONNX Runtime's CPU kernels compute them: `BiasGelu` and `FastGelu` (the bias added, then exact or tanh
//! GELU, `elementwise/unary.wgsl`), and `SkipLayerNormalization` / `SkipSimplifiedLayerNormalization` (input + skip +
//! bias, then layer or RMS normalization over the last axis, `reduce/norm.wgsl`; the sum is output 3 when asked).
//! Their mean and inverse-standard-deviation outputs, which no optimizer asks for, run on the host.

use super::elementwise::{apply_binary, apply_unary};
use super::{finish, host, Params, Row};
use crate::error::Result;
use crate::wgpu::ctx::{Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[
    Row::ms("BiasGelu", gelu),
    Row::ms("FastGelu", gelu),
    Row::ms("SkipLayerNormalization", skip_norm),
    Row::ms("SkipSimplifiedLayerNormalization", skip_norm),
];

/// The unary shader's exact GELU, and its tanh approximation.
const GELU: u32 = 12;
const GELU_TANH: u32 = 13;

/// ONNX Runtime's default epsilon of the skip normalizations.
const SKIP_EPSILON: f32 = 1e-12;

/// `x + bias` (when there is a bias), or `None` when the two do not broadcast to `x`'s shape.
fn plus(ctx: &mut Ctx, x: DevVal, bias: Option<DevVal>) -> Result<Option<DevVal>> {
    let Some(b) = bias else {
        return Ok(Some(x));
    };
    Ok(apply_binary(ctx, &x, &b, 0)?.filter(|s| s.shape == x.shape))
}

/// BiasGelu (exact GELU of A + B) and FastGelu (tanh GELU of X, plus the optional bias).
fn gelu(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let x = ctx.dev(0)?;
    let bias = match ctx.has(1) {
        true => Some(ctx.dev(1)?),
        false => None,
    };
    let Some(sum) = plus(ctx, x, bias)? else {
        return host(format!(
            "{op} with a bias that does not broadcast to its input"
        ));
    };
    let code = if op == "FastGelu" { GELU_TANH } else { GELU };
    let y = apply_unary(ctx, &sum, code, 0.0, 0.0)?;
    Ok(Out::Dev(vec![finish(ctx, y)?]))
}

/// SkipLayerNormalization (input, skip, gamma, beta, bias) and SkipSimplifiedLayerNormalization (input, skip,
/// gamma, bias): the normalized sum, and the sum itself as output 3.
fn skip_norm(ctx: &mut Ctx) -> Result<Out> {
    let op = ctx.node.op_type.clone();
    let rms = op == "SkipSimplifiedLayerNormalization";
    let outputs = ctx.node.output.clone();
    if outputs.iter().skip(1).take(2).any(|o| !o.is_empty()) {
        return host(format!(
            "{op} with its mean or inverse standard deviation outputs"
        ));
    }
    let (x, skip) = (ctx.dev(0)?, ctx.dev(1)?);
    let Some(h) = x.shape.last().copied().filter(|&h| h > 0) else {
        return host(format!("{op} of an empty or scalar input"));
    };
    let Some(sum) = plus(ctx, x, Some(skip))? else {
        return host(format!(
            "{op} with a skip that does not broadcast to its input"
        ));
    };
    let bias_slot = if rms { 3 } else { 4 };
    let bias = match ctx.has(bias_slot) {
        true => Some(ctx.dev(bias_slot)?),
        false => None,
    };
    let Some(sum) = plus(ctx, sum, bias)? else {
        return host(format!("{op} with a bias that is not one per channel"));
    };
    let gamma = ctx.dev(2)?;
    let beta = match ctx.has(3) && !rms {
        true => Some(ctx.dev(3)?),
        false => None,
    };
    if gamma.len() != h || beta.as_ref().is_some_and(|b| b.len() != h) {
        return host(format!(
            "{op} with a gamma or beta that is not one per channel"
        ));
    }
    let rows = sum.len() / h;
    let y = ctx.output(sum.shape.clone(), ctx.out_dtype());
    let mut p = Params::new();
    p.set(0, rows as u32)
        .set(1, h as u32)
        .set_f(2, ctx.attr_f("epsilon", SKIP_EPSILON))
        .set(3, beta.is_some() as u32)
        .set(5, rms as u32);
    if rows > 0 {
        let bb = beta.as_ref().map(|b| &*b.buf);
        let ins = [Some(&*sum.buf), Some(&*gamma.buf), bb];
        ctx.run_rows("reduce/norm", "layernorm", &p.0, &ins, &y, rows)?;
    }
    let y = finish(ctx, y)?;
    // Outputs 1 and 2 are not asked for (above): the sum stands in their place, unread.
    let sum = finish(ctx, sum)?;
    let mut outs = vec![y, sum.clone(), sum.clone(), sum];
    outs.truncate(outputs.len().max(1));
    Ok(Out::Dev(outs))
}
