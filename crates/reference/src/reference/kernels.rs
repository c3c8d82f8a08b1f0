//! phantom's kernels for tract's typed nodes, in one table ([`OWN`]) that every evaluation reads (the run, `If`
//! bodies, decisions evaluated again): the heavy ops of [`super::fast`], the extrema with ONNX's NaN semantics
//! ([`super::extrema`]), `Resize` ([`super::resize`], [`super::resize_int`]), and here the f64 kernels of the
//! element-wise ops tract implements only in f16/f32 (Sigmoid, Erf, GeluExact, GeluApproximate, Silu, HardSwish,
//! LeakyRelu, RoundHalfToEven, IsNan, IsInf), Asinh and Acosh at the ends of f64's range.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::{SimplePlan, SimpleState};
use tract_onnx::tract_core::ops::element_wise::{ElementWiseMiniOp, ElementWiseOp};
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

fn map(f: impl Fn(f64) -> f64 + 'static) -> Option<Kernel> {
    Some(Kernel::Map(Box::new(f)))
}

/// The kernel of an element-wise op, when the op is the row's.
type Build = fn(&dyn ElementWiseMiniOp) -> Option<Kernel>;

/// The element-wise ops phantom computes in f64, one row each: the op, and its kernel.
const TABLE: &[(&str, Build)] = &[
    ("Sigmoid", |m| {
        m.downcast_ref::<Sigmoid>().and_then(|_| map(sigmoid))
    }),
    ("Erf", |m| {
        m.downcast_ref::<Erf>().and_then(|_| map(libm::erf))
    }),
    ("GeluExact", |m| {
        m.downcast_ref::<GeluExact>()
            .and_then(|_| map(|x| 0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))))
    }),
    ("GeluApproximate", |m| {
        let pow = if m.downcast_ref::<GeluApproximate>()?.fast_impl {
            2
        } else {
            3
        };
        let c = (2.0 / std::f64::consts::PI).sqrt();
        map(move |x| 0.5 * x * (1.0 + (c * (x + 0.044715 * x.powi(pow))).tanh()))
    }),
    ("Silu", |m| {
        m.downcast_ref::<Silu>()
            .and_then(|_| map(|x| x * sigmoid(x)))
    }),
    ("HardSwish", |m| {
        (m.downcast_ref::<HardSwish>()).and_then(|_| map(|x| x * (x / 6.0 + 0.5).clamp(0.0, 1.0)))
    }),
    ("LeakyRelu", |m| {
        let alpha = m.downcast_ref::<LeakyRelu>()?.alpha as f64;
        map(move |x| if x < 0.0 { alpha * x } else { x })
    }),
    // Rust's own asinh and acosh overflow to ±∞ from |x| ≈ 9e307 (they form 2x); libm's do not.
    ("Asinh", |m| {
        m.downcast_ref::<Asinh>().and_then(|_| map(libm::asinh))
    }),
    ("Acosh", |m| {
        m.downcast_ref::<Acosh>().and_then(|_| map(libm::acosh))
    }),
    ("RoundHalfToEven", |m| {
        (m.downcast_ref::<RoundHalfToEven>()).and_then(|_| map(f64::round_ties_even))
    }),
    ("IsNan", |m| {
        (m.downcast_ref::<IsNan>()).map(|_| Kernel::Predicate(Box::new(f64::is_nan)))
    }),
    ("IsInf", |m| {
        let i = m.downcast_ref::<IsInf>()?;
        let (pos, neg) = (i.detect_positive, i.detect_negative);
        Some(Kernel::Predicate(Box::new(move |x| {
            (pos && x == f64::INFINITY) || (neg && x == f64::NEG_INFINITY)
        })))
    }),
];

fn kernel_for(op: &ElementWiseOp) -> Option<Kernel> {
    TABLE.iter().find_map(|(_, build)| build(op.0.as_ref()))
}

/// A kernel for tract's typed nodes: `node`'s outputs, or `None` when the node is not the row's (`inputs` are then as
/// they were; a kernel may take an operand only this node holds).
type Own = fn(&TypedNode, &mut TVec<TValue>) -> Option<TractResult<TVec<TValue>>>;

/// phantom's kernels for tract's typed nodes, one row per family, tried in order: the heavy ops phantom runs faster
/// ([`super::fast`]), the extrema with ONNX's NaN semantics ([`super::extrema`]), the element-wise ops tract lacks in
/// f64 ([`TABLE`]), and `Resize` in f64 ([`super::resize`]) and on integers ([`super::resize_int`]).
const OWN: &[(&str, Own)] = &[
    ("element-wise (both cores)", super::fast::eval_binary),
    ("heavy ops", |n, i| super::fast::eval(n, i)),
    ("extrema", |n, i| super::extrema::eval(n, i)),
    ("element-wise (f64)", |n, i| element_wise(n, i)),
    ("Resize", |n, i| super::resize::eval(n, i)),
    ("Resize (integer)", |n, i| super::resize_int::eval(n, i)),
];

/// Evaluates `node` with phantom's own kernel when it has one ([`OWN`]). `None` means: not ours, let tract evaluate
/// it (`inputs` are as they were).
pub fn eval_own(node: &TypedNode, inputs: &mut TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    OWN.iter().find_map(|(_, own)| own(node, inputs))
}

/// `node` on its f64 element-wise kernel, when it is one of the ops tract lacks in f64 and its input is f64.
fn element_wise(node: &TypedNode, inputs: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
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

    /// Each element-wise op has one row, and each tract op of the table finds its kernel by its own row.
    #[test]
    fn each_element_wise_op_has_one_row() {
        let names: std::collections::HashSet<&str> = TABLE.iter().map(|(n, _)| *n).collect();
        assert_eq!(names.len(), TABLE.len());
        let sigmoid = tract_onnx::tract_core::ops::nn::sigmoid();
        let Some(Kernel::Map(f)) = kernel_for(&sigmoid) else {
            panic!("no kernel for Sigmoid");
        };
        assert_eq!(f(0.0), 0.5);
    }

    #[test]
    fn sigmoid_is_stable_at_extremes() {
        assert_eq!(sigmoid(-800.0), 0.0);
        assert_eq!(sigmoid(800.0), 1.0);
        assert!((sigmoid(0.3) - 0.574_442_516_811_659_9).abs() < 1e-15);
    }
}
