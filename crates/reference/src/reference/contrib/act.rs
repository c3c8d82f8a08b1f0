//! Fused activations: BiasGelu, FastGelu, Gelu, QuickGelu, BiasAdd, BiasSplitGelu (`com.microsoft`), with exact
//! constants (tract's own versions of the first four build theirs in f32); and ONNX's Celu (tract's drops its α),
//! Softplus (tract's ln(exp(x) + 1) overflows to +∞ from x ≈ 710, inside float32's range), Round (tract's has no f64 version) and SwiGLU (opset 28, which tract lacks): Swish_α(A)·B = A·σ(α·A)·B, A and B of one shape (no broadcasting).

use tract_onnx::prelude::tract_ndarray::Axis;
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{add_into, f64s, f64s_opt, fact, float_type, tensor};

/// The activations: ORT's fused GELUs and BiasAdd; ONNX's Celu (tract's drops its α), Softplus (tract's
/// overflows), Round (tract's has no f64 version) and SwiGLU (tract lacks it), claimed in any domain.
pub(super) const TABLE: &[Row] = &[
    Row::new("BiasGelu", &Unary),
    Row::new("FastGelu", &Unary),
    Row::new("Gelu", &Unary),
    Row::new("QuickGelu", &Unary),
    Row::new("BiasAdd", &Unary),
    Row::new("BiasSplitGelu", &Unary),
    Row::any_domain("Celu", &Unary),
    Row::any_domain("Softplus", &Unary),
    Row::any_domain("SwiGLU", &SwiGlu),
    Row::any_domain("Round", &Unary),
];

/// GELU with the exact erf: x·Φ(x).
pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))
}

/// GELU's tanh approximation, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
pub fn gelu_tanh(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

struct Unary;

/// The element-wise ops: y = f(x [+ bias] [+ skip]).
impl Kernel for Unary {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let dt = float_type(n, x)?;
        let mut shape = x.1.clone();
        if n.op() == "BiasSplitGelu" {
            let last = shape
                .last_mut()
                .ok_or_else(|| anyhow::anyhow!("BiasSplitGelu of a scalar"))?;
            anyhow::ensure!(
                *last % 2 == 0,
                "BiasSplitGelu needs an even last axis, got {last}"
            );
            *last /= 2;
        }
        Ok(vec![(dt, shape)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let mut x = f64s(n, ins, 0)?;
        for slot in 1..ins.len() {
            if let Some(b) = f64s_opt(ins, slot)? {
                add_into(&mut x, &b, if slot == 1 { "bias" } else { "skip" })?;
            }
        }
        let y = match n.op() {
            "BiasGelu" | "Gelu" => x.mapv(gelu),
            "FastGelu" => x.mapv(gelu_tanh),
            "QuickGelu" => {
                let alpha = n.float("alpha", 1.702);
                x.mapv(|v| v * super::super::kernels::sigmoid(alpha * v))
            }
            "BiasAdd" => x,
            // ONNX's: max(0, x) + min(0, α·(exp(x/α) − 1)), NaN propagated as ONNX's max and min do; tract's
            // expansion leaves out the factor α.
            "Celu" => {
                let alpha = n.float("alpha", 1.0);
                let (max, min) = (super::super::extrema::max, super::super::extrema::min);
                x.mapv(|v| max(v, 0.0) + min(alpha * (v / alpha).exp_m1(), 0.0))
            }
            // ln(1 + eˣ) as max(x, 0) + ln(1 + e^−|x|): exact where eˣ overflows or 1 + eˣ rounds to 1.
            "Softplus" => x.mapv(|v| v.max(0.0) + (-v.abs()).exp().ln_1p()),
            // Half to even; tract's has no f64 version, so a Round of sizes computed from shapes (which tract
            // folds while typing) stopped the parse.
            "Round" => x.mapv(f64::round_ties_even),
            "BiasSplitGelu" => {
                let last = Axis(x.ndim() - 1);
                let half = x.len_of(last) / 2;
                let left = x.slice_axis(last, (..half).into()).to_owned();
                let right = x.slice_axis(last, (half..).into());
                left * right.mapv(gelu)
            }
            other => anyhow::bail!("no activation kernel for {other}"),
        };
        Ok(vec![tensor(y)])
    }
}

struct SwiGlu;

/// ONNX's SwiGLU: the gate A through Swish_α (α default 1), times the value B.
impl Kernel for SwiGlu {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (a, b) = (fact(n, ins, 0)?, fact(n, ins, 1)?);
        anyhow::ensure!(
            a == b,
            "{INVALID}SwiGLU `{}`: A is {a:?} and B {b:?}; they must share type and shape",
            n.proto.name
        );
        Ok(vec![(float_type(n, a)?, a.1.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (a, b) = (f64s(n, ins, 0)?, f64s(n, ins, 1)?);
        anyhow::ensure!(
            a.shape() == b.shape(),
            "{INVALID}SwiGLU `{}`: A of shape {:?}, B of {:?}",
            n.proto.name,
            a.shape(),
            b.shape()
        );
        let alpha = n.float("alpha", 1.0);
        let swish = a.mapv(|v| v * super::super::kernels::sigmoid(alpha * v));
        Ok(vec![tensor(swish * b)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swiglu_gates_b_by_swish_of_a() {
        let n = Node::new(&tract_onnx::pb::NodeProto {
            op_type: "SwiGLU".into(),
            attribute: vec![tract_onnx::pb::AttributeProto {
                name: "alpha".into(),
                f: 0.5,
                ..Default::default()
            }],
            ..Default::default()
        });
        let (a, b) = (tensor1(&[2.0f64, -1.0]), tensor1(&[3.0f64, 0.5]));
        let y = SwiGlu.eval(&n, &[Some(&a), Some(&b)]).unwrap();
        let y = super::super::util::values::<f64>(&y[0]).unwrap();
        let want = [
            2.0 / (1.0 + (-1.0f64).exp()) * 3.0,
            -1.0 / (1.0 + 0.5f64.exp()) * 0.5,
        ];
        assert!(y.iter().zip(want).all(|(y, w)| (y - w).abs() < 1e-15));
        let c = tensor1(&[1.0f64]);
        assert!(SwiGlu.eval(&n, &[Some(&a), Some(&c)]).is_err());
    }
}
