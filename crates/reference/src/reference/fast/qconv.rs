//! ONNX `ConvInteger` on the f64 convolution ([`super::conv::conv_integer`]): tract-onnx wires it as a quantized
//! `Conv` whose output is the i32 accumulator (every scale 1, output zero point 0). Codes less their zero points
//! are integers of at most 255 in magnitude, so while the kernel's reach times 255² (plus the bias) stays below
//! 2^31 every partial sum is an exact f64 integer and the result is bit-identical to the integer accumulator; a
//! reach beyond that, a requantized output (QLinearConv), or a kernel layout other than OIHW stays with tract.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::cnn::Conv;

use super::{any_geometry, conv, out_shape};

/// tract's operand order for a quantized `Conv`.
const X: usize = 0;
const W: usize = 1;
const BIAS: usize = 2;
const X_ZERO: usize = 3;
const W_ZERO: usize = 5;
const Y_ZERO: usize = 7;
const SCALES: [usize; 3] = [4, 6, 8];

/// Evaluates a `ConvInteger`-shaped quantized `Conv`; `None` leaves it to tract.
pub fn node(c: &Conv, inputs: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    if c.q_params != Some(DatumType::I32) || inputs.len() != 9 {
        return None;
    }
    let unit =
        |i: usize| inputs[i].len() == 1 && inputs[i].cast_to_scalar::<f64>().ok() == Some(1.0);
    let zero = |i: usize| inputs[i].len() == 1 && inputs[i].cast_to_scalar::<i64>().ok() == Some(0);
    if !SCALES.iter().all(|&i| unit(i)) || !zero(Y_ZERO) {
        return None;
    }
    let (x, w) = (&inputs[X], &inputs[W]);
    if !matches!(x.datum_type(), DatumType::U8 | DatumType::I8) {
        return None;
    }
    let g = any_geometry(c, x.shape(), w.shape())?;
    let x_zero = scalar(&inputs[X_ZERO])?;
    let w_zero = per_channel(&inputs[W_ZERO], g.c_out)?;
    let bias = per_channel(&inputs[BIAS], g.c_out)?;
    let reach = (g.c_in / g.group * w.shape()[2..].iter().product::<usize>()) as f64;
    let largest_bias = bias.iter().fold(0f64, |m, b| m.max(b.abs()));
    if reach * 255.0 * 255.0 + largest_bias >= 2f64.powi(31) {
        return None;
    }
    let weights = widened_weights(w, &w_zero, g.c_out)?;
    let bias: Vec<i32> = bias.iter().map(|&b| b as i32).collect();
    let shape = out_shape(&g, x.shape(), w.rank());
    Some((|| {
        let mut y = Tensor::zero::<i32>(&shape)?;
        {
            let x = x.try_as_plain_ram()?;
            let mut plain = y.try_as_plain_ram_mut()?;
            let out = plain.as_slice_mut::<i32>()?;
            match x.datum_type() {
                DatumType::U8 => {
                    conv::conv_integer(&g, x.as_slice::<u8>()?, x_zero, &weights, &bias, out)
                }
                _ => conv::conv_integer(&g, x.as_slice::<i8>()?, x_zero, &weights, &bias, out),
            }
        }
        Ok(tvec!(y.into_tvalue()))
    })())
}

/// An integer operand of one value, as f64.
fn scalar(t: &TValue) -> Option<f64> {
    (t.len() == 1)
        .then(|| t.cast_to_scalar::<i64>().ok())?
        .map(|v| v as f64)
}

/// An integer operand of one value or one per output channel, as f64 (integers below 2^53 exactly).
fn per_channel(t: &TValue, channels: usize) -> Option<Vec<f64>> {
    if !(t.datum_type().is_integer() && (t.len() <= 1 || t.len() == channels)) {
        return None;
    }
    let v = t.cast_to::<i64>().ok()?;
    let v = v.try_as_plain_ram().ok()?;
    Some(
        v.as_slice::<i64>()
            .ok()?
            .iter()
            .map(|&b| b as f64)
            .collect(),
    )
}

/// The kernel's codes less their zero point (one, or one per output channel), as f64.
fn widened_weights(w: &TValue, zero: &[f64], c_out: usize) -> Option<Vec<f64>> {
    if !matches!(w.datum_type(), DatumType::U8 | DatumType::I8) || zero.is_empty() {
        return None;
    }
    let codes = w.cast_to::<i64>().ok()?;
    let codes = codes.try_as_plain_ram().ok()?;
    let codes = codes.as_slice::<i64>().ok()?;
    let per = codes.len() / c_out.max(1);
    let z = |i: usize| zero[if zero.len() == 1 { 0 } else { i / per.max(1) }];
    Some(
        codes
            .iter()
            .enumerate()
            .map(|(i, &c)| c as f64 - z(i))
            .collect(),
    )
}
