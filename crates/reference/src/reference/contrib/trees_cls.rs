//! `TreeEnsembleClassifier` (`ai.onnx.ml`: random forests, extra trees, gradient boosting, as skl2onnx converts
//! them) in f64: tract computes it in f32. Written from ONNX Runtime's CPU kernel (`tree_ensemble_aggregator.h`,
//! `TreeAggregatorClassifier`), which decides what the definition leaves open, and repeated here as it is:
//! - each tree's leaf weights are summed per class (a forest's weights are already divided by its size);
//! - more than two classes: `base_values` added (a class no leaf scored starts from its base value), the label is
//!   the first class with the highest score, then the post-transform;
//! - two classes: with `base_values` of two, the second class's score becomes `base₁ + score₀` and the first its
//!   negation when the second was scored, else each class adds its own base; with one base value it goes to the
//!   first class. The label comes from the positive weight (the second class's score if it has one, else the
//!   first's): when every leaf weight names one class, above 0.5 (all weights positive) or above 0 picks the second
//!   class label, and the one score is written `[1 − s, s]`, `[−s, s]` or `[σ(−s), σ(s)]` (LOGISTIC); otherwise
//!   the label is the literal 1 or 0.
//!
//! Thresholds are the float32 values the model stores; comparisons are in f64 (see [`super::trees`]).

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::trees::{reals, Forest};
use super::util::{f64s, fact};

pub(super) const TABLE: &[Row] = &[Row::new("TreeEnsembleClassifier", &Classifier)];

/// Class labels: ints or strings, as the model names them.
fn labels(n: &Node) -> (Vec<i64>, Vec<String>) {
    super::ml::class_labels(n, "classlabels_int64s")
}

fn classes(n: &Node) -> usize {
    let (ints, strings) = labels(n);
    ints.len().max(strings.len())
}

/// How the classifier reads its weights (ORT's `binary_case_` and `weights_are_all_positive_`).
struct Shape {
    classes: usize,
    binary: bool,
    positive: bool,
    base: Vec<f64>,
    post: String,
}

/// One row's label (a value in the label space: a class label, or an index into the string labels) and scores.
type Scored = (i64, Vec<f64>);

impl Shape {
    fn of(n: &Node) -> TractResult<Shape> {
        let ids = n.ints("class_ids");
        let weights = reals(n, "class_weights")?;
        let mut named: Vec<i64> = ids.clone();
        named.sort_unstable();
        named.dedup();
        let classes = classes(n);
        Ok(Shape {
            classes,
            binary: classes == 2 && named.len() == 1,
            positive: weights.iter().all(|&w| w >= 0.0),
            base: reals(n, "base_values")?,
            post: super::ml::string_attr(n, "post_transform", "NONE"),
        })
    }

    /// The label and scores of one row from each class's summed weights (None: no leaf scored it).
    fn finish(&self, n: &Node, mut p: Vec<Option<f64>>, label_of: &[i64]) -> TractResult<Scored> {
        if self.classes > 2 {
            for (k, b) in self.base.iter().enumerate().take(p.len()) {
                p[k] = Some(p[k].unwrap_or(0.0) + b);
            }
            let best = (0..p.len())
                .filter(|&k| p[k].is_some())
                .fold(None, |m: Option<usize>, k| match m {
                    Some(m) if p[k] <= p[m] => Some(m),
                    _ => Some(k),
                })
                .ok_or_else(|| anyhow::anyhow!("{}: no tree scored any class", n.proto.name))?;
            let mut s: Vec<f64> = p.iter().map(|v| v.unwrap_or(0.0)).collect();
            super::ml::transform(n, &mut s, self.classes, &self.post)?;
            return Ok((label_of[best], s));
        }
        let mut extra = None;
        match self.base.len() {
            2 if p[1].is_some() => {
                let s1 = self.base[1] + p[0].unwrap_or(0.0);
                p[1] = Some(s1);
                p[0] = Some(-s1);
            }
            2 => {
                p[1] = p[1].map(|v| v + self.base[1]);
                p[0] = p[0].map(|v| v + self.base[0]);
            }
            1 => p[0] = p[0].map(|v| v + self.base[0]),
            _ => extra = Some(3),
        }
        if self.base.len() != 2 && p[1].is_none() {
            p.pop();
        }
        let positive = p.get(1).copied().flatten().or(p[0]).unwrap_or(0.0);
        let label = match (self.binary, self.positive) {
            (true, true) => {
                extra = Some(if positive > 0.5 { 0 } else { 1 });
                label_of[usize::from(positive > 0.5)]
            }
            (true, false) => {
                extra = Some(if positive > 0.0 { 2 } else { 3 });
                label_of[usize::from(positive > 0.0)]
            }
            (false, _) => i64::from(positive > 0.0),
        };
        let s: Vec<f64> = p.iter().map(|v| v.unwrap_or(0.0)).collect();
        Ok((label, self.write(n, s, extra)?))
    }

    /// ORT's `write_scores`: the post-transform over two scores, or one score made two by `extra`.
    fn write(&self, n: &Node, mut s: Vec<f64>, extra: Option<u8>) -> TractResult<Vec<f64>> {
        if s.len() >= 2 {
            let k = s.len();
            super::ml::transform(n, &mut s, k, &self.post)?;
            return Ok(s);
        }
        let v = s[0];
        match (extra, self.post.as_str()) {
            (_, "PROBIT") | (None, _) => anyhow::bail!(
                "{} `{}`: one score for two classes ({} post-transform) leaves ONNX Runtime's second column \
                 unwritten; the reference does not guess it",
                n.op(),
                n.proto.name,
                self.post
            ),
            (Some(0 | 1), _) => Ok(vec![1.0 - v, v]),
            (Some(_), "LOGISTIC") => Ok(vec![logistic(-v), logistic(v)]),
            (Some(_), _) => Ok(vec![-v, v]),
        }
    }
}

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

struct Classifier;

impl Kernel for Classifier {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        let rows = if shape.len() == 1 { 1 } else { shape[0] };
        let label = match labels(n).1.is_empty() {
            true => i64::datum_type(),
            false => String::datum_type(),
        };
        Ok(vec![
            (label, vec![rows]),
            (f64::datum_type(), vec![rows, classes(n)]),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let width = x.shape().last().copied().unwrap_or(1).max(1);
        let data: Vec<f64> = x.iter().copied().collect();
        let (forest, shape) = (Forest::of(n, "class")?, Shape::of(n)?);
        let (ints, strings) = labels(n);
        anyhow::ensure!(
            shape.classes >= 2,
            "{} `{}` names {} class label(s): ONNX Runtime scores a classifier of two or more",
            n.op(),
            n.proto.name,
            shape.classes
        );
        // ORT's label space: the int labels, or the string labels' indices.
        let label_of: Vec<i64> = match strings.is_empty() {
            true => ints,
            false => (0..strings.len() as i64).collect(),
        };
        let (mut out_labels, mut scores) = (vec![], vec![]);
        for row in data.chunks(width) {
            let mut p: Vec<Option<f64>> = vec![None; shape.classes];
            for &root in &forest.roots {
                for &(class, w) in &forest.leaf(root, row)?.leaf {
                    let slot = p.get_mut(class).ok_or_else(|| {
                        anyhow::anyhow!("{}: class {class} of {}", n.proto.name, shape.classes)
                    })?;
                    *slot = Some(slot.unwrap_or(0.0) + w);
                }
            }
            let (label, s) = shape.finish(n, p, &label_of)?;
            out_labels.push(label);
            scores.extend(s);
        }
        let rows = out_labels.len();
        let label = match strings.is_empty() {
            true => tensor1(&out_labels),
            false => {
                let named: Vec<String> = (out_labels.iter())
                    .map(|&k| strings.get(k as usize).cloned().unwrap_or_default())
                    .collect();
                tract_ndarray::Array1::from(named).into_tensor()
            }
        };
        Ok(vec![
            label,
            super::util::shaped(&[rows, shape.classes], scores)?,
        ])
    }
}
