//! Quantization causes, with evidence from the f64 reference: at `QuantizeLinear` (per-tensor or per-axis scales)
//! saturation, range use and rounding flips (values within the input's error of a half-quantum boundary, where one
//! flipped level moves the output by a whole quantum); for `DequantizeLinear`, `ConvInteger`, `MatMulInteger`,
//! `QLinearConv` and `QLinearMatMul` the integer range their inputs use and how much sits at the bounds; for the
//! integer products, u8×s8 pairs beyond int16 (x86 kernels without VNNI add pairs of products in int16 and saturate;
//! a convolution's pairs in [`super::conv_pairs`]) and sums beyond the int32 accumulator.

use ndarray::{ArrayD, Axis, Ix2};

use super::{cause, num, spacing, Evidence, Limits, Site};
use crate::report::model::{Cause, CauseKind, Confidence, Culprit};
use crate::tensor::DType;

pub(super) fn explain(_c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    match s.op {
        "QuantizeLinear" => quantize(ev, s, out),
        "DequantizeLinear" => integer_inputs(ev, s, &[0], out),
        // The products first: their int16 pairs explain a difference between two runs of the same levels.
        "ConvInteger" | "MatMulInteger" => {
            products(ev, s, 1, out);
            integer_inputs(ev, s, &[0, 1], out);
        }
        "QLinearConv" | "QLinearMatMul" => {
            products(ev, s, 3, out);
            integer_inputs(ev, s, &[0, 3], out);
        }
        _ => {}
    }
}

/// The range of an integer element type.
fn int_range(d: DType) -> Option<(f64, f64)> {
    Some(match d {
        DType::I8 => (-128.0, 127.0),
        DType::U8 => (0.0, 255.0),
        DType::I16 => (-32768.0, 32767.0),
        DType::U16 => (0.0, 65535.0),
        _ => return None,
    })
}

/// The element type of a value or initializer.
fn dtype_of(ev: &Evidence, name: &str) -> Option<DType> {
    ev.initializers
        .get(name)
        .map(|t| t.dtype())
        .or_else(|| ev.values.and_then(|v| v.dtype(name)))
}

/// `p` (a scalar, or one entry per index along `axis`) broadcast to every element of `shape`.
fn per_element(p: &ArrayD<f64>, shape: &[usize], axis: usize) -> Option<ArrayD<f64>> {
    if p.len() == 1 {
        return Some(ArrayD::from_elem(
            shape,
            p.iter().next().copied().unwrap_or(0.0),
        ));
    }
    let c = *shape.get(axis)?;
    if p.ndim() != 1 || p.len() != c {
        return None; // blocked quantization: not analysed
    }
    let mut view_shape = vec![1; shape.len()];
    view_shape[axis] = c;
    let v = p.clone().into_shape_with_order(view_shape).ok()?;
    v.broadcast(shape).map(|b| b.to_owned())
}

/// Saturation, rounding flips and range use at a `QuantizeLinear`.
fn quantize(ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let Some(q) = Quantization::of(ev, s) else {
        return;
    };
    let t = q.tally();
    if t.n == 0 {
        return;
    }
    q.report(&t, out);
}

/// A `QuantizeLinear`'s input and parameters, broadcast to every element, with the error its input carries.
struct Quantization {
    x: ArrayD<f64>,
    /// Whether the scale is per axis (more than one entry).
    per_axis: bool,
    /// The scale of each element.
    sc: ArrayD<f64>,
    /// The zero point of each element.
    zp: ArrayD<f64>,
    qmin: f64,
    qmax: f64,
    /// The error the input carries on the target.
    inherited: f64,
    /// The input's storage type.
    li: Limits,
}

/// What quantizing each finite element does: how many saturate or sit near a rounding boundary, and the levels
/// reached.
struct Tally {
    /// Finite elements with a positive scale.
    n: usize,
    sat: usize,
    near: usize,
    lo: f64,
    hi: f64,
    s_min: f64,
}

impl Quantization {
    /// The quantization at site `s`; `None` when its values, scales or zero points are not known or not analysed.
    fn of(ev: &Evidence, s: &Site) -> Option<Quantization> {
        let node = s.node;
        let x = node.inputs.first().and_then(|n| ev.value(n))?;
        let scale = node.inputs.get(1).and_then(|n| ev.value(n))?;
        let axis = ev.attr_i(s.i, "axis").unwrap_or(1);
        let axis = if axis < 0 {
            axis + x.ndim() as i64
        } else {
            axis
        }
        .max(0) as usize;
        let sc = per_element(&scale, x.shape(), axis)?;
        let zp_name = node.inputs.get(2).filter(|n| !n.is_empty());
        let zp = match zp_name.and_then(|n| ev.value(n)) {
            Some(z) => per_element(&z, x.shape(), axis),
            None => Some(ArrayD::zeros(x.shape())),
        }?;
        let qtype = zp_name.and_then(|n| dtype_of(ev, n)).unwrap_or(DType::U8);
        let (qmin, qmax) = int_range(qtype)?;
        // The error the input carries on the target: what it inherited, and at least half its storage spacing.
        let x_name = &node.inputs[0];
        let inherited = ev
            .nodes
            .iter()
            .flat_map(|n| n.values.iter())
            .find(|v| &v.name == x_name)
            .and_then(|v| v.metrics.as_ref())
            .map(|m| m.max_abs)
            .unwrap_or(0.0);
        let li = super::limits(ev.dtype(x_name));
        Some(Quantization {
            x,
            per_axis: scale.len() > 1,
            sc,
            zp,
            qmin,
            qmax,
            inherited,
            li,
        })
    }

    /// Quantizes every finite element with a positive scale and counts what happens.
    fn tally(&self) -> Tally {
        let (qmin, qmax, inherited, li) = (self.qmin, self.qmax, self.inherited, self.li);
        let (mut n, mut sat, mut near, mut lo, mut hi) =
            (0usize, 0usize, 0usize, f64::INFINITY, f64::NEG_INFINITY);
        let mut s_min = f64::INFINITY;
        for ((&v, &s), &z) in self.x.iter().zip(self.sc.iter()).zip(self.zp.iter()) {
            if !v.is_finite() || s <= 0.0 {
                continue;
            }
            n += 1;
            s_min = s_min.min(s);
            let q = (v / s).round_ties_even() + z;
            if q < qmin || q > qmax {
                sat += 1;
            } else {
                let err = inherited.max(spacing(v.abs(), li) / 2.0);
                let frac = (v / s).rem_euclid(1.0);
                if (frac - 0.5).abs() * s < err {
                    near += 1;
                }
            }
            lo = lo.min(q);
            hi = hi.max(q);
        }
        Tally {
            n,
            sat,
            near,
            lo,
            hi,
            s_min,
        }
    }

    /// The causes `t` shows: saturation, rounding flips near level boundaries, and little of the range used.
    fn report(&self, t: &Tally, out: &mut Vec<Cause>) {
        let (qmin, qmax, inherited, li) = (self.qmin, self.qmax, self.inherited, self.li);
        let Tally {
            n,
            sat,
            near,
            lo,
            hi,
            s_min,
        } = *t;
        let used = ((hi.min(qmax) - lo.max(qmin)) / (qmax - qmin)).max(0.0);
        let at = if self.per_axis {
            format!("at per-axis scales down to {}", num(s_min))
        } else {
            format!("at scale {}", num(s_min))
        };
        if sat > 0 {
            out.push(cause(
                CauseKind::QuantizationSaturation,
                format!("{sat} of {n} values fall outside [{qmin}, {qmax}] {at} and saturate"),
                &[
                    ("saturated", sat as f64),
                    ("scale", s_min),
                    ("qmin", qmin),
                    ("qmax", qmax),
                ],
                Confidence::High,
                "recalibrate the scale on data like this input, or keep this tensor in float"
                    .into(),
            ));
        }
        if near > 0 {
            out.push(cause(
                CauseKind::QuantizationFlip,
                format!(
                    "{near} of {n} values sit within the input's error ({} on the target, spacing {} in {}) of a \
                     rounding boundary between two levels: each flip moves the quantized value by one level, {} \
                     after dequantization",
                    num(inherited),
                    num(spacing(self.x.iter().fold(0.0, |m: f64, v| m.max(v.abs())), li)),
                    li.name,
                    num(s_min)
                ),
                &[("near_boundary", near as f64), ("values", n as f64), ("quantum", s_min), ("input_error", inherited)],
                if near * 100 >= n { Confidence::High } else { Confidence::Medium },
                format!(
                    "expect one-level differences here (compare this value with --atol {}), or keep the input's \
                     producer in fp32 so it carries less error",
                    num(s_min)
                ),
            ));
        }
        if used < 0.1 {
            out.push(cause(
                CauseKind::QuantizationRange,
                format!(
                    "the values use {:.1}% of the quantized range {at}",
                    100.0 * used
                ),
                &[("range_used", used), ("scale", s_min)],
                Confidence::Medium,
                "recalibrate: a smaller scale would resolve these values better".into(),
            ));
        }
    }
}

/// Range use and saturation of the integer inputs `which`.
fn integer_inputs(ev: &Evidence, s: &Site, which: &[usize], out: &mut Vec<Cause>) {
    for &k in which {
        let Some(name) = s.node.inputs.get(k).filter(|n| !n.is_empty()) else {
            continue;
        };
        let (Some(q), Some((qmin, qmax))) =
            (ev.value(name), dtype_of(ev, name).and_then(int_range))
        else {
            continue;
        };
        if q.is_empty() {
            continue;
        }
        let (lo, hi) = q
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        let mut levels: Vec<i64> = q.iter().map(|&v| v as i64).collect();
        levels.sort_unstable();
        levels.dedup();
        let used = (hi - lo) / (qmax - qmin);
        let at_bounds = q.iter().filter(|&&v| v == qmin || v == qmax).count();
        let share = at_bounds as f64 / q.len() as f64;
        let ty = if qmin < 0.0 { "int" } else { "uint" };
        let bits = ((qmax - qmin + 1.0).log2()).round();
        if used < 0.1 {
            out.push(cause(
                CauseKind::QuantizationRange,
                format!(
                    "`{name}` uses {} levels, {:.1}% of the {ty}{bits} range: one level is 1/{} of its spread, so a \
                     one-level difference upstream is a large relative error here",
                    levels.len(),
                    100.0 * used,
                    levels.len().max(1)
                ),
                &[("levels", levels.len() as f64), ("range_used", used)],
                Confidence::Medium,
                format!("recalibrate `{name}`'s scale so its values spread over the range"),
            ));
        }
        if share > 0.01 {
            out.push(cause(
                CauseKind::QuantizationSaturation,
                format!(
                    "{at_bounds} of {} values of `{name}` ({:.1}%) sit at the {ty}{bits} bounds [{qmin}, {qmax}]: \
                     they saturated when quantized",
                    q.len(),
                    100.0 * share
                ),
                &[("at_bounds", at_bounds as f64), ("share", share)],
                Confidence::Medium,
                format!("recalibrate `{name}`'s scale on data like this input"),
            ));
        }
    }
}

/// Integer products: int16 pair saturation (u8 × s8) and the int32 accumulator.
fn products(ev: &Evidence, s: &Site, b_at: usize, out: &mut Vec<Cause>) {
    let node = s.node;
    let (Some(a_name), Some(b_name)) = (node.inputs.first(), node.inputs.get(b_at)) else {
        return;
    };
    let (Some(a), Some(b)) = (ev.value(a_name), ev.value(b_name)) else {
        return;
    };
    let zp = |k: usize| {
        node.inputs
            .get(k)
            .filter(|n| !n.is_empty())
            .and_then(|n| ev.value(n))
            .and_then(|z| z.iter().next().copied())
            .unwrap_or(0.0)
    };
    // Zero points: ConvInteger/MatMulInteger inputs 2 and 3; QLinear* inputs 2 and 5.
    let (za, zb) = if b_at == 1 {
        (zp(2), zp(3))
    } else {
        (zp(2), zp(5))
    };
    let amax = a.iter().fold(0.0, |m: f64, v| m.max((v - za).abs()));
    let bmax = b.iter().fold(0.0, |m: f64, v| m.max((v - zb).abs()));
    let k = match s.op.ends_with("MatMul") || s.op == "MatMulInteger" {
        true => a.shape().last().copied().unwrap_or(0),
        false => b.shape().iter().skip(1).product(),
    };
    let bound = k as f64 * amax * bmax;
    if bound > i32::MAX as f64 {
        out.push(cause(
            CauseKind::AccumulatorOverflow,
            format!(
                "each output sums {k} products of up to {} × {}: up to {} — beyond the int32 accumulator",
                num(amax),
                num(bmax),
                num(bound)
            ),
            &[("reduction_length", k as f64), ("bound", bound)],
            Confidence::High,
            "split the reduction, or quantize to fewer bits".into(),
        ));
    }
    let (at, bt) = (dtype_of(ev, a_name), dtype_of(ev, b_name));
    if at != Some(DType::U8) || bt != Some(DType::I8) {
        return;
    }
    let saturated = match s.op.contains("MatMul") {
        true => pair_saturation(&a, &b, super::conv_pairs::BUDGET),
        false => super::conv_pairs::pair_saturation(&a, &b, &geometry(ev, s, za)),
    };
    if let Some((pairs, worst, checked)) = saturated {
        if pairs > 0 {
            out.push(cause(
                CauseKind::QuantizationSaturation,
                format!(
                    "{pairs} of {checked} adjacent u8×s8 product pairs sum beyond int16 (up to {}): x86 kernels without \
                     VNNI (AVX2 `vpmaddubsw`) saturate them; phantom cannot tell which kernel ONNX Runtime picked",
                    num(worst)
                ),
                &[("pairs_over", pairs as f64), ("worst_pair", worst), ("pairs_checked", checked as f64)],
                Confidence::Medium,
                "quantize activations with reduce_range (7 bits), or run on a CPU with VNNI".into(),
            ));
        }
    }
}

/// The geometry of the convolution at `s` (its attributes; `za`, the input's zero point, is what padding reads).
fn geometry(ev: &Evidence, s: &Site, za: f64) -> super::conv_pairs::Geometry {
    let ints = |name: &str, k: usize| {
        (ev.protos.get(s.i).into_iter())
            .flat_map(|p| p.attribute.iter())
            .find(|a| a.name == name)
            .and_then(|a| a.ints.get(k).copied())
    };
    let two =
        |name: &str, default: i64| [0, 1].map(|k| ints(name, k).unwrap_or(default).max(0) as usize);
    super::conv_pairs::Geometry {
        channels_last: ev.attr_i(s.i, "channels_last").unwrap_or(0) != 0,
        group: ev.attr_i(s.i, "group").unwrap_or(1).max(1) as usize,
        strides: two("strides", 1),
        pads: two("pads", 0),
        dilations: two("dilations", 1),
        pad_byte: za,
        budget: super::conv_pairs::BUDGET,
    }
}

/// Adjacent pairs along K of a (…, M, K) × (K, N) product whose sum of u8×s8 products exceeds int16 (pairs over,
/// the largest |sum|, pairs checked); rows sampled to bound the work. Zero points are not subtracted here: the
/// kernels multiply the stored bytes.
pub(super) fn pair_saturation(
    a: &ArrayD<f64>,
    b: &ArrayD<f64>,
    budget: usize,
) -> Option<(usize, f64, usize)> {
    let k = *a.shape().last()?;
    let rows = a.len() / k.max(1);
    let a2 = a.to_shape((rows, k)).ok()?;
    let b2 = b.view().into_dimensionality::<Ix2>().ok()?;
    if b2.shape()[0] != k {
        return None;
    }
    let step = (rows * b2.shape()[1] * k / budget.max(1)).max(1);
    let (mut over, mut worst, mut checked) = (0usize, 0f64, 0usize);
    for r in (0..rows).step_by(step) {
        let row = a2.index_axis(Axis(0), r);
        for col in b2.axis_iter(Axis(1)) {
            for p in (0..k.saturating_sub(1)).step_by(2) {
                let sum = row[p] * col[p] + row[p + 1] * col[p + 1];
                checked += 1;
                if sum.abs() > 32767.0 {
                    over += 1;
                    worst = worst.max(sum.abs());
                }
            }
        }
    }
    Some((over, worst, checked))
}

#[cfg(test)]
mod tests {
    use ndarray::ArrayD;

    #[test]
    fn u8_s8_pairs_beyond_int16_are_counted() {
        // Row [255, 255, 1, 1] times column [127, 127, 1, 1]: the first pair sums to 64,770 (> 32,767), the second to 2.
        let a = ArrayD::from_shape_vec(vec![1, 4], vec![255.0, 255.0, 1.0, 1.0]).unwrap();
        let b = ArrayD::from_shape_vec(vec![4, 1], vec![127.0, 127.0, 1.0, 1.0]).unwrap();
        let (over, worst, checked) = super::pair_saturation(&a, &b, 1000).unwrap();
        assert_eq!((over, checked), (1, 2));
        assert_eq!(worst, 64770.0);
        let small = ArrayD::from_shape_vec(vec![1, 4], vec![100.0, 100.0, 1.0, 1.0]).unwrap();
        assert_eq!(super::pair_saturation(&small, &b, 1000).unwrap().0, 0);
    }
}
