//! Discrete decisions that select rather than round ([`super::decide`] has those): `ArgMax`/`ArgMin` indices,
//! `TopK`'s indices, and float comparisons (`Less`, `Greater`, `LessOrEqual`, `GreaterOrEqual`: the masks that
//! feed `Where`). The target's choice differs from the reference's at an element where the values it chose between
//! lie within their noise of each other (two near-equal scores, a comparison of near-equal operands): there the
//! reference takes the target's choice, so everything downstream (an embedding row gathered by the index, the
//! branch a mask selects) is compared like for like, and counts it. Where the chosen values are further apart than
//! their noise, the reference keeps its own choice: a fault that moves a score or an operand is still caught.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::ndarray::{ArrayD, Axis, IxDyn};

use super::decide::{Adopted, Decision};

/// ONNX ops whose decision is a selection among their inputs' values.
pub const OPS: &[&str] = &[
    "ArgMax",
    "ArgMin",
    "TopK",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
];

/// Fractions of the noise, in turn, that say how close the chosen values lay (as [`Adopted::within`]).
const LADDER: [f64; 3] = [1.0 / 1024.0, 1.0 / 32.0, 1.0];

/// The rung of [`LADDER`] a choice that needed fraction `f` of the noise reaches (None beyond the last).
pub fn rung(f: f64) -> Option<f64> {
    LADDER.into_iter().find(|&l| f <= l)
}

/// The output of `op` that is its decision: TopK's indices are its second.
pub fn decided_output(op: &str) -> usize {
    usize::from(op == "TopK")
}

/// Reconciles `ours` with `theirs`: at each element that differs, `need(i)` is the fraction of the noise by which
/// the values chosen between differ (None: the target's choice is not one the reference could make). Returns the
/// reconciled decisions and what was adopted (nothing, where nothing differs).
pub fn settle(
    ours: &[f64],
    theirs: &[f64],
    need: impl Fn(usize) -> Option<f64>,
) -> Option<(Vec<f64>, Adopted)> {
    let differ = (0..ours.len()).filter(|&i| ours[i] != theirs[i]);
    let mut out = ours.to_vec();
    let mut a = Adopted::default();
    for i in differ {
        match need(i).and_then(rung) {
            Some(l) => {
                out[i] = theirs[i];
                a.flips += 1;
                a.within = a.within.max(l);
            }
            None => a.beyond += 1,
        }
    }
    Some((out, a))
}

/// The noise of a value of magnitude `v` in a tensor of RMS `rms` (as [`super::decide::radius`]).
fn noise(d: &Decision, v: f64, rms: f64) -> f64 {
    d.noise_atol() + d.rtol * v.abs().max(rms)
}

/// The RMS of the finite elements of `x`.
fn rms(x: &ArrayD<f64>) -> f64 {
    rms_of(x.iter())
}

/// The RMS of the finite values of `v`.
pub fn rms_of<'a>(v: impl Iterator<Item = &'a f64>) -> f64 {
    let (s, n) = (v.filter(|x| x.is_finite())).fold((0.0, 0usize), |(s, n), x| (s + x * x, n + 1));
    if n == 0 {
        0.0
    } else {
        (s / n as f64).sqrt()
    }
}

/// How far apart two values are, in their noise (None where either is NaN).
fn apart(d: &Decision, a: f64, b: f64, rms: f64) -> Option<f64> {
    if a.is_nan() || b.is_nan() {
        return None;
    }
    if a == b {
        return Some(0.0);
    }
    let r = noise(d, a, rms).max(noise(d, b, rms));
    Some((a - b).abs() / r)
}

/// `ArgMax`/`ArgMin` along `axis` of `x`: the reference's indices `ours` (one per lane of `x` along the axis, in
/// row-major order) reconciled with the target's.
pub fn indices(
    d: &Decision,
    x: &ArrayD<f64>,
    axis: usize,
    ours: &[f64],
) -> Option<(Vec<f64>, Adopted)> {
    let theirs: Vec<f64> = d.theirs()?.iter().copied().collect();
    let lanes: Vec<_> = x.lanes(Axis(axis)).into_iter().collect();
    if lanes.len() != ours.len() || theirs.len() != ours.len() {
        return None;
    }
    let s = rms(x);
    settle(ours, &theirs, |i| {
        let lane = &lanes[i];
        let at = |k: f64| (k >= 0.0).then(|| lane.get(k as usize).copied()).flatten();
        apart(d, at(ours[i])?, at(theirs[i])?, s)
    })
}

/// `TopK` along `axis` of `x`: the reference's `values` and `idx` reconciled with the target's indices. Where a
/// position takes the target's index, its value becomes the reference's own value at that index.
pub fn top_k(
    d: &Decision,
    x: &ArrayD<f64>,
    axis: usize,
    values: &mut ArrayD<f64>,
    idx: &ArrayD<f64>,
) -> Option<(ArrayD<f64>, Adopted)> {
    let theirs = d.theirs()?;
    if theirs.shape() != idx.shape() || values.shape() != idx.shape() || axis >= x.ndim() {
        return None;
    }
    let (ours, flat_theirs): (Vec<f64>, Vec<f64>) = (
        idx.iter().copied().collect(),
        theirs.iter().copied().collect(),
    );
    let s = rms(x);
    // Element i of the indices (row-major) lies in lane `lane_of(i)` of x along the axis.
    let strides = strides_of(idx.shape());
    let lane_at = |i: usize| -> Option<f64> { lane_value(x, axis, &strides, i, flat_theirs[i]) };
    let ours_at = |i: usize| -> Option<f64> { lane_value(x, axis, &strides, i, ours[i]) };
    let (taken, a) = settle(&ours, &flat_theirs, |i| {
        apart(d, ours_at(i)?, lane_at(i)?, s)
    })?;
    for (i, (v, t)) in values.iter_mut().zip(&taken).enumerate() {
        if *t != ours[i] {
            *v = lane_value(x, axis, &strides, i, *t).unwrap_or(*v);
        }
    }
    let taken = ArrayD::from_shape_vec(idx.raw_dim(), taken).ok()?;
    Some((taken, a))
}

/// Row-major strides of `shape`, for locating an element's coordinates.
fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for j in (0..shape.len().saturating_sub(1)).rev() {
        s[j] = s[j + 1] * shape[j + 1];
    }
    s
}

/// The value of `x` at index `k` along `axis`, in the lane holding element `i` of an array of row-major strides
/// `strides` (x's shape but for the axis).
fn lane_value(x: &ArrayD<f64>, axis: usize, strides: &[usize], i: usize, k: f64) -> Option<f64> {
    if k < 0.0 || k as usize >= x.shape()[axis] {
        return None;
    }
    let mut rest = i;
    let mut at: Vec<usize> = strides
        .iter()
        .map(|s| {
            let c = rest / s;
            rest %= s;
            c
        })
        .collect();
    at[axis] = k as usize;
    x.get(IxDyn(&at)).copied()
}

/// A float comparison of `a` and `b` (broadcast to the output's shape `shape`) reconciled with the target's mask.
pub fn compare(
    d: &Decision,
    a: &ArrayD<f64>,
    b: &ArrayD<f64>,
    ours: &[f64],
    shape: &[usize],
) -> Option<(Vec<f64>, Adopted)> {
    let (a, b) = (a.broadcast(shape)?, b.broadcast(shape)?);
    let theirs: Vec<f64> = d.theirs()?.iter().copied().collect();
    if theirs.len() != ours.len() || a.len() != ours.len() {
        return None;
    }
    let (av, bv): (Vec<f64>, Vec<f64>) = (a.iter().copied().collect(), b.iter().copied().collect());
    let s = rms(&a.to_owned()).max(rms(&b.to_owned()));
    settle(ours, &theirs, |i| apart(d, av[i], bv[i], s))
}

/// A tract value as an f64 array (None when it is not numeric).
pub fn array(v: &TValue) -> Option<ArrayD<f64>> {
    let t = v.cast_to::<f64>().ok()?;
    Some(t.to_plain_array_view::<f64>().ok()?.to_owned())
}

/// A selection the reference may reconcile with the target's: its op, the axis it selects along (ArgMax, ArgMin,
/// TopK), and its ONNX inputs and outputs.
#[derive(Clone, Debug)]
pub struct Selection {
    pub op: String,
    pub axis: i64,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

/// The selections of `proto` whose decision the target made (`d`), by the decided value's name.
pub fn selections(
    proto: &tract_onnx::pb::ModelProto,
    d: &super::decide::Decisions,
) -> std::collections::HashMap<String, Selection> {
    let Some(g) = proto.graph.as_ref() else {
        return Default::default();
    };
    g.node
        .iter()
        .filter(|n| OPS.contains(&n.op_type.as_str()) && n.domain.is_empty())
        .filter_map(|n| {
            let decided = n.output.get(decided_output(&n.op_type))?;
            d.contains_key(decided).then_some(())?;
            let default = if n.op_type == "TopK" { -1 } else { 0 };
            let axis = (n.attribute.iter().find(|a| a.name == "axis")).map_or(default, |a| a.i);
            let s = Selection {
                op: n.op_type.clone(),
                axis,
                inputs: n.input.clone(),
                outputs: n.output.clone(),
            };
            Some((decided.clone(), s))
        })
        .collect()
}

/// `axis` of a tensor of rank `rank`, made non-negative.
pub fn axis_of(axis: i64, rank: usize) -> Option<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    (0..rank as i64).contains(&a).then_some(a as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(v: Vec<f64>, shape: &[usize]) -> Decision {
        let target = super::super::decide::Kept::Memory(std::sync::Arc::new(
            crate::tensor::Tensor::F64(ArrayD::from_shape_vec(shape.to_vec(), v).unwrap()),
        ));
        Decision::new(target, 0.0, 64.0 * f32::EPSILON as f64 / 2.0)
    }

    #[test]
    fn an_argmax_between_near_equal_scores_is_adopted_and_a_clear_one_is_kept() {
        // Row 0: 1.0 and 1.0 + 1e-9 are within noise: the target's 0 is taken. Row 1: 2.0 against 1.0 is a real
        // difference: the target's 1 is kept apart as beyond.
        let x = ArrayD::from_shape_vec(vec![2, 2], vec![1.0, 1.0 + 1e-9, 1.0, 2.0]).unwrap();
        let ours = [1.0, 1.0];
        let d = decision(vec![0.0, 0.0], &[2]);
        let (taken, a) = indices(&d, &x, 1, &ours).unwrap();
        assert_eq!(taken, vec![0.0, 1.0]);
        assert_eq!((a.flips, a.beyond), (1, 1));
    }

    #[test]
    fn a_mask_between_near_equal_operands_is_adopted() {
        let a = ArrayD::from_shape_vec(vec![3], vec![1.0, 2.0, 3.0]).unwrap();
        let b = ArrayD::from_shape_vec(vec![3], vec![1.0 - 1e-12, 1.0, 3.5]).unwrap();
        // Greater: ours [true, true, false]; the target said [false, true, true].
        let d = decision(vec![0.0, 1.0, 1.0], &[3]);
        let (taken, a) = compare(&d, &a, &b, &[1.0, 1.0, 0.0], &[3]).unwrap();
        assert_eq!(taken, vec![0.0, 1.0, 0.0]);
        assert_eq!((a.flips, a.beyond), (1, 1));
    }

    #[test]
    fn top_k_takes_the_target_s_order_of_a_tie_and_its_values() {
        let x = ArrayD::from_shape_vec(vec![1, 3], vec![5.0, 5.0 + 1e-10, 1.0]).unwrap();
        let idx = ArrayD::from_shape_vec(vec![1, 2], vec![1.0, 0.0]).unwrap();
        let mut values = ArrayD::from_shape_vec(vec![1, 2], vec![5.0 + 1e-10, 5.0]).unwrap();
        let d = decision(vec![0.0, 1.0], &[1, 2]);
        let (taken, a) = top_k(&d, &x, 1, &mut values, &idx).unwrap();
        assert_eq!(taken.iter().copied().collect::<Vec<_>>(), vec![0.0, 1.0]);
        assert_eq!(
            values.iter().copied().collect::<Vec<_>>(),
            vec![5.0, 5.0 + 1e-10]
        );
        assert_eq!(a.flips, 2);
    }
}
