//! Classic-ML ops of the `ai.onnx.ml` domain (scikit-learn pipelines converted by skl2onnx) in f64: tract has
//! some of them in f32 only, and reads a model whose attributes disagree with its input in a layout of its own.
//! Written from ONNX Runtime's CPU kernels (`providers/cpu/ml/`), which decide what the loose definitions leave
//! open: ORT computes LinearClassifier's binary scores as `[1 − s, s]` with no post-transform but PROBIT, and
//! PROBIT with its own approximate erf⁻¹ — both repeated here, in f64.
//!
//! A node whose attributes do not fit its input (a LinearClassifier with 12 coefficients for 3 classes of 2
//! features, of which ORT reads the first 6) is refused at run time with the counts: the reference marks it not
//! computed rather than pick one reading.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact};

pub(super) const TABLE: &[Row] = &[
    Row::new("LinearClassifier", &LinearClassifier),
    Row::new("LinearRegressor", &LinearRegressor),
    Row::new("Normalizer", &Normalizer),
    Row::new("Scaler", &Scaler),
];

pub(super) fn string_attr(n: &Node, name: &str, default: &str) -> String {
    n.proto
        .attribute
        .iter()
        .find(|a| a.name == name)
        .map(|a| String::from_utf8_lossy(&a.s).into_owned())
        .unwrap_or_else(|| default.to_string())
}

/// A classifier's labels: the int list `ints` names (its name differs between ops), or `classlabels_strings`.
pub(super) fn class_labels(n: &Node, ints: &str) -> (Vec<i64>, Vec<String>) {
    let strings = (n.proto.attribute.iter())
        .find(|a| a.name == "classlabels_strings")
        .map(|a| {
            (a.strings.iter())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    (n.ints(ints), strings)
}

/// (rows, features) of an input of rank 1 (one row) or 2.
fn rows(n: &Node, shape: &[usize]) -> TractResult<(usize, usize)> {
    match shape {
        [f] => Ok((1, *f)),
        [r, f] => Ok((*r, *f)),
        _ => anyhow::bail!(
            "{} `{}` takes an input of rank 1 or 2, got shape {shape:?}",
            n.op(),
            n.proto.name
        ),
    }
}

/// `x · wᵀ + b` for `x` [rows, f], `w` [targets, f] row-major, `b` [targets] (or none).
fn affine(x: &[f64], (r, f): (usize, usize), w: &[f64], b: &[f64], targets: usize) -> Vec<f64> {
    let mut out = vec![0.0; r * targets];
    for i in 0..r {
        for t in 0..targets {
            let dot: f64 = (0..f).map(|k| x[i * f + k] * w[t * f + k]).sum();
            out[i * targets + t] = dot + b.get(t).copied().unwrap_or(0.0);
        }
    }
    out
}

/// Refuses coefficients that are not `targets × features`.
fn fits(n: &Node, w: &[f64], targets: usize, features: usize) -> TractResult<()> {
    anyhow::ensure!(
        w.len() == targets * features,
        "{} has {} coefficients for {targets} target(s) × {features} input feature(s) = {}: the model does not \
         fit its input (ONNX Runtime reads the first {})",
        n.proto.name,
        w.len(),
        targets * features,
        (targets * features).min(w.len())
    );
    Ok(())
}

/// ORT's erf⁻¹ approximation (Winitzki's, a = 0.147), in f64.
fn erf_inv(x: f64) -> f64 {
    let sgn = if x < 0.0 { -1.0 } else { 1.0 };
    let ln = ((1.0 - x) * (1.0 + x)).ln();
    let v = 2.0 / (std::f64::consts::PI * 0.147) + 0.5 * ln;
    let v2 = ln / 0.147;
    sgn * (-v + (v * v - v2).sqrt()).sqrt()
}

pub(super) fn probit(x: f64) -> f64 {
    std::f64::consts::SQRT_2 * erf_inv(2.0 * x - 1.0)
}

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// ORT's post-transform of each row of `targets` scores (more than one target).
pub(super) fn transform(
    n: &Node,
    scores: &mut [f64],
    targets: usize,
    how: &str,
) -> TractResult<()> {
    for row in scores.chunks_mut(targets) {
        match how {
            "NONE" => {}
            "LOGISTIC" => row.iter_mut().for_each(|s| *s = logistic(*s)),
            "PROBIT" => row.iter_mut().for_each(|s| *s = probit(*s)),
            "SOFTMAX" | "SOFTMAX_ZERO" => softmax(row, how == "SOFTMAX_ZERO"),
            other => anyhow::bail!(
                "{} `{}`: unknown post_transform {other}",
                n.op(),
                n.proto.name
            ),
        }
    }
    Ok(())
}

/// Softmax of `row`; with `skip_zero`, elements within 1e-7 of zero stay `x·e^(−max)` and do not count (ORT's
/// SOFTMAX_ZERO).
fn softmax(row: &mut [f64], skip_zero: bool) {
    let max = row.iter().copied().fold(f64::MIN, f64::max);
    let mut sum = 0.0;
    for x in row.iter_mut() {
        if skip_zero && x.abs() <= 1e-7 {
            *x *= (-max).exp();
        } else {
            *x = (*x - max).exp();
            sum += *x;
        }
    }
    row.iter_mut().for_each(|x| *x /= sum);
}

struct LinearClassifier;

impl LinearClassifier {
    fn labels(n: &Node) -> (Vec<i64>, Vec<String>) {
        class_labels(n, "classlabels_ints")
    }

    fn targets(n: &Node) -> usize {
        n.floats("intercepts").len()
    }

    /// Columns of the scores output: two for one target with two labels (ORT adds the second class).
    fn columns(n: &Node) -> usize {
        let (ints, strings) = Self::labels(n);
        match Self::targets(n) {
            1 if ints.len() == 2 || strings.len() == 2 => 2,
            t => t,
        }
    }
}

impl Kernel for LinearClassifier {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        let (r, _) = rows(n, shape)?;
        let label = match Self::labels(n).1.is_empty() {
            true => i64::datum_type(),
            false => String::datum_type(),
        };
        Ok(vec![
            (label, vec![r]),
            (f64::datum_type(), vec![r, Self::columns(n)]),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let (r, f) = rows(n, x.shape())?;
        let (w, b) = (n.floats("coefficients"), n.floats("intercepts"));
        let targets = b.len();
        anyhow::ensure!(
            targets > 0,
            "{} `{}` has no intercepts: ONNX Runtime counts its classes by them",
            n.op(),
            n.proto.name
        );
        fits(n, &w, targets, f)?;
        let x: Vec<f64> = x.iter().copied().collect();
        let mut scores = affine(&x, (r, f), &w, &b, targets);
        let winners: Vec<usize> = match targets {
            1 => scores.iter().map(|&s| usize::from(s > 0.0)).collect(),
            _ => scores
                .chunks(targets)
                .map(|row| (1..targets).fold(0, |m, j| if row[j] > row[m] { j } else { m }))
                .collect(),
        };
        let label = self.label_tensor(n, &winners, targets)?;
        let how = string_attr(n, "post_transform", "NONE");
        let columns = Self::columns(n);
        if targets > 1 {
            transform(n, &mut scores, targets, &how)?;
        } else if how == "PROBIT" {
            anyhow::ensure!(columns == 1, "{} `{}`: PROBIT on a binary classifier with two labels leaves ONNX Runtime's second column unwritten", n.op(), n.proto.name);
            scores.iter_mut().for_each(|s| *s = probit(*s));
        } else if columns == 2 {
            scores = scores.iter().flat_map(|&s| [1.0 - s, s]).collect();
        }
        Ok(vec![label, super::util::shaped(&[r, columns], scores)?])
    }
}

impl LinearClassifier {
    /// The label of each row's winning class. One target: the two class labels when there are two (index 1 is
    /// positive), else 1 and 0, as ORT does.
    fn label_tensor(&self, n: &Node, winners: &[usize], targets: usize) -> TractResult<Tensor> {
        let (ints, strings) = Self::labels(n);
        let count = ints.len().max(strings.len());
        let own = targets > 1 || count == 2;
        anyhow::ensure!(
            !own || count >= targets.max(2),
            "{} `{}` names {count} class labels for {targets} classes",
            n.op(),
            n.proto.name
        );
        if strings.is_empty() {
            let v: Vec<i64> = winners
                .iter()
                .map(|&k| if own { ints[k] } else { k as i64 })
                .collect();
            return Ok(tensor1(&v));
        }
        let v: Vec<String> = winners
            .iter()
            .map(|&k| {
                if own {
                    strings[k].clone()
                } else {
                    k.to_string()
                }
            })
            .collect();
        Ok(tract_ndarray::Array1::from(v).into_tensor())
    }
}

struct LinearRegressor;

impl Kernel for LinearRegressor {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        let (r, _) = rows(n, shape)?;
        Ok(vec![(
            f64::datum_type(),
            vec![r, n.int("targets", 1).max(1) as usize],
        )])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let (r, f) = rows(n, x.shape())?;
        let targets = n.int("targets", 1).max(1) as usize;
        let (w, b) = (n.floats("coefficients"), n.floats("intercepts"));
        fits(n, &w, targets, f)?;
        let x: Vec<f64> = x.iter().copied().collect();
        let mut y = affine(&x, (r, f), &w, &b, targets);
        let how = string_attr(n, "post_transform", "NONE");
        transform(n, &mut y, targets, &how)?;
        Ok(vec![super::util::shaped(&[r, targets], y)?])
    }
}

struct Normalizer;

impl Kernel for Normalizer {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        rows(n, shape)?;
        Ok(vec![(f64::datum_type(), shape.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let mut x = f64s(n, ins, 0)?;
        let (_, c) = rows(n, x.shape())?;
        let norm = string_attr(n, "norm", "MAX");
        let data = x.as_slice_mut().expect("an owned array is contiguous");
        for row in data.chunks_mut(c.max(1)) {
            let z = match norm.as_str() {
                "MAX" => row.iter().copied().fold(f64::MIN, f64::max),
                "L1" => row.iter().map(|v| v.abs()).sum(),
                "L2" => row.iter().map(|v| v * v).sum::<f64>().sqrt(),
                other => anyhow::bail!("Normalizer `{}`: unknown norm {other}", n.proto.name),
            };
            // ORT leaves a row whose norm is zero as it is.
            if z != 0.0 {
                row.iter_mut().for_each(|v| *v /= z);
            }
        }
        Ok(vec![x.into_tensor()])
    }
}

struct Scaler;

impl Kernel for Scaler {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        super::util::f64_like(n, ins, 0)
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let mut x = f64s(n, ins, 0)?;
        let c = x.shape().last().copied().unwrap_or(1).max(1);
        let (offset, scale) = (n.floats("offset"), n.floats("scale"));
        for (what, v) in [("offset", &offset), ("scale", &scale)] {
            anyhow::ensure!(
                v.len() <= 1 || v.len() == c,
                "Scaler `{}` has {} {what} values for {c} features (1 or {c})",
                n.proto.name,
                v.len()
            );
        }
        let at = |v: &[f64], j: usize, default: f64| match v.len() {
            0 => default,
            1 => v[0],
            _ => v[j],
        };
        let data = x.as_slice_mut().expect("an owned array is contiguous");
        for (i, v) in data.iter_mut().enumerate() {
            let j = i % c;
            *v = (*v - at(&offset, j, 0.0)) * at(&scale, j, 1.0);
        }
        Ok(vec![x.into_tensor()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, NodeProto};

    fn floats_attr(name: &str, v: &[f32]) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            r#type: 6,
            floats: v.to_vec(),
            ..Default::default()
        }
    }

    fn classifier(coefficients: &[f32], intercepts: &[f32], labels: &[i64], how: &str) -> Node {
        Node::new(&NodeProto {
            op_type: "phantom.LinearClassifier".into(),
            name: "lc".into(),
            input: vec!["x".into()],
            output: vec!["label".into(), "scores".into()],
            attribute: vec![
                floats_attr("coefficients", coefficients),
                floats_attr("intercepts", intercepts),
                AttributeProto {
                    name: "classlabels_ints".into(),
                    r#type: 7,
                    ints: labels.to_vec(),
                    ..Default::default()
                },
                AttributeProto {
                    name: "post_transform".into(),
                    r#type: 3,
                    s: how.as_bytes().to_vec(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        })
    }

    fn run(n: &Node, x: Tensor) -> TractResult<(Vec<i64>, Vec<f64>)> {
        let out = LinearClassifier.eval(n, &[Some(&x)])?;
        let labels = super::super::util::values::<i64>(&out[0])?;
        Ok((labels, super::super::util::values::<f64>(&out[1])?))
    }

    #[test]
    fn one_target_with_two_labels_gives_ort_s_raw_second_class() {
        // x·w + b = 1·2 + 0.5 = 2.5: positive label; ORT writes [1 − s, s] with no logistic.
        let n = classifier(&[2.0], &[0.5], &[7, 9], "LOGISTIC");
        let (labels, scores) = run(&n, tensor2(&[[1f64]])).unwrap();
        assert_eq!(labels, vec![9]);
        assert_eq!(scores, vec![-1.5, 2.5]);
    }

    #[test]
    fn several_targets_take_the_first_maximum_and_the_post_transform() {
        let n = classifier(&[1.0, 0.0, 0.0, 1.0], &[0.0, 0.0], &[3, 4], "SOFTMAX");
        let (labels, scores) = run(&n, tensor2(&[[1f64, 1.0], [0.0, 2.0]])).unwrap();
        assert_eq!(labels, vec![3, 4], "a tie goes to the first class");
        assert_eq!(&scores[..2], &[0.5, 0.5]);
        let e = 2f64.exp();
        assert!((scores[3] - e / (1.0 + e)).abs() < 1e-15);
    }

    #[test]
    fn coefficients_that_do_not_fit_are_refused() {
        let n = classifier(&[0.1; 12], &[0.0; 3], &[0, 1, 2], "NONE");
        let e = run(&n, tensor2(&[[1f64, 2.0]; 3])).unwrap_err().to_string();
        assert!(
            e.contains("12 coefficients for 3 target(s) × 2 input feature(s) = 6"),
            "{e}"
        );
    }

    #[test]
    fn softmax_zero_leaves_zeros_out_of_the_sum() {
        let mut row = [0.0, 1.0, 1.0];
        softmax(&mut row, true);
        assert_eq!(row, [0.0, 0.5, 0.5]);
    }

    #[test]
    fn probit_follows_ort_s_approximation() {
        assert_eq!(probit(0.5), 0.0);
        // The exact probit of 0.975 is 1.95996…; ORT's approximation is within 2e-3 of it.
        assert!((probit(0.975) - 1.959964).abs() < 2e-3);
    }
}
