//! `CumSum` over integers for the reference. tract's fails on int64 values it holds as symbolic dims ("TDim is not a
//! number"): RoBERTa's position ids (a cumulative sum of the attention mask) in torch's dynamo export of every
//! RoBERTa-family model. Integers are summed in i64 (wrapping, as ONNX Runtime's do) and written back in their own
//! type, `exclusive` and `reverse` as ONNX defines them. Float CumSums stay tract's (in f64): its kernel also takes
//! shapes only known at run time (VITS sums predicted durations of data-dependent length), which phantom's kernels
//! do not; this one computes floats in f64 all the same. For that reason too only the form that fails in tract is
//! claimed: a CumSum of a `Cast` to an integer type (a mask cast to integers, as position ids are counted). Others
//! (the element index phantom's seeded hash noise counts, in VITS of run-time length) stay tract's. `CumProd`
//! (opset 26), which tract lacks, is always phantom's: floats multiplied in f64, integers in i64 (wrapping).

use tract_onnx::prelude::tract_ndarray::{ArrayD, Axis};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, opt};

/// CumSum over integers is claimed by [`over_integers`]; CumProd, which tract lacks, in any domain.
pub(super) const TABLE: &[Row] = &[
    Row::new("CumSum", &Cumulative { product: false }),
    Row::any_domain("CumProd", &Cumulative { product: true }),
];

/// The positions in `g` of ONNX CumSums of a `Cast` to an integer type.
pub fn over_integers(g: &tract_onnx::pb::GraphProto) -> std::collections::HashSet<usize> {
    use crate::model::types::{BFLOAT16, FLOAT, FLOAT16};
    let to_integer = |n: &tract_onnx::pb::NodeProto| {
        n.op_type == "Cast"
            && (n.attribute.iter())
                .any(|a| a.name == "to" && ![FLOAT, FLOAT16, BFLOAT16, 11].contains(&(a.i as i32)))
    };
    let cast: std::collections::HashSet<&String> = g
        .node
        .iter()
        .filter(|n| to_integer(n))
        .flat_map(|n| n.output.iter())
        .collect();
    (g.node.iter().enumerate())
        .filter(|(_, n)| n.op_type == "CumSum" && n.domain.is_empty())
        .filter(|(_, n)| n.input.first().is_some_and(|i| cast.contains(i)))
        .map(|(i, _)| i)
        .collect()
}

/// ONNX's CumSum (`product` false) or CumProd (true).
struct Cumulative {
    product: bool,
}

/// The output's element type for an input of type `dt`: f64 for floats, i64 for symbolic dims, else its own.
fn out_type(dt: DatumType) -> DatumType {
    match dt {
        _ if dt.is_float() => f64::datum_type(),
        DatumType::TDim => i64::datum_type(),
        _ => dt,
    }
}

/// Accumulates every lane of `a` along `axis` in place with `f`, starting from `identity`.
fn running<T: Copy>(
    a: &mut ArrayD<T>,
    axis: usize,
    (exclusive, reverse): (bool, bool),
    identity: T,
    f: impl Fn(T, T) -> T,
) {
    for mut lane in a.lanes_mut(Axis(axis)) {
        let n = lane.len();
        let mut acc = identity;
        for k in 0..n {
            let i = if reverse { n - 1 - k } else { k };
            let x = lane[i];
            lane[i] = if exclusive { acc } else { f(acc, x) };
            acc = f(acc, x);
        }
    }
}

impl Kernel for Cumulative {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        Ok(vec![(out_type(*dt), shape.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let axis = opt(n, ins, 1)?.cast_to::<i64>()?;
        let axis = *axis
            .to_plain_array_view::<i64>()?
            .iter()
            .next()
            .ok_or_else(|| {
                anyhow::anyhow!("{} `{}`: its axis input is empty", n.op(), n.proto.name)
            })?;
        let rank = x.rank() as i64;
        anyhow::ensure!(
            (-rank..rank.max(1)).contains(&axis),
            "{} `{}`: axis {axis} is outside rank {rank}",
            n.op(),
            n.proto.name
        );
        let axis = axis.rem_euclid(rank.max(1)) as usize;
        let flags = (n.int("exclusive", 0) != 0, n.int("reverse", 0) != 0);
        let dt = x.datum_type();
        if dt.is_float() {
            let mut a = x.cast_to::<f64>()?.to_plain_array_view::<f64>()?.to_owned();
            match self.product {
                true => running(&mut a, axis, flags, 1.0, |p, v| p * v),
                false => running(&mut a, axis, flags, 0.0, |p, v| p + v),
            }
            return Ok(vec![a.into_tensor()]);
        }
        // Integers wrap on overflow, as two's complement arithmetic does in ONNX Runtime.
        let mut a = x.cast_to::<i64>()?.to_plain_array_view::<i64>()?.to_owned();
        match self.product {
            true => running(&mut a, axis, flags, 1, i64::wrapping_mul),
            false => running(&mut a, axis, flags, 0, i64::wrapping_add),
        }
        Ok(vec![a.into_tensor().cast_to_dt(out_type(dt))?.into_owned()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::prelude::tract_ndarray::arr2;

    #[test]
    fn cumulative_sums_follow_exclusive_and_reverse() {
        let sum = |exclusive, reverse| {
            let mut a = arr2(&[[1i64, 2, 3], [4, 5, 6]]).into_dyn();
            running(&mut a, 1, (exclusive, reverse), 0, i64::wrapping_add);
            a.into_raw_vec_and_offset().0
        };
        assert_eq!(sum(false, false), [1, 3, 6, 4, 9, 15]);
        assert_eq!(sum(true, false), [0, 1, 3, 0, 4, 9]);
        assert_eq!(sum(false, true), [6, 5, 3, 15, 11, 6]);
        assert_eq!(sum(true, true), [5, 3, 0, 11, 6, 0]);
    }

    #[test]
    fn cumulative_products_start_from_one() {
        let mut a = arr2(&[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).into_dyn();
        running(&mut a, 0, (true, false), 1.0, |p, v| p * v);
        assert_eq!(
            a.into_raw_vec_and_offset().0,
            [1.0, 1.0, 1.0, 1.0, 2.0, 3.0]
        );
    }
}
