//! QLinearMatMul as ONNX Runtime's CPU kernel computes it: the integer product of the operands' offsets from their
//! zero points (`linalg/qoffset.wgsl`, then the tiled matmul: exact in f32 storage while K · 255² < 2^24), then
//! requantized with one multiplier a_scale · b_scale / y_scale (`linalg/qrequant.wgsl`), held as one word per
//! element and read back as int8 or uint8. Per-tensor scales and zero points; per-row or per-column ones run on the
//! host.

use super::linalg::matmul_of;
use super::{host, Params, Row};
use crate::error::Result;
use crate::tensor::DType;
use crate::wgpu::ctx::{Ctx, DevVal, Out};

pub(super) const TABLE: &[Row] = &[Row::new("QLinearMatMul", qlinear_matmul)];

/// The longest inner dimension whose integer product f32 holds exactly (255² · K < 2^24).
const MAX_EXACT_K: usize = 258;

/// The one value of input `i`, as f64, where it is known on the host and holds one element.
fn scalar(ctx: &Ctx, i: usize) -> Option<f64> {
    ctx.floats(i).filter(|v| v.len() == 1).map(|v| v[0])
}

fn qlinear_matmul(ctx: &mut Ctx) -> Result<Out> {
    let (sa, za, sb, zb, sy, zy) = (
        scalar(ctx, 1),
        scalar(ctx, 2),
        scalar(ctx, 4),
        scalar(ctx, 5),
        scalar(ctx, 6),
        scalar(ctx, 7),
    );
    let (Some(sa), Some(za), Some(sb), Some(zb), Some(sy), Some(zy)) = (sa, za, sb, zb, sy, zy)
    else {
        return host("QLinearMatMul with per-row or per-column scales or zero points");
    };
    let (lo, hi) = match ctx.dtype(7) {
        Some(DType::U8) => (0, 255),
        Some(DType::I8) => (-128, 127),
        _ => return host("QLinearMatMul of a type other than int8 and uint8"),
    };
    let k = ctx.shape(0).and_then(|s| s.last().copied()).unwrap_or(0);
    if !ctx.gpu.mode.is_f16() && k > MAX_EXACT_K {
        return host(format!(
            "QLinearMatMul over K = {k}: the integer product is beyond f32's exact range"
        ));
    }
    let a = offsets(ctx, 0, za)?;
    let b = offsets(ctx, 3, zb)?;
    let acc = match matmul_of(ctx, &a, &b)? {
        Ok(v) => v,
        Err(why) => return host(why),
    };
    let dtype = ctx.dtype(7).expect("checked");
    let out = ctx.output_words(acc.shape.clone(), dtype);
    let n = out.len();
    let multiplier = (sa as f32 * sb as f32) / sy as f32;
    let mut p = Params::new();
    p.set(0, n as u32)
        .set_f(1, multiplier)
        .set_i(2, zy as i64)
        .set_i(3, lo)
        .set_i(4, hi);
    if n > 0 {
        ctx.run("linalg/qrequant", "main", &p.0, &[Some(&acc.buf)], &out, n)?;
    }
    Ok(Out::Dev(vec![out]))
}

/// Quantized input `i` minus its zero point `z`, as floats of its shape.
fn offsets(ctx: &mut Ctx, i: usize, z: f64) -> Result<DevVal> {
    let shape = ctx.shape(i).unwrap_or_default();
    let q = ctx.dev_words(i)?;
    let out = ctx.output(shape, ctx.out_dtype());
    let n = out.len();
    let mut p = Params::new();
    p.set(0, n as u32).set_i(1, z as i64);
    if n > 0 {
        ctx.run("linalg/qoffset", "main", &p.0, &[Some(&q)], &out, n)?;
    }
    Ok(out)
}
