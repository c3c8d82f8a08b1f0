//! Discrete decisions made inside a node, by comparing its input with the thresholds it stores: a tree ensemble
//! (`TreeEnsembleClassifier`, `TreeEnsembleRegressor`, opset 5's `TreeEnsemble`) walks each tree by `feature ≤
//! threshold`. A feature computed upstream (a `Scaler` in float32 on the target, in float64 in the reference) that lies
//! within its noise of a threshold takes either branch, and the label flips. The target never exposes its branches, but
//! it does expose the features it compared: where the target's feature lies within the reference's noise of the
//! reference's own, the reference walks the trees with the target's, so it takes the target's branch at every threshold
//! the two lie on either side of and the same branch everywhere else. Rows whose output changes are counted as flips;
//! rows the target's features would change further, from features beyond the noise, are `beyond` (kept, and compared).

use tract_onnx::prelude::*;

use super::decide::{f64s, radius, shaped_like, Adopted, Decisions};

/// ONNX ops that decide by comparing their first input with stored thresholds. The decision recorded for them (by
/// their first output's name) holds the target's first *input*: the features it compared.
pub const OPS: &[&str] = &[
    "TreeEnsembleClassifier",
    "TreeEnsembleRegressor",
    "TreeEnsemble",
];

/// Fractions of the noise, in turn, that say how far the features taken lay from the reference's own.
const LADDER: [f64; 3] = [1.0 / 1024.0, 1.0 / 32.0, 1.0];

/// Elements of the decided output (slot `slot`) that differ between two runs, counted per row.
fn changed_rows(a: &TVec<TValue>, b: &TVec<TValue>, slot: usize) -> Option<u64> {
    let (x, y) = (f64s(a.get(slot)?)?, f64s(b.get(slot)?)?);
    if x.len() != y.len() {
        return None;
    }
    let rows = a.get(slot)?.shape().first().copied().unwrap_or(1).max(1);
    let width = x.len() / rows;
    let differ = |r: usize| (0..width).any(|k| x[r * width + k] != y[r * width + k]);
    Some((0..rows).filter(|&r| differ(r)).count() as u64)
}

/// Takes the target's features where they lie within the reference's noise, reruns the node (`run`) on them and
/// replaces `out`; returns what each output (`names`: slot and name) took.
pub fn adopt(
    d: &Decisions,
    names: &[(usize, String)],
    ins: &TVec<TValue>,
    out: &mut TVec<TValue>,
    mut run: impl FnMut(TVec<TValue>) -> TractResult<TVec<TValue>>,
) -> Vec<(String, Adopted)> {
    let Some(dec) = names.iter().find_map(|(_, n)| d.get(n)) else {
        return vec![];
    };
    let (Some(x0), Some(theirs)) = (ins.first(), dec.theirs()) else {
        return vec![];
    };
    let Some(x) = f64s(x0).filter(|x| x.len() == theirs.len()) else {
        return vec![];
    };
    let theirs: Vec<f64> = theirs.iter().copied().collect();
    let r = radius(&x, dec.noise_atol(), dec.rtol);
    let mut far = 0.0f64;
    let taken: Vec<f64> = (0..x.len())
        .map(|i| match (theirs[i] - x[i]).abs() {
            gap if gap > 0.0 && gap <= r[i] => {
                far = far.max(gap / r[i]);
                theirs[i]
            }
            _ => x[i],
        })
        .collect();
    if theirs == x {
        return names
            .iter()
            .map(|(_, n)| (n.clone(), Adopted::default()))
            .collect();
    }
    let rerun = |v: Vec<f64>, run: &mut dyn FnMut(TVec<TValue>) -> TractResult<TVec<TValue>>| {
        let mut moved = ins.clone();
        moved[0] = shaped_like(x0, v).ok()?;
        run(moved).ok()
    };
    let ours = match taken == x {
        true => Some(out.clone()),
        false => rerun(taken, &mut run),
    };
    let (Some(ours), Some(all)) = (ours, rerun(theirs, &mut run)) else {
        return vec![];
    };
    // Every output follows the branches taken (a classifier's scores with its label): each says what it took.
    let found: Vec<(String, Adopted)> = (names.iter())
        .map(|(s, n)| {
            let flips = changed_rows(out, &ours, *s).unwrap_or(0);
            let a = Adopted {
                flips,
                beyond: changed_rows(&ours, &all, *s).unwrap_or(0),
                within: match flips {
                    0 => 0.0,
                    _ => LADDER.into_iter().find(|&l| far <= l).unwrap_or(1.0),
                },
                undefined: 0,
                faithful: 0,
            };
            (n.clone(), a)
        })
        .collect();
    if found.iter().any(|(_, a)| a.flips > 0) {
        *out = ours;
    }
    found
}
