//! Extrema in f64 with ONNX's NaN semantics, where tract's f64 loops differ: the ONNX reference implementation
//! (numpy) propagates NaN through `Max`, `Min`, `Relu`, `Clip` and the Max/Min reductions, answers the first NaN's
//! index in `ArgMax`, `ArgMin` and `Hardmax`, and ranks NaN above every number in `TopK`; tract compares with
//! `f64::max` and `<`, which drop it.
//! The element-wise `Max`/`Min` (which `Relu`, `Clip` and `HardSigmoid` become in tract) are in
//! [`super::fast::binary`]; the reductions, the arg-reductions (which `Hardmax` becomes) and `TopK` are here.

use std::cmp::Ordering;

use tract_onnx::prelude::tract_ndarray::{ArrayD, ArrayView1, Axis, IxDyn};
use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::array::Topk;
use tract_onnx::tract_core::ops::nn::{Reduce, Reducer};

/// The larger of `a` and `b`, NaN when either is (numpy's `maximum`).
#[inline(always)]
pub fn max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// The smaller of `a` and `b`, NaN when either is (numpy's `minimum`).
#[inline(always)]
pub fn min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// The total order numpy sorts by: numbers ascending, NaN above them all (and equal to another NaN).
fn rank(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).expect("neither is NaN"),
    }
}

/// Evaluates an f64 Max/Min/ArgMax/ArgMin reduction or an f64 `TopK`; `None` leaves other nodes to tract.
pub fn eval(node: &TypedNode, inputs: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    if inputs.first()?.datum_type() != f64::datum_type() {
        return None;
    }
    if let Some(r) = node.op_as::<Reduce>() {
        return reduce(r, inputs);
    }
    let t = node.op_as::<Topk>()?;
    Some(topk(t, inputs))
}

fn reduce(r: &Reduce, inputs: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    if inputs.len() != 1 {
        return None;
    }
    let (largest, last) = match r.reducer {
        Reducer::Max => return Some(fold(&inputs[0], &r.axes, f64::NEG_INFINITY, max)),
        Reducer::Min => return Some(fold(&inputs[0], &r.axes, f64::INFINITY, min)),
        Reducer::ArgMax(last) => (true, last),
        Reducer::ArgMin(last) => (false, last),
        _ => return None,
    };
    let &[axis] = &r.axes[..] else { return None };
    Some(arg(&inputs[0], axis, largest, last))
}

/// Max/Min reductions over `axes`, kept as length-1 axes as tract's `Reduce` does. They start from ∓infinity
/// (tract starts from ∓f64::MAX, so a row of all −inf reduced to −1.8e308) and propagate NaN.
fn fold(
    x: &TValue,
    axes: &[usize],
    init: f64,
    f: fn(f64, f64) -> f64,
) -> TractResult<TVec<TValue>> {
    let mut a = x.to_plain_array_view::<f64>()?.to_owned();
    for &ax in axes {
        a = a
            .fold_axis(Axis(ax), init, |&acc, &v| f(acc, v))
            .insert_axis(Axis(ax));
    }
    Ok(tvec!(a.into_tvalue()))
}

/// Index of the largest (`largest`) or smallest element along `axis`, or of a NaN wherever there is one; among
/// equals the first, or the last with `last` (ONNX's `select_last_index`). The axis stays, of length 1.
fn arg(x: &TValue, axis: usize, largest: bool, last: bool) -> TractResult<TVec<TValue>> {
    let v = x.to_plain_array_view::<f64>()?;
    anyhow::ensure!(
        v.shape()[axis] > 0,
        "the model is invalid: an arg-reduction over an empty axis has no index"
    );
    // NaN wins both (numpy's argmax and argmin return the first NaN); numbers compare as usual.
    let better = |cand: f64, best: f64| {
        let o = match (cand.is_nan(), best.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ if largest => rank(cand, best),
            _ => rank(best, cand),
        };
        o == Ordering::Greater || (last && o == Ordering::Equal)
    };
    let out = v.map_axis(Axis(axis), |lane| {
        let mut best = 0;
        for (i, &c) in lane.iter().enumerate().skip(1) {
            if better(c, lane[best]) {
                best = i;
            }
        }
        best as i64
    });
    Ok(tvec!(out.insert_axis(Axis(axis)).into_tvalue()))
}

/// ONNX `TopK` in f64: the `k` largest (or smallest) along the axis, NaN ranking above every number, equal values
/// in index order.
fn topk(t: &Topk, inputs: &TVec<TValue>) -> TractResult<TVec<TValue>> {
    let v = inputs[0].to_plain_array_view::<f64>()?;
    let k = inputs[1].cast_to_scalar::<i64>()?;
    let n = v.shape()[t.axis];
    anyhow::ensure!(
        (0..=n as i64).contains(&k),
        "the model is invalid: TopK's k = {k} is outside 0..={n}, the length of axis {}",
        t.axis
    );
    let k = k as usize;
    let mut shape = v.shape().to_vec();
    shape[t.axis] = k;
    let mut values = ArrayD::<f64>::zeros(IxDyn(&shape));
    let mut indices = ArrayD::<i64>::zeros(IxDyn(&shape));
    let lanes = v.lanes(Axis(t.axis)).into_iter();
    let outs = values.lanes_mut(Axis(t.axis)).into_iter();
    for ((lane, mut vals), mut idx) in lanes.zip(outs).zip(indices.lanes_mut(Axis(t.axis))) {
        let order = sorted(&lane, t.largest);
        for (j, &i) in order.iter().take(k).enumerate() {
            vals[j] = lane[i];
            idx[j] = i as i64;
        }
    }
    Ok(tvec!(values.into_tvalue(), indices.into_tvalue()))
}

/// The indices of `lane` by value, largest first when `largest`; a stable sort, so equal values keep index order.
fn sorted(lane: &ArrayView1<f64>, largest: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..lane.len()).collect();
    order.sort_by(|&i, &j| {
        let o = rank(lane[i], lane[j]);
        if largest {
            o.reverse()
        } else {
            o
        }
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAN: f64 = f64::NAN;

    #[test]
    fn max_and_min_propagate_nan() {
        assert!(max(NAN, 1.0).is_nan() && max(1.0, NAN).is_nan());
        assert!(min(NAN, 1.0).is_nan() && min(1.0, NAN).is_nan());
        assert_eq!((max(-2.0, 0.0), min(-2.0, 0.0)), (0.0, -2.0));
        assert_eq!(max(f64::NEG_INFINITY, -1e308), -1e308);
    }

    fn argmax(row: &[f64], largest: bool, last: bool) -> i64 {
        let x = tensor1(row).into_tvalue();
        let out = arg(&x, 0, largest, last).unwrap();
        out[0].cast_to_scalar::<i64>().unwrap()
    }

    /// numpy's argmax and argmin: the first NaN wins both; otherwise the first (or last) extremum.
    #[test]
    fn arg_ranks_nan_above_numbers() {
        assert_eq!(
            argmax(&[1.0, NAN, f64::NEG_INFINITY, f64::INFINITY], true, false),
            1
        );
        assert_eq!(argmax(&[1.0, NAN, f64::NEG_INFINITY, NAN], false, false), 1);
        assert_eq!(argmax(&[1.0, NAN, 0.0, NAN], true, true), 3);
        assert_eq!(argmax(&[3.0, 1.0, 3.0], true, false), 0);
        assert_eq!(argmax(&[3.0, 1.0, 3.0], true, true), 2);
        assert_eq!(argmax(&[3.0, 1.0, 1.0], false, true), 2);
    }

    #[test]
    fn sort_order_puts_nan_first_when_largest() {
        let lane = tract_ndarray::arr1(&[1.0, NAN, f64::NEG_INFINITY, f64::INFINITY, 1.0]);
        assert_eq!(sorted(&lane.view(), true), vec![1, 3, 0, 4, 2]);
        assert_eq!(sorted(&lane.view(), false), vec![2, 0, 4, 3, 1]);
    }
}
