//! BatchNormalization in training mode: the form ONNX Runtime computes when the node lists its statistics outputs
//! (opsets 9–13: `mean`, `var`, `saved_mean`, `saved_var`) or sets `training_mode` (opset 14+: the running mean
//! and variance). tract evaluates inference mode only and refuses the extra outputs.
//!
//! Per channel, over the batch and spatial axes: the batch mean μ and population variance σ²; Y = (X − μ) /
//! √(σ² + ε) · scale + B; running statistics `input · momentum + batch · (1 − momentum)`; the saved statistics
//! are μ and 1/√(σ² + ε): ONNX calls the last one the saved variance, and ONNX Runtime's CPU kernel (which decides,
//! checked on 1.31) writes the inverse standard deviation there, as cuDNN does.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{check_len, f64s, fact, float_type, shaped};

/// Claimed in training mode only ([`training`]): inference mode is tract's.
pub(super) const TABLE: &[Row] = &[Row::new("BatchNormalization", &Training)];

/// Whether `n` is a BatchNormalization that runs in training mode.
pub fn training(n: &tract_onnx::pb::NodeProto) -> bool {
    let outputs = n.output.iter().filter(|o| !o.is_empty()).count();
    let flag = n
        .attribute
        .iter()
        .any(|a| a.name == "training_mode" && a.i != 0);
    n.op_type == "BatchNormalization" && n.domain.is_empty() && (outputs > 1 || flag)
}

struct Training;

impl Kernel for Training {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let dt = float_type(n, x)?;
        anyhow::ensure!(
            x.1.len() >= 2,
            "BatchNormalization of rank {} input",
            x.1.len()
        );
        let stat = (dt, vec![x.1[1]]);
        let mut out = vec![(dt, x.1.clone())];
        out.extend(std::iter::repeat_n(
            stat,
            n.proto.output.len().saturating_sub(1),
        ));
        Ok(out)
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let shape = x.shape().to_vec();
        anyhow::ensure!(
            shape.len() >= 2,
            "BatchNormalization of rank {} input",
            shape.len()
        );
        let c = shape[1];
        let params: Vec<Vec<f64>> = (1..5)
            .map(|k| {
                let p = f64s(n, ins, k)?;
                check_len(&p, c, ["scale", "B", "input_mean", "input_var"][k - 1])?;
                Ok(p.iter().copied().collect())
            })
            .collect::<TractResult<_>>()?;
        let (eps, momentum) = (n.float("epsilon", 1e-5), n.float("momentum", 0.9));
        let inner: usize = shape[2..].iter().product();
        let data = x.as_slice().expect("owned arrays are standard");
        let count = (shape[0] * inner).max(1) as f64;
        let mut y = data.to_vec();
        let (mut mean, mut var) = (vec![0.0; c], vec![0.0; c]);
        for ch in 0..c {
            let at = |b: usize| (b * c + ch) * inner;
            let rows = || (0..shape[0]).flat_map(|b| data[at(b)..at(b) + inner].iter());
            let m = rows().sum::<f64>() / count;
            let v = rows().map(|x| (x - m) * (x - m)).sum::<f64>() / count;
            let k = params[0][ch] / (v + eps).sqrt();
            for b in 0..shape[0] {
                for e in &mut y[at(b)..at(b) + inner] {
                    *e = (*e - m) * k + params[1][ch];
                }
            }
            (mean[ch], var[ch]) = (m, v);
        }
        let running = |input: &[f64], batch: &[f64]| -> Vec<f64> {
            input
                .iter()
                .zip(batch)
                .map(|(i, b)| i * momentum + b * (1.0 - momentum))
                .collect()
        };
        let inv_std = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
        let stats = [
            running(&params[2], &mean),
            running(&params[3], &var),
            mean,
            inv_std,
        ];
        let mut out = vec![shaped(&shape, y)?];
        for s in stats
            .into_iter()
            .take(n.proto.output.len().saturating_sub(1))
        {
            out.push(shaped(&[c], s)?);
        }
        Ok(out)
    }
}
