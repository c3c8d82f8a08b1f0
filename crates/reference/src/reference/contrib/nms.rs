//! ONNX's `NonMaxSuppression` for the reference, as the spec and its reference implementation define it: per batch
//! and class, the boxes scoring above `score_threshold` taken by descending score (ties by ascending index), each
//! kept unless its IoU with a kept box exceeds `iou_threshold`, at most `max_output_boxes_per_class` of them;
//! corners in either order (`center_point_box` 0) or centre and size (1). Coordinates and IoU in f64.
//!
//! The output's length is the number of boxes kept, so typing needs every input's value: it is known when the
//! inputs are constants or graph inputs the run gives (the conformance suite's cases). Where the boxes are computed
//! by the model (a detector's head), tract cannot type the node: it stands in with the target's shapes and this
//! kernel runs on the run's inputs, its selection reconciled with the target's ([`super::nms_settle`]).

use tract_onnx::prelude::tract_ndarray::{Array2, Array3, ArrayView2, Axis, Ix3};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::opt;

/// Claimed in any domain: tract has no NonMaxSuppression.
pub(super) const TABLE: &[Row] = &[Row::any_domain("NonMaxSuppression", &Nms)];

struct Nms;

/// The thresholds and limit: (max boxes per class, IoU threshold, score threshold if given).
pub(super) fn limits(ins: &[Option<&Tensor>]) -> TractResult<(usize, f64, Option<f64>)> {
    let first = |slot: usize| -> TractResult<Option<f64>> {
        match ins.get(slot).copied().flatten() {
            Some(t) if t.len() > 0 => {
                let v = t.cast_to::<f64>()?;
                Ok(v.to_plain_array_view::<f64>()?.iter().next().copied())
            }
            _ => Ok(None),
        }
    };
    let max = first(2)?.unwrap_or(0.0).max(0.0) as usize;
    Ok((max, first(3)?.unwrap_or(0.0), first(4)?))
}

/// (x_min, y_min, x_max, y_max) of box `b`.
pub(super) fn corners(b: &[f64], center: bool) -> (f64, f64, f64, f64) {
    match center {
        true => (
            b[0] - b[2] / 2.0,
            b[1] - b[3] / 2.0,
            b[0] + b[2] / 2.0,
            b[1] + b[3] / 2.0,
        ),
        false => (
            b[1].min(b[3]),
            b[0].min(b[2]),
            b[1].max(b[3]),
            b[0].max(b[2]),
        ),
    }
}

/// The IoU of boxes `a` and `b`; None where they do not overlap or either is degenerate (never suppressed).
pub(super) fn iou(a: &[f64], b: &[f64], center: bool) -> Option<f64> {
    let (ax0, ay0, ax1, ay1) = corners(a, center);
    let (bx0, by0, bx1, by1) = corners(b, center);
    let (ix0, iy0, ix1, iy1) = (ax0.max(bx0), ay0.max(by0), ax1.min(bx1), ay1.min(by1));
    if ix1 <= ix0 || iy1 <= iy0 {
        return None;
    }
    let inter = (ix1 - ix0) * (iy1 - iy0);
    let (area_a, area_b) = ((ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0));
    let union = area_a + area_b - inter;
    if area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return None;
    }
    Some(inter / union)
}

/// Whether box `a` is suppressed by kept box `b`: their IoU exceeds `threshold` (degenerate boxes never are).
fn suppressed(a: &[f64], b: &[f64], center: bool, threshold: f64) -> bool {
    iou(a, b, center).is_some_and(|v| v > threshold)
}

/// The kept boxes of one batch and class, in the order they are kept.
fn select(
    boxes: ArrayView2<f64>,
    scores: &[f64],
    center: bool,
    lim: (usize, f64, Option<f64>),
) -> Vec<usize> {
    let (max, iou, score) = lim;
    let mut order: Vec<usize> = (0..scores.len())
        .filter(|&i| score.is_none_or(|s| scores[i] > s))
        .collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut kept: Vec<usize> = vec![];
    for i in order {
        if kept.len() >= max {
            break;
        }
        let row = boxes.row(i);
        let a = row.as_slice().expect("standard layout");
        if !kept.iter().any(|&k| {
            suppressed(
                a,
                boxes.row(k).as_slice().expect("standard layout"),
                center,
                iou,
            )
        }) {
            kept.push(i);
        }
    }
    kept
}

/// The boxes ([B, N, 4]) and scores ([B, C, N]) in f64, checked against each other.
pub(super) fn inputs(n: &Node, ins: &[Option<&Tensor>]) -> TractResult<(Array3<f64>, Array3<f64>)> {
    let three = |slot: usize| -> TractResult<Array3<f64>> {
        let t = opt(n, ins, slot)?.cast_to::<f64>()?.into_owned();
        Ok(t.to_plain_array_view::<f64>()?
            .into_dimensionality::<Ix3>()?
            .to_owned())
    };
    let (boxes, scores) = (three(0)?, three(1)?);
    let (nb, nboxes, four) = boxes.dim();
    let (sb, _, sn) = scores.dim();
    anyhow::ensure!(
        four == 4 && sb == nb && sn == nboxes,
        "NonMaxSuppression `{}`: boxes {:?} and scores {:?} do not match ([B, N, 4] and [B, C, N])",
        n.proto.name,
        boxes.dim(),
        scores.dim()
    );
    Ok((boxes, scores))
}

/// Every selected (batch, class, box) triple.
pub(super) fn selected(n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<[i64; 3]>> {
    let (boxes, scores) = inputs(n, ins)?;
    let (lim, center) = (limits(ins)?, n.int("center_point_box", 0) == 1);
    let mut out = vec![];
    for b in 0..boxes.dim().0 {
        let bx = boxes.index_axis(Axis(0), b);
        for c in 0..scores.dim().1 {
            let sc: Vec<f64> = scores.slice(tract_ndarray::s![b, c, ..]).to_vec();
            for i in select(bx, &sc, center, lim) {
                out.push([b as i64, c as i64, i as i64]);
            }
        }
    }
    Ok(out)
}

impl Kernel for Nms {
    fn facts(&self, n: &Node, _ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        anyhow::bail!(
            "NonMaxSuppression `{}`: the number of boxes it keeps needs its inputs' values, which only the run \
             decides",
            n.proto.name
        )
    }

    fn value_slots(&self) -> &'static [usize] {
        &[0, 1, 2, 3, 4]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        // Every present input must be known (an absent optional one has neither fact nor value).
        let missing =
            (0..ins.len()).any(|k| ins[k].is_some() && values.get(k).copied().flatten().is_none());
        if missing {
            return self.facts(n, ins);
        }
        Ok(vec![(
            i64::datum_type(),
            vec![selected(n, values)?.len(), 3],
        )])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let rows = selected(n, ins)?;
        let flat: Vec<i64> = rows.iter().flatten().copied().collect();
        Ok(vec![Array2::from_shape_vec((rows.len(), 3), flat)?
            .into_dyn()
            .into_tensor()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::prelude::tract_ndarray::arr2;

    #[test]
    fn overlapping_boxes_keep_the_best_and_ties_the_first() {
        // Boxes 0 and 1 overlap with IoU 0.81; box 2 is apart. Box 1 scores highest.
        let boxes = arr2(&[
            [0.0, 0.0, 1.0, 1.0],
            [0.0, 0.1, 1.0, 1.1],
            [0.0, 10.0, 1.0, 11.0],
        ]);
        let kept = select(boxes.view(), &[0.9, 0.95, 0.5], false, (10, 0.5, None));
        assert_eq!(kept, [1, 2]);
        let kept = select(boxes.view(), &[0.9, 0.95, 0.5], false, (10, 0.9, None));
        assert_eq!(kept, [1, 0, 2]);
        let kept = select(boxes.view(), &[0.7, 0.7, 0.5], false, (1, 0.5, Some(0.6)));
        assert_eq!(
            kept,
            [0],
            "a tie goes to the lower index; the limit and the score threshold hold"
        );
    }
}
