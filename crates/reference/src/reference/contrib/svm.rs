//! `SVMRegressor` (`ai.onnx.ml`, scikit-learn's SVR/LinearSVR/OneClassSVM as skl2onnx converts them) in f64: tract
//! has none. Written from ONNX Runtime's CPU kernel (`svmregressor.cc`, `svm_common.h`): with support vectors,
//! `y = Σⱼ coefⱼ · K(x, svⱼ) + ρ` for the kernel `kernel_type` with `kernel_params` = (γ, coef0, degree) — LINEAR
//! `x·s`, POLY `(γ x·s + coef0)^degree`, RBF `exp(−γ ‖x − s‖²)`, SIGMOID `tanh(γ x·s + coef0)`; without them,
//! `y = x·coef + ρ`. `one_class` turns the sign into ±1; PROBIT is the only post-transform ORT applies.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact};

pub(super) const TABLE: &[Row] = &[
    Row::new("SVMRegressor", &Regressor),
    Row::new("SVMClassifier", &super::svm_cls::Classifier),
];

/// The kernel of two feature rows.
pub(super) fn kernel_of(
    kind: &str,
    (gamma, coef0, degree): (f64, f64, f64),
    x: &[f64],
    s: &[f64],
) -> f64 {
    let dot = || x.iter().zip(s).map(|(a, b)| a * b).sum::<f64>();
    match kind {
        "POLY" => (gamma * dot() + coef0).powf(degree),
        "RBF" => (-gamma * x.iter().zip(s).map(|(a, b)| (a - b) * (a - b)).sum::<f64>()).exp(),
        "SIGMOID" => (gamma * dot() + coef0).tanh(),
        _ => dot(),
    }
}

struct Regressor;

impl Kernel for Regressor {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        let rows = if shape.len() == 1 { 1 } else { shape[0] };
        Ok(vec![(f64::datum_type(), vec![rows, 1])])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let f = x.shape().last().copied().unwrap_or(1).max(1);
        let data: Vec<f64> = x.iter().copied().collect();
        let (coef, svs) = (n.floats("coefficients"), n.floats("support_vectors"));
        let rho = n.floats("rho").first().copied().unwrap_or(0.0);
        let count = n.int("n_supports", 0).max(0) as usize;
        let params = n.floats("kernel_params");
        let param = |k: usize, d: f64| params.get(k).copied().unwrap_or(d);
        let params = (param(0, 0.0), param(1, 0.0), param(2, 0.0));
        let kind = super::ml::string_attr(n, "kernel_type", "LINEAR");
        let bad = |what: String| anyhow::anyhow!("{}: {what}", n.proto.name);
        if count > 0 {
            anyhow::ensure!(
                svs.len() == count * f && coef.len() >= count,
                bad(format!(
                    "{} support-vector values and {} coefficients for {count} vectors of {f} features",
                    svs.len(),
                    coef.len()
                ))
            );
        } else {
            anyhow::ensure!(
                coef.len() == f,
                bad(format!("{} coefficients for {f} features", coef.len()))
            );
        }
        let one_class = n.int("one_class", 0) != 0;
        let probit = super::ml::string_attr(n, "post_transform", "NONE") == "PROBIT";
        let y: Vec<f64> = data
            .chunks(f)
            .map(|row| {
                let s = match count {
                    0 => row.iter().zip(&coef).map(|(a, b)| a * b).sum::<f64>(),
                    _ => svs
                        .chunks(f)
                        .zip(&coef)
                        .map(|(sv, c)| c * kernel_of(&kind, params, row, sv))
                        .sum::<f64>(),
                } + rho;
                match (one_class, probit) {
                    (true, _) => {
                        if s > 0.0 {
                            1.0
                        } else {
                            -1.0
                        }
                    }
                    (false, true) => super::ml::probit(s),
                    (false, false) => s,
                }
            })
            .collect();
        let rows = y.len();
        Ok(vec![super::util::shaped(&[rows, 1], y)?])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn kernels_follow_their_definitions() {
        let (x, s) = ([1.0, 2.0], [0.5, -1.0]);
        let p = (0.5, 1.0, 2.0);
        assert_eq!(super::kernel_of("LINEAR", p, &x, &s), -1.5);
        assert_eq!(super::kernel_of("POLY", p, &x, &s), 0.0625);
        assert_eq!(super::kernel_of("RBF", p, &x, &s), (-0.5f64 * 9.25).exp());
        assert_eq!(super::kernel_of("SIGMOID", p, &x, &s), 0.25f64.tanh());
    }
}
