//! `SVMClassifier` (`ai.onnx.ml`: scikit-learn's SVC and LinearSVC as skl2onnx converts them) in f64: tract has
//! none. Written from ONNX Runtime's CPU kernel (`svmclassifier.cc`), whose choices it repeats:
//! - with support vectors (SVC), one-vs-one: for each class pair (i, j), `Σ coef · K(x, sv)` over both classes'
//!   vectors plus `rho`, a vote for i when positive, else for j; the label is the first class with the most votes.
//!   The scores are the pairs' decision values; with two classes the one value is written `[−s, s]` (no
//!   post-transform) or `[1 − s, s]`;
//! - without (linear): one score per class, `K(x, coef_c) + rho₀`, the label the first highest score (for two
//!   classes, the second label when all coefficients are positive and the score reaches 0.5, or when some are
//!   negative and it is positive), then the post-transform.
//!
//! - with Platt probabilities (`prob_a`, `prob_b`: SVC with `probability=True`), each pair's decision value `s`
//!   becomes `1 / (1 + e^(s·A + B))`, clamped to [1e-7, 1 − 1e-7], and the pairs are coupled into one probability
//!   per class by libsvm's iterative method (Wu, Lin and Weng 2004), which ONNX Runtime repeats with the same
//!   stopping rule (largest residual under 0.005 / classes, at most 100 sweeps); the label is still the vote.

use tract_onnx::prelude::*;

use super::kernel::Kernel;
use super::node::{Fact, Node};
use super::svm::kernel_of;
use super::util::{f64s, fact};

/// Class labels: ints or strings, as the model names them.
fn labels(n: &Node) -> (Vec<i64>, Vec<String>) {
    super::ml::class_labels(n, "classlabels_ints")
}

/// The model as ORT reads it.
struct Model {
    classes: usize,
    per_class: Vec<usize>,
    coef: Vec<f64>,
    svs: Vec<f64>,
    rho: Vec<f64>,
    kind: String,
    params: (f64, f64, f64),
    post: String,
    /// Platt scaling per class pair (`prob_a`, `prob_b`); empty without probabilities.
    platt: Vec<(f64, f64)>,
}

impl Model {
    fn of(n: &Node) -> TractResult<Model> {
        let bad = |what: String| anyhow::anyhow!("{} `{}`: {what}", n.op(), n.proto.name);
        let (ints, strings) = labels(n);
        let classes = ints.len().max(strings.len());
        anyhow::ensure!(classes >= 2, bad(format!("{classes} class label(s)")));
        let (a, b) = (n.floats("prob_a"), n.floats("prob_b"));
        anyhow::ensure!(
            a.len() == b.len(),
            bad(format!("{} prob_a but {} prob_b", a.len(), b.len()))
        );
        let per_class: Vec<usize> = n
            .ints("vectors_per_class")
            .iter()
            .map(|&v| v.max(0) as usize)
            .collect();
        let p = n.floats("kernel_params");
        let param = |k: usize| p.get(k).copied().unwrap_or(0.0);
        let svc = !per_class.is_empty();
        let m = Model {
            classes,
            coef: n.floats("coefficients"),
            svs: n.floats("support_vectors"),
            rho: n.floats("rho"),
            kind: match svc {
                true => super::ml::string_attr(n, "kernel_type", "LINEAR"),
                false => "LINEAR".into(),
            },
            params: (param(0), param(1), param(2)),
            post: super::ml::string_attr(n, "post_transform", "NONE"),
            platt: a.into_iter().zip(b).collect(),
            per_class,
        };
        let vectors: usize = m.per_class.iter().sum();
        let pairs = classes * (classes - 1) / 2;
        match svc {
            true => anyhow::ensure!(
                m.per_class.len() == classes
                    && m.coef.len() >= (classes - 1) * vectors
                    && m.rho.len() >= pairs
                    && (m.platt.is_empty() || m.platt.len() >= pairs)
                    && vectors > 0
                    && m.svs.len().is_multiple_of(vectors),
                bad(format!(
                    "{} vectors per class, {} coefficients, {} rho, {} prob_a for {classes} classes of {vectors} vectors",
                    m.per_class.len(),
                    m.coef.len(),
                    m.rho.len(),
                    m.platt.len()
                ))
            ),
            false => anyhow::ensure!(
                !m.rho.is_empty() && m.coef.len().is_multiple_of(classes),
                bad(format!("{} coefficients for {classes} classes", m.coef.len()))
            ),
        }
        Ok(m)
    }

    /// Scores and the winning class of one row (one-vs-one votes, or the linear scores).
    fn row(&self, x: &[f64]) -> (Vec<f64>, usize, f64) {
        let first_max = |v: &[f64]| (1..v.len()).fold(0, |m, k| if v[k] > v[m] { k } else { m });
        if self.per_class.is_empty() {
            let f = self.coef.len() / self.classes;
            let s: Vec<f64> = (self.coef.chunks(f.max(1)))
                .map(|c| kernel_of(&self.kind, self.params, x, c) + self.rho[0])
                .collect();
            let best = first_max(&s);
            return (s.clone(), best, s[best]);
        }
        let vectors: usize = self.per_class.iter().sum();
        let f = self.svs.len() / vectors;
        let k: Vec<f64> = (self.svs.chunks(f.max(1)))
            .map(|sv| kernel_of(&self.kind, self.params, x, sv))
            .collect();
        let start: Vec<usize> = (self.per_class.iter())
            .scan(0, |acc, &c| {
                let s = *acc;
                *acc += c;
                Some(s)
            })
            .collect();
        let (mut scores, mut votes) = (vec![], vec![0.0; self.classes]);
        let mut pair = 0;
        for i in 0..self.classes - 1 {
            for j in i + 1..self.classes {
                let part = |row: usize, class: usize| -> f64 {
                    (0..self.per_class[class])
                        .map(|m| self.coef[vectors * row + start[class] + m] * k[start[class] + m])
                        .sum()
                };
                let s = part(j - 1, i) + part(i, j) + self.rho[pair];
                pair += 1;
                scores.push(s);
                votes[if s > 0.0 { i } else { j }] += 1.0;
            }
        }
        (scores, first_max(&votes), 0.0)
    }

    /// One probability per class from the pairs' decision values (Platt scaling, then pairwise coupling).
    fn probabilities(&self, pairs: &[f64]) -> Vec<f64> {
        let k = self.classes;
        let mut r = vec![0.0; k * k];
        let mut index = 0;
        for i in 0..k - 1 {
            for j in i + 1..k {
                let (a, b) = self.platt[index];
                let p = platt(pairs[index], a, b).clamp(1e-7, 1.0 - 1e-7);
                r[i * k + j] = p;
                r[j * k + i] = 1.0 - p;
                index += 1;
            }
        }
        couple(k, &r)
    }
}

/// Platt's sigmoid of a decision value, `1 / (1 + e^(s·A + B))`, written as ONNX Runtime writes it (the logistic
/// of `|s·A + B|`, mirrored) so it stays accurate at both ends.
fn platt(score: f64, a: f64, b: f64) -> f64 {
    let z = score * a + b;
    let v = 1.0 / (1.0 + (-z.abs()).exp());
    1.0 - if z < 0.0 { 1.0 - v } else { v }
}

/// Pairwise coupling (libsvm's `multiclass_probability`): `r[i·k + j]` is the probability of class i against j;
/// the result minimises `Σ (r_ji p_i − r_ij p_j)²` over the simplex, iterated until the largest residual is under
/// `0.005 / k` or for 100 sweeps, as libsvm and ONNX Runtime stop.
fn couple(k: usize, r: &[f64]) -> Vec<f64> {
    let mut q = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            if i != j {
                q[i * k + i] += r[j * k + i] * r[j * k + i];
            }
            if j < i {
                q[i * k + j] = q[j * k + i];
            } else if j > i {
                q[i * k + j] = -r[j * k + i] * r[i * k + j];
            }
        }
    }
    let mut p = vec![1.0 / k as f64; k];
    let mut qp = vec![0.0; k];
    let eps = 0.005 / k as f64;
    for _ in 0..100 {
        let mut pqp = 0.0;
        for i in 0..k {
            qp[i] = (0..k).map(|j| q[i * k + j] * p[j]).sum();
            pqp += p[i] * qp[i];
        }
        if qp.iter().map(|v| (v - pqp).abs()).fold(0.0, f64::max) < eps {
            break;
        }
        for i in 0..k {
            let diff = (pqp - qp[i]) / q[i * k + i];
            p[i] += diff;
            pqp = (pqp + diff * (diff * q[i * k + i] + 2.0 * qp[i])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..k {
                qp[j] = (qp[j] + diff * q[i * k + j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
    p
}

pub(super) struct Classifier;

impl Kernel for Classifier {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        let rows = if shape.len() == 1 { 1 } else { shape[0] };
        let m = Model::of(n)?;
        let columns = match (m.per_class.is_empty(), m.classes) {
            (false, c) if !m.platt.is_empty() => c,
            (false, 2) => 2,
            (false, c) => c * (c - 1) / 2,
            (true, c) => c,
        };
        let label = match labels(n).1.is_empty() {
            true => i64::datum_type(),
            false => String::datum_type(),
        };
        Ok(vec![
            (label, vec![rows]),
            (f64::datum_type(), vec![rows, columns]),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let f = x.shape().last().copied().unwrap_or(1).max(1);
        let data: Vec<f64> = x.iter().copied().collect();
        let m = Model::of(n)?;
        let (ints, strings) = labels(n);
        let all_positive = m.coef.iter().all(|&c| c >= 0.0);
        let (mut winners, mut scores, mut columns) = (vec![], vec![], 0);
        for row in data.chunks(f) {
            let (mut s, best, top) = m.row(row);
            // ORT's binary label: the second class when the top score clears its threshold, else the winner.
            let chosen = match m.classes {
                2 if (all_positive && top >= 0.5) || (!all_positive && top > 0.0) => 1,
                _ => best,
            };
            winners.push(chosen);
            if !m.platt.is_empty() && !m.per_class.is_empty() {
                s = m.probabilities(&s);
                let k = s.len();
                super::ml::transform(n, &mut s, k, &m.post)?;
            } else if s.len() == 1 {
                let v = s[0];
                s = match m.post.as_str() {
                    "NONE" => vec![-v, v],
                    "PROBIT" => anyhow::bail!(
                        "{} `{}`: PROBIT on one decision value leaves ONNX Runtime's second column unwritten",
                        n.op(),
                        n.proto.name
                    ),
                    _ => vec![1.0 - v, v],
                };
            } else {
                let k = s.len();
                super::ml::transform(n, &mut s, k, &m.post)?;
            }
            columns = s.len();
            scores.extend(s);
        }
        let rows = winners.len();
        let label = match strings.is_empty() {
            true => tensor1(&winners.iter().map(|&k| ints[k]).collect::<Vec<_>>()),
            false => {
                let named: Vec<String> = winners.iter().map(|&k| strings[k].clone()).collect();
                tract_ndarray::Array1::from(named).into_tensor()
            }
        };
        Ok(vec![label, super::util::shaped(&[rows, columns], scores)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platt_is_the_sigmoid_of_minus_the_scaled_score() {
        for (s, a, b) in [
            (0.3, -2.0, 0.1),
            (-4.0, 1.5, -0.2),
            (800.0, -1.0, 0.0),
            (800.0, 1.0, 0.0),
        ] {
            let z: f64 = s * a + b;
            let want = 1.0 / (1.0 + z.exp());
            assert!(
                (platt(s, a, b) - want).abs() <= 1e-16 + 1e-15 * want,
                "{s} {a} {b}"
            );
        }
    }

    #[test]
    fn coupling_sums_to_one_and_agrees_with_the_pairs_it_was_given() {
        // Pairs drawn from one distribution p: r_ij = p_i / (p_i + p_j) is coupled back to p.
        let p = [0.5, 0.3, 0.2];
        let k = p.len();
        let mut r = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..k {
                if i != j {
                    r[i * k + j] = p[i] / (p[i] + p[j]);
                }
            }
        }
        let got = couple(k, &r);
        assert!((got.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{got:?}");
        for (g, w) in got.iter().zip(p) {
            // libsvm's stopping rule (residual under 0.005 / k) leaves it this close.
            assert!((g - w).abs() < 2e-3, "{got:?}");
        }
        // Two classes: the coupling converges to the one pair's probability.
        let got = couple(2, &[0.0, 0.8, 0.2, 0.0]);
        assert!(
            (got[0] - 0.8).abs() < 1e-3 && (got[1] - 0.2).abs() < 1e-3,
            "{got:?}"
        );
    }
}
