//! A `NonMaxSuppression` the reference computes in f64 on its own inputs, reconciled with the target's selection.
//! Scores that are equal in float32 (a detector's head often gives many anchors one score) differ in f64 by less
//! than their noise, so the two runs may visit tied boxes in another order and keep other boxes, or another number
//! of them. The target's selection is a choice the reference could have made when every one of its choices that
//! the f64 inputs do not make by themselves lies within the inputs' noise: a kept box's score against the score
//! threshold and against the box kept before it, its IoU with the boxes kept before it against the IoU threshold,
//! and for each box left out, a kept box that may precede it and overlaps it past the threshold (or the limit of
//! boxes per class). Then the reference takes it and counts the boxes that differ ([`Adopted::flips`]); otherwise
//! the choices beyond noise are counted ([`Adopted::beyond`]) and the reference's own selection is the one
//! compared.

use tract_onnx::prelude::tract_ndarray::{s, ArrayView2, Axis};
use tract_onnx::prelude::*;

use super::nms::{corners, inputs, iou, limits, selected};
use super::node::Node;
use crate::reference::decide::Adopted;
use crate::reference::select::rms_of as rms;

/// The noise of the inputs: `atol` + `rtol` · max(|v|, RMS) for a score, and with `box_atol` (the noise measured
/// on the boxes, when larger) for a box coordinate.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub atol: f64,
    pub rtol: f64,
    pub box_atol: f64,
}

/// The target's selection `theirs` ((batch, class, box) rows, in the order kept) checked against node `n` run on
/// the reference's inputs `ins` (by ONNX slot), and the reference's own selection. Where the noise explains every
/// choice, `flips` counts the rows that differ from the reference's own; otherwise `beyond` counts the target's
/// choices it does not explain (and nothing is taken).
pub fn settle(
    n: &Node,
    ins: &[Option<&Tensor>],
    theirs: &[[i64; 3]],
    w: Window,
) -> TractResult<(Adopted, Vec<[i64; 3]>)> {
    let (boxes, scores) = inputs(n, ins)?;
    let ours = selected(n, ins)?;
    let lim = limits(ins)?;
    let center = n.int("center_point_box", 0) == 1;
    let (nb, classes, nboxes) = scores.dim();
    let in_range = |r: &[i64; 3]| {
        (r[0] as usize) < nb && (r[1] as usize) < classes && (r[2] as usize) < nboxes
    };
    let mut tally = Tally::default();
    tally.beyond += theirs
        .iter()
        .filter(|r| r.iter().any(|&v| v < 0) || !in_range(r))
        .count() as u64;
    let (box_rms, score_rms) = (rms(boxes.iter()), rms(scores.iter()));
    for b in 0..nb {
        let bx = boxes.index_axis(Axis(0), b);
        for c in 0..classes {
            let kept: Vec<usize> = (theirs.iter())
                .filter(|r| r[0] == b as i64 && r[1] == c as i64 && in_range(r))
                .map(|r| r[2] as usize)
                .collect();
            let sc: Vec<f64> = scores.slice(s![b, c, ..]).to_vec();
            let g = Group {
                boxes: bx,
                scores: &sc,
                center,
                lim,
                w,
                box_rms,
                score_rms,
            };
            g.check(&kept, &mut tally);
        }
    }
    let differ = ours.iter().filter(|r| !theirs.contains(r)).count()
        + theirs.iter().filter(|r| !ours.contains(r)).count();
    let a = Adopted {
        flips: if tally.beyond == 0 { differ as u64 } else { 0 },
        beyond: tally.beyond,
        within: crate::reference::select::rung(tally.need).unwrap_or(1.0),
        ..Default::default()
    };
    Ok((a, ours))
}

/// The checks' findings: choices beyond noise, and the largest fraction of its noise a choice within it needed.
#[derive(Default)]
struct Tally {
    beyond: u64,
    need: f64,
}

impl Tally {
    /// Whether a choice that misses by `excess` (none where ≤ 0) lies within `noise`; counted beyond otherwise.
    fn within(&mut self, excess: f64, noise: f64) -> bool {
        let f = fraction(excess, noise);
        match f <= 1.0 {
            true => self.need = self.need.max(f),
            false => self.beyond += 1,
        }
        f <= 1.0
    }
}

/// `excess` as a fraction of `noise`: 0 where it is no excess, infinite where there is no noise to cover it.
fn fraction(excess: f64, noise: f64) -> f64 {
    match (excess > 0.0, noise > 0.0) {
        (false, _) => 0.0,
        (true, true) => excess / noise,
        (true, false) => f64::INFINITY,
    }
}

/// One batch and class of the reference's inputs.
struct Group<'a> {
    boxes: ArrayView2<'a, f64>,
    scores: &'a [f64],
    center: bool,
    lim: (usize, f64, Option<f64>),
    w: Window,
    box_rms: f64,
    score_rms: f64,
}

impl Group<'_> {
    /// Checks the target's `kept` boxes of this group, in the order kept.
    fn check(&self, kept: &[usize], t: &mut Tally) {
        let (max, thr, st) = self.lim;
        let mut seen = std::collections::HashSet::new();
        t.beyond += kept.iter().filter(|&&k| !seen.insert(k)).count() as u64;
        t.beyond += kept.len().saturating_sub(max) as u64;
        for (j, &k) in kept.iter().enumerate() {
            let s = self.scores[k];
            if let Some(st) = st {
                t.within(st - s, self.score_noise(s));
            }
            if let Some(&prev) = j.checked_sub(1).and_then(|p| kept.get(p)) {
                t.within(s - self.scores[prev], self.score_noise(s));
            }
            for &p in &kept[..j] {
                let v = self.iou(k, p);
                t.within(v - thr, self.iou_noise(k, p));
            }
        }
        let full = kept.len() >= max;
        for i in (0..self.scores.len()).filter(|i| !seen.contains(i)) {
            let s = self.scores[i];
            let ns = self.score_noise(s);
            let below = |bar: f64| fraction(s - bar, ns);
            let mut need = st.map_or(f64::INFINITY, below);
            if full {
                need = need.min(kept.last().map_or(0.0, |&l| below(self.scores[l])));
            }
            need = need.min(self.suppressed_by(i, kept, thr));
            t.within(need, 1.0);
        }
    }

    /// The least fraction of the noise that lets a box of `kept` precede box `i` and suppress it.
    fn suppressed_by(&self, i: usize, kept: &[usize], thr: f64) -> f64 {
        let s = self.scores[i];
        let ns = self.score_noise(s);
        (kept.iter())
            .map(|&k| {
                let first = fraction(s - self.scores[k], ns);
                let over = fraction(thr - self.iou(i, k), self.iou_noise(i, k));
                first.max(over)
            })
            .fold(f64::INFINITY, f64::min)
    }

    fn score_noise(&self, s: f64) -> f64 {
        self.w.atol + self.w.rtol * s.abs().max(self.score_rms)
    }

    fn row(&self, i: usize) -> &[f64] {
        self.boxes.row(i).to_slice().expect("standard layout")
    }

    /// The IoU of boxes `a` and `b` (0 where they do not overlap).
    fn iou(&self, a: usize, b: usize) -> f64 {
        iou(self.row(a), self.row(b), self.center).unwrap_or(0.0)
    }

    /// How far the IoU of boxes `a` and `b` may move when each corner moves by its noise.
    fn iou_noise(&self, a: usize, b: usize) -> f64 {
        let (ra, rb) = (self.row(a), self.row(b));
        let big = |r: &[f64]| r.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let d =
            self.w.box_atol.max(self.w.atol) + self.w.rtol * big(ra).max(big(rb)).max(self.box_rms);
        let v = iou(ra, rb, self.center).unwrap_or(0.0);
        let (lo, hi) = iou_bounds(corners(ra, self.center), corners(rb, self.center), d);
        (hi - v).max(v - lo)
    }
}

/// The least and greatest IoU of two boxes given by their corners when each corner moves by up to `d`.
fn iou_bounds(a: (f64, f64, f64, f64), b: (f64, f64, f64, f64), d: f64) -> (f64, f64) {
    let side = |lo: f64, hi: f64| (hi - lo).max(0.0);
    let (iw, ih) = (
        side(a.0.max(b.0), a.2.min(b.2)),
        side(a.1.max(b.1), a.3.min(b.3)),
    );
    let (aw, ah, bw, bh) = (
        side(a.0, a.2),
        side(a.1, a.3),
        side(b.0, b.2),
        side(b.1, b.3),
    );
    let shrunk = |w: f64, h: f64| (w - 2.0 * d).max(0.0) * (h - 2.0 * d).max(0.0);
    let grown = |w: f64, h: f64| (w + 2.0 * d) * (h + 2.0 * d);
    let (i_lo, i_hi) = (
        shrunk(iw, ih),
        grown(iw, ih).min(grown(aw, ah)).min(grown(bw, bh)),
    );
    let (a_lo, b_lo) = (shrunk(aw, ah), shrunk(bw, bh));
    let u_lo = (a_lo + b_lo - i_hi).max(a_lo.max(b_lo));
    let hi = match u_lo > 0.0 {
        true => (i_hi / u_lo).min(1.0),
        false => 1.0,
    };
    let u_hi = grown(aw, ah) + grown(bw, bh) - i_lo;
    let lo = match u_hi > 0.0 {
        true => i_lo / u_hi,
        false => 0.0,
    };
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::NodeProto;
    use tract_onnx::prelude::tract_ndarray::{arr1, Array3};

    fn node() -> Node {
        Node::new(&NodeProto {
            op_type: "NonMaxSuppression".into(),
            ..Default::default()
        })
    }

    /// Boxes 0 and 1 overlap (IoU 0.81); box 2 is apart. Scores of boxes 0 and 1 as given.
    fn settled(s0: f64, s1: f64, theirs: &[[i64; 3]]) -> Adopted {
        let boxes = Array3::from_shape_vec(
            (1, 3, 4),
            vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 0.0, 10.0, 1.0, 11.0],
        )
        .unwrap()
        .into_tensor();
        let scores = Array3::from_shape_vec((1, 1, 3), vec![s0, s1, 0.5])
            .unwrap()
            .into_tensor();
        let (max, iou) = (arr1(&[10i64]).into_tensor(), arr1(&[0.5f64]).into_tensor());
        let ins = [Some(&boxes), Some(&scores), Some(&max), Some(&iou)];
        let w = Window {
            atol: 0.0,
            rtol: 64.0 * f32::EPSILON as f64 / 2.0,
            box_atol: 0.0,
        };
        settle(&node(), &ins, theirs, w).unwrap().0
    }

    #[test]
    fn a_tie_the_target_broke_the_other_way_is_taken_and_a_clear_choice_is_not() {
        // Within noise of each other: the target kept box 1 first, the reference box 0.
        let a = settled(0.9 + 1e-9, 0.9, &[[0, 0, 1], [0, 0, 2]]);
        assert_eq!((a.flips, a.beyond), (2, 0));
        assert_eq!(a.within, 1.0 / 1024.0);
        // Exactly what the reference keeps: nothing to take.
        let a = settled(0.9, 0.8, &[[0, 0, 0], [0, 0, 2]]);
        assert_eq!((a.flips, a.beyond), (0, 0));
        // 0.9 against 0.8 is no tie: keeping box 1 is beyond noise.
        let a = settled(0.9, 0.8, &[[0, 0, 1], [0, 0, 2]]);
        assert!(a.beyond > 0, "{a:?}");
        // Keeping both overlapping boxes breaks the IoU threshold by far.
        let a = settled(0.9, 0.8, &[[0, 0, 0], [0, 0, 1], [0, 0, 2]]);
        assert!(a.beyond > 0, "{a:?}");
        // Leaving out the lone box 2 is no choice NMS could make.
        let a = settled(0.9, 0.8, &[[0, 0, 0]]);
        assert_eq!(a.beyond, 1);
    }

    #[test]
    fn iou_bounds_hold_the_iou_and_close_in_with_the_noise() {
        let (a, b) = ((0.0, 0.0, 1.0, 1.0), (0.0, 0.1, 1.0, 1.1));
        let v = 0.9 / 1.1;
        let (lo, hi) = iou_bounds(a, b, 1e-6);
        assert!(lo < v && v < hi && hi - lo < 1e-4, "{lo} {v} {hi}");
        let (lo, hi) = iou_bounds(a, b, 0.0);
        assert!(
            (lo - v).abs() < 1e-12 && (hi - v).abs() < 1e-12,
            "{lo} {v} {hi}"
        );
    }
}
