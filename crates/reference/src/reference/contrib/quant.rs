//! Quantized ops: GatherBlockQuantized (block-quantized embedding tables), MatMulIntegerToFloat and
//! DynamicQuantizeMatMul (integer products scaled to float), in f64 from their definitions.
//!
//! As ORT's CPU kernels compute them: GatherBlockQuantized on uint8 data gathers along axis 0 of values packed
//! low bits first along the last (quantized) axis, with zero points packed the same way (default 2^(bits−1)), and an
//! index outside the table gives a row of zeros; DynamicQuantizeMatMul quantizes A per tensor to uint8 (scale
//! (max(A, 0) − min(A, 0)) / 255, zero point round(−min/scale), values round-half-even(A/scale) + zp clamped to
//! [0, 255]) — phantom does the same in f64, so a value exactly at a rounding boundary may land on the other side;
//! per-column scales and zero points broadcast over N. A GatherBlockQuantized table of a narrow type (int4, uint4,
//! float8, float4) is [`super::gather_narrow`]'s.

use tract_onnx::prelude::*;

use super::super::fast::gemm::{matmul, Mat};
use super::super::formats::FORMAT_ATTR;
use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, f64s_opt, fact, opt, shaped, values};
use crate::tensor::formats::Format;
use crate::tensor::ToF64;

/// The quantized ops; ONNX's DynamicQuantizeLinear, which tract computes in f32, in any domain.
pub(super) const TABLE: &[Row] = &[
    Row::new("GatherBlockQuantized", &Gather),
    Row::new("MatMulIntegerToFloat", &IntMatMul),
    Row::new("DynamicQuantizeMatMul", &IntMatMul),
    Row::any_domain("DynamicQuantizeLinear", &DynQuant),
];

struct Gather;

/// Unpacks `bits`-wide codes stored low bits first.
fn code(bytes: &[u8], i: usize, bits: usize) -> f64 {
    let per = 8 / bits;
    ((bytes[i / per] as u16 >> (bits * (i % per))) & ((1 << bits) - 1)) as f64
}

/// The narrow format of the table, where it has one (the model-format pass says so in an attribute).
fn narrow(n: &Node) -> Option<Format> {
    Format::from_onnx(n.int(FORMAT_ATTR, 0) as i32)
}

impl Kernel for Gather {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        if narrow(n).is_some() {
            return super::gather_narrow::facts(n, ins);
        }
        let (data, idx, scales) = (fact(n, ins, 0)?, fact(n, ins, 1)?, fact(n, ins, 2)?);
        anyhow::ensure!(
            data.0 == u8::datum_type(),
            "GatherBlockQuantized reads uint8 data here, got {:?}",
            data.0
        );
        let bits = n.int("bits", 4) as usize;
        anyhow::ensure!(matches!(bits, 2 | 4 | 8), "bits = {bits}");
        anyhow::ensure!(
            n.int("gather_axis", 0) == 0,
            "uint8 data gathers along axis 0"
        );
        let mut shape = idx.1.clone();
        shape.extend_from_slice(&data.1[1..]);
        *shape
            .last_mut()
            .ok_or_else(|| anyhow::anyhow!("data of rank 0"))? *= 8 / bits;
        Ok(vec![(scales.0, shape)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        if let Some(f) = narrow(n) {
            return super::gather_narrow::eval(n, f, ins);
        }
        let data = opt(n, ins, 0)?;
        let bits = n.int("bits", 4) as usize;
        let block = n.int("block_size", 128) as usize;
        let rank = data.rank();
        let q_axis = n.int("quantize_axis", 1);
        anyhow::ensure!(
            q_axis == rank as i64 - 1 || q_axis == -1,
            "uint8 data is quantized along its last axis"
        );
        let bytes = values::<u8>(data)?;
        let rows = data.shape()[0];
        let row_bytes = bytes.len() / rows.max(1);
        let width = row_bytes * 8 / bits;
        let last = *data.shape().last().expect("rank ≥ 1");
        // Each row of axis 0 holds `per_row` lines of `last` bytes, each `codes_per_row` codes along the last axis.
        let (per_row, codes_per_row) = (row_bytes / last.max(1), last * 8 / bits);
        let blocks = codes_per_row.div_ceil(block.max(1));
        let scales = f64s(n, ins, 2)?;
        let scales = scales.as_slice().expect("standard");
        anyhow::ensure!(
            scales.len() == rows * per_row * blocks,
            "scales has {} values, expected {}",
            scales.len(),
            rows * per_row * blocks
        );
        let zp = match ins.get(3).copied().flatten() {
            Some(t) => Some(values::<u8>(t)?),
            None => None,
        };
        let zp_row = blocks.div_ceil(8 / bits);
        let mut table = vec![0.0; rows * width];
        for r in 0..rows * per_row {
            for c in 0..codes_per_row {
                let b = c / block;
                let z = zp.as_ref().map_or((1u32 << (bits - 1)) as f64, |z| {
                    code(&z[r * zp_row..], b, bits)
                });
                table[r * codes_per_row + c] =
                    (code(&bytes[r * (codes_per_row * bits / 8)..], c, bits) - z)
                        * scales[r * blocks + b];
            }
        }
        let idx = values::<i64>(opt(n, ins, 1)?)?;
        let mut out = Vec::with_capacity(idx.len() * width);
        for &i in &idx {
            let j = if i < 0 { i + rows as i64 } else { i };
            if (0..rows as i64).contains(&j) {
                out.extend_from_slice(&table[j as usize * width..][..width]);
            } else {
                out.extend(std::iter::repeat_n(0.0, width));
            }
        }
        let mut shape = opt(n, ins, 1)?.shape().to_vec();
        shape.extend_from_slice(&data.shape()[1..]);
        *shape.last_mut().expect("rank ≥ 1") *= 8 / bits;
        Ok(vec![shaped(&shape, out)?])
    }
}

/// An integer operand with its scale and zero point (one value, or one per column of B).
struct Operand<'a> {
    values: &'a [f64],
    scale: Vec<f64>,
    zero: Vec<f64>,
}

/// Y = (A − a_zp)·(B − b_zp) · a_scale·b_scale + bias for A [m, k] and B [k, n].
fn int_product(
    a: &Operand,
    b: &Operand,
    (m, k, n): (usize, usize, usize),
    bias: Option<&[f64]>,
) -> Vec<f64> {
    let at = |v: &[f64], i: usize| v[i % v.len()];
    let av: Vec<f64> = a.values.iter().map(|v| v - a.zero[0]).collect();
    let bv: Vec<f64> = b
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| v - at(&b.zero, i % n))
        .collect();
    let mut y = vec![0.0; m * n];
    matmul(m, k, n, Mat::rows(&av, k), Mat::rows(&bv, n), &mut y);
    for (i, v) in y.iter_mut().enumerate() {
        let j = i % n;
        *v = *v * a.scale[0] * at(&b.scale, j) + bias.map_or(0.0, |b| b[j]);
    }
    y
}

/// A per-tensor or per-column quantization parameter as a vector (1 or N values); absent → 0.
fn per_column(ins: &[Option<&Tensor>], slot: usize, n: usize) -> TractResult<Vec<f64>> {
    let v = match f64s_opt(ins, slot)? {
        Some(a) => a.iter().copied().collect::<Vec<f64>>(),
        None => vec![0.0],
    };
    anyhow::ensure!(
        v.len() == 1 || v.len() == n,
        "a quantization parameter has {} values, expected 1 or {n}",
        v.len()
    );
    Ok(v)
}

struct IntMatMul;

impl Kernel for IntMatMul {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (a, b) = (fact(n, ins, 0)?, fact(n, ins, 1)?);
        let scale_slot = if n.op() == "DynamicQuantizeMatMul" {
            2
        } else {
            3
        };
        let dt = fact(n, ins, scale_slot)?.0;
        anyhow::ensure!(
            b.1.len() == 2 && a.1.last() == b.1.first(),
            "A {:?} · B {:?}: B must be 2-D (K, N)",
            a.1,
            b.1
        );
        let mut shape = a.1.clone();
        *shape.last_mut().expect("checked") = b.1[1];
        Ok(vec![(dt, shape)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let a = f64s(n, ins, 0)?;
        let b = f64s(n, ins, 1)?;
        let (k, nn) = (b.shape()[0], b.shape()[1]);
        let m = a.len() / k.max(1);
        let a = a.as_slice().expect("standard");
        let bv = b.as_slice().expect("standard");
        let (qa, a_op, b_op, bias);
        if n.op() == "DynamicQuantizeMatMul" {
            let (q, sa, za) = quantize_u8(a);
            qa = q;
            a_op = (vec![sa], vec![za]);
            b_op = (per_column(ins, 2, nn)?, per_column(ins, 3, nn)?);
            bias = f64s_opt(ins, 4)?;
        } else {
            let sa = f64s(n, ins, 2)?;
            anyhow::ensure!(sa.len() == 1, "a_scale must be one value");
            qa = a.to_vec();
            a_op = (sa.iter().copied().collect(), per_column(ins, 4, 1)?);
            b_op = (per_column(ins, 3, nn)?, per_column(ins, 5, nn)?);
            bias = f64s_opt(ins, 6)?;
        }
        let a_side = Operand {
            values: &qa,
            scale: a_op.0,
            zero: a_op.1,
        };
        let b_side = Operand {
            values: bv,
            scale: b_op.0,
            zero: b_op.1,
        };
        let bias = bias.as_ref().map(|b| b.as_slice().expect("standard"));
        let y = int_product(&a_side, &b_side, (m, k, nn), bias);
        let mut shape = opt(n, ins, 0)?.shape().to_vec();
        *shape.last_mut().expect("rank ≥ 1") = nn;
        Ok(vec![shaped(&shape, y)?])
    }
}

/// ONNX DynamicQuantizeLinear in f64 (tract computes it in f32): y = saturate(round(x / scale) + zp) with scale =
/// (max(x, 0) − min(x, 0)) / 255 rounded to float32 (the type ONNX gives it) and zp = saturate(round(−min / scale)), rounding half to even; an all-zero input
/// gets scale 1, as ORT gives it (the ONNX formula divides by zero).
struct DynQuant;

impl Kernel for DynQuant {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        Ok(vec![
            (u8::datum_type(), x.1.clone()),
            (x.0, vec![]),
            (u8::datum_type(), vec![]),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let t = opt(n, ins, 0)?;
        let x = t.cast_to::<f64>()?;
        let view = x.to_plain_array_view::<f64>()?;
        let standard = view.as_standard_layout();
        let a = standard.as_slice().expect("standard layout");
        let (scale, zp) = u8_params(a);
        let y = u8_codes(a, scale, zp);
        Ok(vec![
            tract_onnx::prelude::tract_ndarray::ArrayD::from_shape_vec(t.shape(), y)?.into_tensor(),
            tensor0(scale),
            tensor0(zp as u8),
        ])
    }
}

/// The scale and zero point of ORT's per-tensor uint8 quantization of `a`: the range of `a` and 0 (NaNs left out),
/// over 255, rounded to float32; the zero point rounded half to even and saturated.
fn u8_params(a: &[f64]) -> (f64, f64) {
    let (lo, hi) = range(a);
    // The scale is a float32 value, as ONNX and ORT store it.
    let scale = if hi == lo {
        1.0
    } else {
        ((hi - lo) / 255.0) as f32 as f64
    };
    let zp = (-lo / scale).round_ties_even().clamp(0.0, 255.0);
    (scale, zp)
}

crate::widened! {
    /// The smallest and largest of `a` and 0 (NaNs left out), compiled for the widest vector instructions this CPU
    /// has (`crate::simd`).
    fn range<T: ToF64>(a: &[T]) -> (f64, f64) = range_in
}

/// [`range`]'s body: eight interleaved extremes (a comparison ignores a NaN, as `f64::min` does).
#[inline(always)]
fn range_in<T: ToF64>(a: &[T]) -> (f64, f64) {
    let (mut lo, mut hi) = ([0.0f64; 8], [0.0f64; 8]);
    let mut eights = a.chunks_exact(8);
    for e in &mut eights {
        for k in 0..8 {
            let v = e[k].to_f64();
            lo[k] = if v < lo[k] { v } else { lo[k] };
            hi[k] = if v > hi[k] { v } else { hi[k] };
        }
    }
    let rest = || eights.remainder().iter().map(|v| v.to_f64());
    let lo = lo
        .into_iter()
        .chain(rest())
        .fold(0.0, |m, v| if v < m { v } else { m });
    let hi = hi
        .into_iter()
        .chain(rest())
        .fold(0.0, |m, v| if v > m { v } else { m });
    (lo, hi)
}

crate::widened! {
    /// `a` quantized with `scale` and `zp`: round(v / scale) + zp, half to even, saturated to 0..=255 (NaN to 0);
    /// compiled for the widest vector instructions this CPU has (`crate::simd`).
    fn u8_codes<T: ToF64>(a: &[T], scale: f64, zp: f64) -> Vec<u8> = u8_codes_in
}

#[inline(always)]
fn u8_codes_in<T: ToF64>(a: &[T], scale: f64, zp: f64) -> Vec<u8> {
    a.iter()
        .map(|v| ((v.to_f64() / scale).round_ties_even() + zp).clamp(0.0, 255.0) as u8)
        .collect()
}

/// `a` quantized per tensor to uint8 as ORT's dynamic quantization does, and dequantized exactly.
pub fn requantized(a: &[f64]) -> Vec<f64> {
    let (q, scale, zp) = quantize_u8(a);
    q.iter().map(|v| (v - zp) * scale).collect()
}

/// ORT's per-tensor uint8 quantization of A: (codes, scale, zero point).
fn quantize_u8(a: &[f64]) -> (Vec<f64>, f64, f64) {
    let (scale, zp) = u8_params(a);
    let q = a
        .iter()
        .map(|v| ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0))
        .collect();
    (q, scale, zp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorized quantization gives exactly what ONNX's formula gives, element by element: on mixed signs,
    /// one sign only, exact halves, all zeros and NaNs, over lengths that leave a remainder.
    #[test]
    fn quantization_is_the_formula() {
        let formula = |a: &[f64]| -> (Vec<u8>, f64, f64) {
            let lo = a.iter().copied().fold(0.0f64, f64::min);
            let hi = a.iter().copied().fold(0.0f64, f64::max);
            let scale = if hi == lo {
                1.0
            } else {
                ((hi - lo) / 255.0) as f32 as f64
            };
            let zp = (-lo / scale).round_ties_even().clamp(0.0, 255.0);
            let q = a
                .iter()
                .map(|v| ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0) as u8);
            (q.collect(), scale, zp)
        };
        let wavy: Vec<f64> = (0..1003)
            .map(|i| ((i * 7919) % 2001) as f64 / 97.0 - 9.5)
            .collect();
        let mut with_nan = wavy.clone();
        with_nan[17] = f64::NAN;
        let cases = [
            wavy.clone(),
            wavy.iter().map(|v| v.abs() + 0.5).collect(),
            wavy.iter().map(|v| -v.abs()).collect(),
            (0..37).map(|i| i as f64 * 0.5).collect(),
            vec![0.0; 19],
            with_nan,
        ];
        for a in &cases {
            let (scale, zp) = u8_params(a);
            let (q, s, z) = formula(a);
            assert_eq!((scale.to_bits(), zp.to_bits()), (s.to_bits(), z.to_bits()));
            assert_eq!(u8_codes(a, scale, zp), q);
            assert_eq!(u8_codes_in(a, scale, zp), q);
        }
    }
}
