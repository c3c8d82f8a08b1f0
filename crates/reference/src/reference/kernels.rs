//! phantom's own f64 kernels for the element-wise ops tract implements only in f16/f32 (Sigmoid, Erf,
//! GeluExact, GeluApproximate, Silu, HardSwish, LeakyRelu, RoundHalfToEven, IsNan, IsInf), Asinh and Acosh at
//! the ends of f64's range, and the entry to the extrema with ONNX's NaN semantics ([`super::extrema`]) and to
//! the heavy-op kernels of [`super::fast`].

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::{SimplePlan, SimpleState};
use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
use tract_onnx::tract_core::ops::logic::IfThenElse;
use tract_onnx::tract_core::ops::math::{Acosh, Asinh, Erf, IsInf, IsNan, RoundHalfToEven};
use tract_onnx::tract_core::ops::nn::{
    GeluApproximate, GeluExact, HardSwish, LeakyRelu, Sigmoid, Silu,
};

/// The logistic function, stable at both extremes.
pub(super) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

enum Kernel {
    Map(Box<dyn Fn(f64) -> f64>),
    Predicate(Box<dyn Fn(f64) -> bool>),
}

fn kernel_for(op: &ElementWiseOp) -> Option<Kernel> {
    let m = op.0.as_ref();
    let map = |f: Box<dyn Fn(f64) -> f64>| Some(Kernel::Map(f));
    if m.downcast_ref::<Sigmoid>().is_some() {
        return map(Box::new(sigmoid));
    }
    if m.downcast_ref::<Erf>().is_some() {
        return map(Box::new(libm::erf));
    }
    if m.downcast_ref::<GeluExact>().is_some() {
        return map(Box::new(|x| {
            0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))
        }));
    }
    if let Some(g) = m.downcast_ref::<GeluApproximate>() {
        let pow = if g.fast_impl { 2 } else { 3 };
        let c = (2.0 / std::f64::consts::PI).sqrt();
        return map(Box::new(move |x| {
            0.5 * x * (1.0 + (c * (x + 0.044715 * x.powi(pow))).tanh())
        }));
    }
    if m.downcast_ref::<Silu>().is_some() {
        return map(Box::new(|x| x * sigmoid(x)));
    }
    if m.downcast_ref::<HardSwish>().is_some() {
        return map(Box::new(|x| x * (x / 6.0 + 0.5).clamp(0.0, 1.0)));
    }
    if let Some(l) = m.downcast_ref::<LeakyRelu>() {
        let alpha = l.alpha as f64;
        return map(Box::new(move |x| if x < 0.0 { alpha * x } else { x }));
    }
    // Rust's own asinh and acosh overflow to ±∞ from |x| ≈ 9e307 (they form 2x); libm's do not.
    if m.downcast_ref::<Asinh>().is_some() {
        return map(Box::new(libm::asinh));
    }
    if m.downcast_ref::<Acosh>().is_some() {
        return map(Box::new(libm::acosh));
    }
    if m.downcast_ref::<RoundHalfToEven>().is_some() {
        return map(Box::new(f64::round_ties_even));
    }
    if m.downcast_ref::<IsNan>().is_some() {
        return Some(Kernel::Predicate(Box::new(f64::is_nan)));
    }
    if let Some(i) = m.downcast_ref::<IsInf>() {
        let (pos, neg) = (i.detect_positive, i.detect_negative);
        return Some(Kernel::Predicate(Box::new(move |x| {
            (pos && x == f64::INFINITY) || (neg && x == f64::NEG_INFINITY)
        })));
    }
    None
}

/// Evaluates `node` with phantom's own f64 kernel when it is one of the ops tract lacks in f64, or one of the
/// heavy ops phantom runs faster ([`super::fast`]), and its inputs are f64 (an operand only this node holds may
/// become the output). `None` means: not ours, let tract evaluate it (`inputs` are as they were).
pub fn eval_own(node: &TypedNode, inputs: &mut TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    if let Some(r) =
        super::fast::eval_binary(node, inputs).or_else(|| super::fast::eval(node, inputs))
    {
        return Some(r);
    }
    if let Some(r) = super::extrema::eval(node, inputs) {
        return Some(r);
    }
    let op = node.op_as::<ElementWiseOp>()?;
    if inputs.len() != 1 || inputs[0].datum_type() != f64::datum_type() {
        return None;
    }
    let kernel = kernel_for(op)?;
    Some((|| {
        let x = inputs[0].to_plain_array_view::<f64>()?;
        Ok(match kernel {
            Kernel::Map(f) => tvec!(x.mapv(f).into_tvalue()),
            Kernel::Predicate(f) => tvec!(x.mapv(f).into_tvalue()),
        })
    })())
}

/// Runs the branch of an `If` the condition selects, with phantom's kernels applied inside it too (tract's own
/// `IfThenElse::eval` runs the body without the hook).
pub fn eval_if(ite: &IfThenElse, inputs: &TVec<TValue>) -> TractResult<TVec<TValue>> {
    let cond = inputs[0].cast_to_scalar::<bool>()?;
    let (mapping, body) = if cond {
        (&ite.then_input_mapping, &ite.then_body)
    } else {
        (&ite.else_input_mapping, &ite.else_body)
    };
    let body_inputs: TVec<TValue> = mapping.iter().map(|&i| inputs[i].clone()).collect();
    run_with_own(&SimplePlan::new(body.clone())?, body_inputs)
}

/// Runs a body's plan with phantom's kernels applied inside it, nested `If`s included, shape values handed on with
/// the symbols the run has resolved.
pub fn run_with_own(
    plan: &std::sync::Arc<TypedSimplePlan>,
    inputs: TVec<TValue>,
) -> TractResult<TVec<TValue>> {
    let mut state = SimpleState::new(plan)?;
    state.run_plan_with_eval(inputs, |ctx, st, node, ins| -> TractResult<TVec<TValue>> {
        let mut ins = ins
            .into_iter()
            .map(|v| super::symbols::resolved(v, ctx.symbols))
            .collect::<TractResult<TVec<_>>>()?;
        if let Some(inner) = node.op_as::<IfThenElse>() {
            return eval_if(inner, &ins);
        }
        match eval_own(node, &mut ins) {
            Some(r) => r,
            None => tract_onnx::tract_core::plan::eval(ctx, st, node, ins),
        }
    })
}

/// Ops tract evaluates in f32 internally even when fed f64 (substrings of the op name), with the reason shown
/// on the node.
pub const F32_INSIDE: &[(&str, &str)] = &[
    ("Resize", "tract computes Resize in f32"),
    ("GridSample", "tract computes GridSample in f32"),
    (
        "MeanOfSquares",
        "tract computes the RMS-norm mean of squares in f32",
    ),
    ("RmsNorm", "tract computes RmsNorm in f32"),
    ("Sdpa", "tract's attention kernel accumulates in f32"),
    ("MatMulNBits", "tract dequantizes MatMulNBits in f32"),
    ("DequantizeLinear", "tract dequantizes in f32"),
    ("MelWeightMatrix", "tract computes MelWeightMatrix in f32"),
    (
        "TreeEnsemble",
        "tract computes a tree ensemble classifier in f32",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmoid_is_stable_at_extremes() {
        assert_eq!(sigmoid(-800.0), 0.0);
        assert_eq!(sigmoid(800.0), 1.0);
        assert!((sigmoid(0.3) - 0.574_442_516_811_659_9).abs() < 1e-15);
    }
}
