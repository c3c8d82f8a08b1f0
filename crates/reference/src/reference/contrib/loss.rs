//! ONNX's training losses, SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, in f64 (tract has neither).
//!
//! Both take scores `x` of shape [N, C, d1, ...] and integer targets of shape [N, d1, ...] (each a class in
//! [0, C)), and an optional per-class `weights` [C]. NLL's loss at a position is −weight[t]·x[n, t, d…]; SCE's is
//! NLL's of log-softmax(x) over axis 1, whose values SCE also returns as its optional second output. A target
//! equal to `ignore_index` (which may be negative, or ≥ C) adds nothing and weighs 0. `reduction` is `none` (the
//! losses, shaped like the target), `sum`, or `mean`: the sum divided by the sum of the weights of the targets
//! not ignored (their count without `weights`), as ONNX's definition says. (ONNX's Python NLL reference divides by
//! every position when `ignore_index` is −1 and there are no weights, counting ignored ones; the definition and
//! ONNX Runtime do not.) A target outside [0, C) that is not `ignore_index` is an error.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, f64s_opt, fact, float_type, int_opt, opt, shaped, string, values};

/// Claimed in any domain: tract lacks the training losses.
pub(super) const TABLE: &[Row] = &[
    Row::any_domain("SoftmaxCrossEntropyLoss", &Loss),
    Row::any_domain("NegativeLogLikelihoodLoss", &Loss),
];

/// How the per-position losses become the output.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reduction {
    None,
    Sum,
    Mean,
}

fn reduction(n: &Node) -> TractResult<Reduction> {
    match string(n, "reduction", "mean").as_str() {
        "none" => Ok(Reduction::None),
        "sum" => Ok(Reduction::Sum),
        "mean" => Ok(Reduction::Mean),
        other => anyhow::bail!("{} `{}`: unknown reduction `{other}`", n.op(), n.proto.name),
    }
}

/// The target's expected shape: the scores' without the class axis 1.
fn target_shape(x: &[usize]) -> Vec<usize> {
    x.iter()
        .enumerate()
        .filter(|&(i, _)| i != 1)
        .map(|(_, &d)| d)
        .collect()
}

struct Loss;

impl Kernel for Loss {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let t = fact(n, ins, 1)?;
        let dt = float_type(n, x)?;
        anyhow::ensure!(
            x.1.len() >= 2,
            "{}: scores of shape {:?} have no class axis",
            n.op(),
            x.1
        );
        anyhow::ensure!(
            t.1 == target_shape(&x.1),
            "{}: target of shape {:?} does not match scores of shape {:?}",
            n.op(),
            t.1,
            x.1
        );
        anyhow::ensure!(
            t.0.is_integer(),
            "{}: the target must be integers, got {:?}",
            n.op(),
            t.0
        );
        if let Some(w) = ins.get(2).copied().flatten() {
            anyhow::ensure!(
                w.1 == [x.1[1]],
                "{}: weights of shape {:?}, expected [{}]",
                n.op(),
                w.1,
                x.1[1]
            );
        }
        let loss = match reduction(n)? {
            Reduction::None => t.1.clone(),
            _ => vec![],
        };
        // SCE's second output is the log-probabilities, shaped like the scores.
        Ok(vec![(dt, loss), (dt, x.1.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let shape = opt(n, ins, 0)?.shape().to_vec();
        anyhow::ensure!(shape.len() >= 2, "{}: scores have no class axis", n.op());
        let mut x = f64s(n, ins, 0)?.iter().copied().collect::<Vec<f64>>();
        let sce = n.op() == "SoftmaxCrossEntropyLoss";
        let (c, d) = (shape[1], shape[2..].iter().product::<usize>());
        if sce {
            log_softmax(&mut x, c, d);
        }
        let targets = values::<i64>(opt(n, ins, 1)?)?;
        let weights = f64s_opt(ins, 2)?.map(|w| w.iter().copied().collect::<Vec<f64>>());
        let classes = Classes {
            c,
            d,
            weights: weights.as_deref(),
            ignore: int_opt(n, "ignore_index"),
        };
        let (losses, applied) = classes.losses(&x, &targets)?;
        let loss = match reduction(n)? {
            Reduction::None => shaped(&target_shape(&shape), losses)?,
            Reduction::Sum => tensor0(losses.iter().sum::<f64>()),
            Reduction::Mean => tensor0(losses.iter().sum::<f64>() / applied),
        };
        let mut outs = vec![loss];
        if sce {
            outs.push(shaped(&shape, x)?);
        }
        Ok(outs)
    }
}

/// Replaces the scores, laid out [N, C, D] row-major, with their log-softmax over C: x − max − ln Σ exp(x − max)
/// (the max subtracted so that no exp overflows).
fn log_softmax(x: &mut [f64], c: usize, d: usize) {
    for block in x.chunks_mut((c * d).max(1)) {
        for k in 0..d {
            let col = (0..c).map(|j| block[j * d + k]);
            let max = col.clone().fold(f64::NEG_INFINITY, f64::max);
            let lse = max + col.map(|v| (v - max).exp()).sum::<f64>().ln();
            for j in 0..c {
                block[j * d + k] -= lse;
            }
        }
    }
}

/// What the loss of one position needs besides the scores: C classes, D positions per sample, the weights and the
/// ignored class.
struct Classes<'a> {
    c: usize,
    d: usize,
    weights: Option<&'a [f64]>,
    ignore: Option<i64>,
}

impl Classes<'_> {
    /// The weighted loss of every target position, and the sum of the weights applied (0 for an ignored target):
    /// −weight[t]·x[n, t, k] for `x` laid out [N, C, D].
    fn losses(&self, x: &[f64], targets: &[i64]) -> TractResult<(Vec<f64>, f64)> {
        let mut applied = 0.0;
        let mut out = Vec::with_capacity(targets.len());
        for (p, &t) in targets.iter().enumerate() {
            if Some(t) == self.ignore {
                out.push(0.0);
                continue;
            }
            anyhow::ensure!(
                t >= 0 && (t as usize) < self.c,
                "target {t} at position {p} is outside the {} classes (and is not ignore_index {:?})",
                self.c,
                self.ignore
            );
            let (sample, k) = (p / self.d.max(1), p % self.d.max(1));
            let w = self.weights.map_or(1.0, |w| w[t as usize]);
            applied += w;
            out.push(-w * x[(sample * self.c + t as usize) * self.d + k]);
        }
        Ok((out, applied))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, attrs: Vec<tract_onnx::pb::AttributeProto>, inputs: &[&str]) -> Node {
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec!["loss".into(), "log_prob".into()],
            attribute: attrs,
            ..Default::default()
        })
    }

    fn attr_s(name: &str, v: &str) -> tract_onnx::pb::AttributeProto {
        tract_onnx::pb::AttributeProto {
            name: name.into(),
            s: v.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    fn attr_i(name: &str, v: i64) -> tract_onnx::pb::AttributeProto {
        tract_onnx::pb::AttributeProto {
            name: name.into(),
            i: v,
            ..Default::default()
        }
    }

    fn run(n: &Node, x: Tensor, t: Tensor, w: Option<Tensor>) -> Vec<Vec<f64>> {
        let ins = [Some(&x), Some(&t), w.as_ref()];
        let outs = Loss.eval(n, &ins).unwrap();
        outs.iter().map(|o| values::<f64>(o).unwrap()).collect()
    }

    fn x23() -> Tensor {
        // [N=2, C=3]
        tensor2(&[[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]])
    }

    #[test]
    fn nll_reductions() {
        let t = tensor1(&[2i64, 0]);
        let none = node(
            "NegativeLogLikelihoodLoss",
            vec![attr_s("reduction", "none")],
            &["x", "t"],
        );
        assert_eq!(run(&none, x23(), t.clone(), None)[0], vec![-3.0, -4.0]);
        let sum = node(
            "NegativeLogLikelihoodLoss",
            vec![attr_s("reduction", "sum")],
            &["x", "t"],
        );
        assert_eq!(run(&sum, x23(), t.clone(), None)[0], vec![-7.0]);
        let mean = node("NegativeLogLikelihoodLoss", vec![], &["x", "t"]);
        assert_eq!(run(&mean, x23(), t, None)[0], vec![-3.5]);
    }

    #[test]
    fn nll_weights_and_negative_ignore_index() {
        // Position 1 is ignored: mean = (−0.5·3) / 0.5 (the ignored target's weight does not count).
        let t = tensor1(&[2i64, -1]);
        let w = tensor1(&[2.0f64, 1.0, 0.5]);
        let n = node(
            "NegativeLogLikelihoodLoss",
            vec![attr_i("ignore_index", -1)],
            &["x", "t", "w"],
        );
        assert_eq!(run(&n, x23(), t, Some(w))[0], vec![-3.0]);
    }

    #[test]
    fn nll_nd_layout() {
        // x [N=1, C=2, D=2]: x[0, c, k] = 10c + k; targets [[1, 0]] pick 10 and 1.
        let x = tensor3(&[[[0.0f64, 1.0], [10.0, 11.0]]]);
        let t = tensor2(&[[1i64, 0]]);
        let n = node(
            "NegativeLogLikelihoodLoss",
            vec![attr_s("reduction", "none")],
            &["x", "t"],
        );
        assert_eq!(run(&n, x, t, None)[0], vec![-10.0, -1.0]);
    }

    #[test]
    fn out_of_range_target_is_an_error() {
        let n = node("NegativeLogLikelihoodLoss", vec![], &["x", "t"]);
        let (x, t) = (x23(), tensor1(&[3i64, 0]));
        assert!(Loss.eval(&n, &[Some(&x), Some(&t), None]).is_err());
    }

    #[test]
    fn sce_log_prob_and_loss() {
        // Two equal scores: log-probabilities ln ½ each; the loss of either class is ln 2.
        let x = tensor2(&[[5.0f64, 5.0]]);
        let n = node(
            "SoftmaxCrossEntropyLoss",
            vec![attr_s("reduction", "sum")],
            &["x", "t"],
        );
        let outs = run(&n, x, tensor1(&[1i64]), None);
        let ln2 = std::f64::consts::LN_2;
        assert!((outs[0][0] - ln2).abs() < 1e-15);
        assert!(outs[1].iter().all(|&v| (v + ln2).abs() < 1e-15));
    }
}
