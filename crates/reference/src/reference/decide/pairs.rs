//! QDQ pairs judged in quanta: a pair's level, read back from the target's `DequantizeLinear` output or taken from
//! its `QuantizeLinear`'s, is adopted where the float input, moved by its noise, quantizes to it, or where it is the
//! other neighbour of the exact level, less than one quantum from it (a faithful rounding, as integer kernels give).

use std::collections::HashMap;

use tract_onnx::prelude::*;

use super::{f64s, moved, radius, settle, shaped_like, target_f64s, Adopted, Decision};

/// The `QuantizeLinear` feeding `DequantizeLinear` node `dq` of `graph`, when there is one: a QDQ pair, whose output
/// is a decision on the pair's float input (ONNX Runtime fuses the pair, so its level is never exposed).
pub fn paired_quantize<'g>(
    graph: &'g crate::model::Graph,
    producers: &HashMap<&str, usize>,
    dq: &crate::model::Node,
) -> Option<&'g crate::model::Node> {
    if dq.op_type != "DequantizeLinear" {
        return None;
    }
    let q = producers.get(dq.inputs.first()?.as_str())?;
    graph
        .nodes
        .get(*q)
        .filter(|n| n.op_type == "QuantizeLinear")
}

/// The integer range of a quantized type.
fn levels(dt: DatumType) -> Option<(f64, f64)> {
    Some(match dt {
        DatumType::U8 => (0.0, 255.0),
        DatumType::I8 => (-128.0, 127.0),
        DatumType::U16 => (0.0, 65535.0),
        DatumType::I16 => (-32768.0, 32767.0),
        _ => return None,
    })
}

/// Reconciles the output of a QDQ pair's `DequantizeLinear` (inputs `ins`: levels, scale, zero point; per tensor or
/// per channel) with the target's: the target's level is read back from its output, and taken where the pair's float
/// input `x`, moved by its noise, quantizes to it, or where it is the other neighbour of the exact level
/// ([`faithful`]). The output is recomputed in f64 from the levels taken.
pub fn adopt_pair(
    d: &Decision,
    x: &TValue,
    ins: &TVec<TValue>,
    out: &mut TValue,
) -> Option<Adopted> {
    let levels_in = ins.first()?;
    let range = levels(levels_in.datum_type())?;
    let ours = f64s(levels_in)?;
    let (s, zp) = params(ins, levels_in.shape())?;
    let x = f64s(x)?;
    let theirs: Vec<f64> = (target_f64s(d).iter().enumerate())
        .map(|(i, y)| (y / s[i] + zp[i]).round_ties_even())
        .collect();
    if x.len() != ours.len() || theirs.len() != ours.len() {
        return None;
    }
    let Some((taken, a)) = reconcile_levels(d, &x, (&ours, &theirs), (&s, &zp), range) else {
        return Some(Adopted::default());
    };
    let y = (taken.iter().enumerate())
        .map(|(i, q)| (q - zp[i]) * s[i])
        .collect();
    *out = shaped_like(out, y).ok()?;
    Some(a)
}

/// Reconciles the levels of the `QuantizeLinear` of a QDQ pair (inputs `ins`: float, scale, zero point; per tensor
/// or per channel) with the target's, as its pair's `DequantizeLinear` is ([`adopt_pair`]): the level the pair
/// computes on is judged once, the same way on both of its values.
pub fn adopt_paired_quantize(
    d: &Decision,
    ins: &TVec<TValue>,
    out: &mut TValue,
) -> Option<Adopted> {
    let range = levels(out.datum_type())?;
    let (x, ours, theirs) = (f64s(ins.first()?)?, f64s(out)?, target_f64s(d));
    let (s, zp) = params(ins, ins.first()?.shape())?;
    if x.len() != ours.len() || theirs.len() != ours.len() {
        return None;
    }
    let Some((taken, a)) = reconcile_levels(d, &x, (&ours, &theirs), (&s, &zp), range) else {
        return Some(Adopted::default());
    };
    *out = shaped_like(out, taken).ok()?;
    Some(a)
}

/// The scale and zero point (inputs 1 and 2 of `ins`) of each element of a tensor of `shape`, one per tensor or one
/// per channel along the axis as long as the scale (ONNX's default, 1, where several are); `None` for blocked
/// scales, an axis that cannot be told, or a zero scale.
fn params(ins: &TVec<TValue>, shape: &[usize]) -> Option<(Vec<f64>, Vec<f64>)> {
    let n: usize = shape.iter().product();
    let spread = |v: Vec<f64>| -> Option<Vec<f64>> {
        if v.len() == 1 {
            return Some(vec![v[0]; n]);
        }
        let axes: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] == v.len()).collect();
        let axis = match axes.as_slice() {
            [a] => *a,
            _ if axes.contains(&1) => 1,
            _ => return None,
        };
        let inner: usize = shape[axis + 1..].iter().product();
        Some((0..n).map(|i| v[(i / inner.max(1)) % v.len()]).collect())
    };
    let s = spread(ins.get(1).and_then(f64s)?)?;
    let zp = match ins.get(2).and_then(f64s) {
        Some(z) if z.len() == 1 || z.len() == ins.get(1).map_or(0, |t| t.len()) => spread(z)?,
        Some(_) => return None,
        None => vec![0.0; n],
    };
    (!s.contains(&0.0)).then_some((s, zp))
}

/// Levels `ours` of a quantization (scale `s` and zero point `zp` per element, levels `lo..=hi`) of the float `x`,
/// reconciled with the target's `theirs`: taken where `x`, moved by its noise, quantizes to them, or where they are
/// the other neighbour of the exact level ([`faithful`]). `None` when nothing differs.
fn reconcile_levels(
    d: &Decision,
    x: &[f64],
    (ours, theirs): (&[f64], &[f64]),
    (s, zp): (&[f64], &[f64]),
    (lo, hi): (f64, f64),
) -> Option<(Vec<f64>, Adopted)> {
    let r = radius(x, d.noise_atol(), d.rtol);
    let level = |(i, v): (usize, f64)| ((v / s[i]).round_ties_even() + zp[i]).clamp(lo, hi);
    let bounds = |f: f64| {
        let at = |sign: f64| {
            moved(x, &r, f, sign)
                .into_iter()
                .enumerate()
                .map(level)
                .collect()
        };
        Some((at(-1.0), at(1.0)))
    };
    let (mut taken, mut a) = settle(ours, theirs, bounds, |i| x[i].is_nan())?;
    let exact = |i: usize| (x[i] / s[i] + zp[i]).clamp(lo, hi);
    faithful(&mut taken, theirs, exact, &mut a);
    Some((taken, a))
}

/// The levels of a QOperator node (ONNX Runtime's integer kernels, computed as its final `QuantizeLinear` of
/// inputs `ins`: the float, its scale and zero point) after [`super::adopt_monotone`] in `found`: the target's level is
/// taken where it is the other neighbour of the exact level ([`faithful`]), as for a QDQ pair, since those kernels
/// requantize in their own arithmetic (`QLinearSoftmax` multiplies by floor(1 / scale)).
pub fn faithful_levels(
    d: &super::Decisions,
    names: &[(usize, String)],
    ins: &TVec<TValue>,
    out: &mut TVec<TValue>,
    found: &mut [(String, Adopted)],
) {
    let Some(x) = ins.first().and_then(f64s) else {
        return;
    };
    for (slot, name) in names {
        let (Some(dec), Some(o)) = (d.get(name), out.get_mut(*slot)) else {
            continue;
        };
        let Some(a) = (found.iter_mut()).find(|(n, _)| n == name).map(|(_, a)| a) else {
            continue;
        };
        let (Some(mut taken), theirs) = (f64s(o), target_f64s(dec)) else {
            continue;
        };
        let (Some((lo, hi)), Some((s, zp))) = (levels(o.datum_type()), params(ins, o.shape()))
        else {
            continue;
        };
        if taken.len() != x.len() || theirs.len() != x.len() || a.beyond == 0 {
            continue;
        }
        faithful(
            &mut taken,
            &theirs,
            |i| (x[i] / s[i] + zp[i]).clamp(lo, hi),
            a,
        );
        if let Ok(t) = shaped_like(o, taken) {
            *o = t;
        }
    }
}

/// Takes the target's level where it still differs from `taken` but lies less than one quantum from the exact
/// (unrounded) level `exact(i)`: the other neighbour of the exact value, a faithful rounding ([`Adopted::faithful`]).
pub fn faithful(taken: &mut [f64], theirs: &[f64], exact: impl Fn(usize) -> f64, a: &mut Adopted) {
    for i in 0..taken.len() {
        let differs = taken[i] != theirs[i] && !(taken[i].is_nan() && theirs[i].is_nan());
        if differs && (theirs[i] - exact(i)).abs() < 1.0 {
            taken[i] = theirs[i];
            a.faithful += 1;
            a.beyond = a.beyond.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tv(v: &[f64], shape: &[usize]) -> TValue {
        let a = tract_ndarray::ArrayD::from_shape_vec(shape, v.to_vec()).unwrap();
        a.into_tensor().into_tvalue()
    }

    #[test]
    fn per_channel_parameters_are_spread_along_their_axis() {
        let ins: TVec<TValue> = tvec![
            tv(&[0.0; 12], &[1, 3, 2, 2]),
            tv(&[1.0, 2.0, 4.0], &[3]),
            tv(&[0.0, 1.0, 2.0], &[3])
        ];
        let (s, zp) = params(&ins, &[1, 3, 2, 2]).unwrap();
        assert_eq!(
            s,
            [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0, 4.0]
        );
        assert_eq!(zp[4..8], [1.0; 4]);
        // Two axes as long as the scale, neither of them 1: the axis cannot be told.
        assert!(params(&ins, &[3, 1, 3]).is_none());
        // Where axis 1 is one of them, it is ONNX's default.
        assert_eq!(params(&ins, &[1, 3, 3]).unwrap().0[3..6], [2.0; 3]);
    }
}
