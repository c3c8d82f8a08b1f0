//! Weights a provider holds in a narrower type than the model's: onnxruntime-ggml keeps MatMul weights in fp16 by
//! default (its `weights` option), other runtimes convert to bf16. That is the provider's precision choice, not a
//! fault in its kernel, and the numbers can say whether it is what happened: the reference's input times the weights
//! rounded to fp16 (or bf16) moves Y by as much as the node's error. Claimed only when that rounding alone accounts
//! for the error observed (at least half of it, at most twice); the narrower type that does is named.

use ndarray::ArrayD;

use super::{cause, num, Evidence, Site};
use crate::report::model::{Cause, CauseKind, Confidence, Culprit};
use crate::tensor::narrow::round_one;
use crate::tensor::DType;

/// Multiply-adds spent per hypothesis at most (rows of A are taken until they reach it).
const MAX_WORK: usize = 1 << 26;

pub(super) fn explain(c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let Some((a, w)) = operands(ev, s) else {
        return;
    };
    let observed = c.max_abs;
    for narrow in [DType::F16, DType::Bf16] {
        let moved = rounding_error(&a, &w, narrow);
        let ratio = moved / observed.max(f64::MIN_POSITIVE);
        if !(0.5..=2.0).contains(&ratio) {
            continue;
        }
        let name = narrow.name();
        out.push(cause(
            CauseKind::WeightsNarrowed,
            format!(
                "weights held in {name}: `{}` rounded to {name} alone moves Y by up to {} (the node's error is {}, \
                 {ratio:.2}× of it), so the provider most likely stores them in {name}",
                s.node.inputs[1],
                num(moved),
                num(observed),
            ),
            &[
                ("weight_rounding_error", moved),
                ("observed_max_abs", observed),
                ("ratio", ratio),
            ],
            Confidence::High,
            format!(
                "keep the weights in the model's type on the provider (onnxruntime-ggml: `--ep-option \
                 weights=F32`), or accept {name} weights"
            ),
        ));
        return;
    }
}

/// The reference's A as rows of K and the weight B as K×N (transposed where Gemm's `transB` says), for a MatMul or
/// Gemm whose B is an initializer of rank 2 and whose A is not transposed.
fn operands(ev: &Evidence, s: &Site) -> Option<(ArrayD<f64>, ndarray::Array2<f64>)> {
    let gemm = match s.op {
        "MatMul" => false,
        "Gemm" if ev.attr_i(s.i, "transA").unwrap_or(0) == 0 => true,
        _ => return None,
    };
    let b = s.node.inputs.get(1)?;
    let w = ev.initializers.get(b)?.to_f64_array();
    let w = w.into_dimensionality::<ndarray::Ix2>().ok()?;
    let w = match gemm && ev.attr_i(s.i, "transB").unwrap_or(0) == 1 {
        true => w.reversed_axes(),
        false => w,
    };
    let a = ev.value(s.node.inputs.first()?)?;
    (a.shape().last() == Some(&w.nrows())).then_some((a, w.as_standard_layout().to_owned()))
}

/// The largest |A·(round(W) − W)| over the rows of A the work budget allows.
fn rounding_error(a: &ArrayD<f64>, w: &ndarray::Array2<f64>, narrow: DType) -> f64 {
    let (k, n) = w.dim();
    let dw = w.mapv(|x| round_one(x, narrow) - x);
    let rows = (MAX_WORK / (k * n).max(1)).max(1);
    let a = a.as_standard_layout();
    let Some(flat) = a.as_slice() else { return 0.0 };
    let mut worst = 0f64;
    for row in flat.chunks(k).take(rows) {
        let row = ndarray::ArrayView1::from(row);
        let dy = row.dot(&dw);
        worst = dy.iter().fold(worst, |m, v| m.max(v.abs()));
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_the_weights_moves_y_by_the_rows_dot_the_rounding() {
        let a = ndarray::ArrayD::from_shape_vec(vec![1, 2], vec![1.0, 2.0]).unwrap();
        let x = 1.0 + 2f64.powi(-12); // below fp16's step at 1 (2^-10): rounds to 1
        let w = ndarray::arr2(&[[x, 0.0], [0.0, x]]);
        let moved = rounding_error(&a, &w, DType::F16);
        assert!((moved - 2.0 * 2f64.powi(-12)).abs() < 1e-15, "{moved}");
        assert_eq!(
            rounding_error(&a, &ndarray::arr2(&[[1.0], [0.5]]), DType::F16),
            0.0
        );
    }
}
