//! ONNX's `ReduceMax` and `ReduceMin` for the reference: tract gives the largest finite float where ONNX defines
//! the maximum of an empty set as −∞ (the minimum's as +∞), and cannot reduce booleans (ONNX 20: `any`/`all`).
//! And `ReduceLogSumExp`, which tract computes as ln(Σ exp x): that overflows to +∞ from x ≈ 710, well inside
//! float32's range, where phantom shifts by the maximum first (a row of −∞ still gives ln 0 = −∞, as ONNX's own
//! function body does).
//! Axes come from the attribute (before opset 18) or the second input, whose value must be known when the model is
//! typed (an initializer, a constant, or a graph input the run gives); `keepdims` and `noop_with_empty_axes` as ONNX
//! defines them. NaN propagates (the spec's reference uses `np.maximum.reduce`). Integers are reduced exactly in
//! their own type.

use tract_onnx::prelude::tract_ndarray::{ArrayD, Axis};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, float_type, opt};

/// Claimed in any domain: tract's ReduceMax and ReduceMin are wrong on an empty set or booleans, its
/// ReduceLogSumExp overflows.
pub(super) const TABLE: &[Row] = &[
    Row::any_domain("ReduceMax", &Reduction::Extreme(Extreme { max: true })),
    Row::any_domain("ReduceMin", &Reduction::Extreme(Extreme { max: false })),
    Row::any_domain("ReduceLogSumExp", &Reduction::LogSumExp),
];

/// `ReduceMax` (`max` true) or `ReduceMin`.
struct Extreme {
    max: bool,
}

/// The reduced axes (ascending, non-negative) of a rank-`rank` input; `None` when the node is an identity
/// (`noop_with_empty_axes` with no axes).
fn axes(n: &Node, rank: usize, given: Option<&Tensor>) -> TractResult<Option<Vec<usize>>> {
    let listed: Vec<i64> = match given {
        Some(t) => t
            .cast_to::<i64>()?
            .to_plain_array_view::<i64>()?
            .iter()
            .copied()
            .collect(),
        None => n.ints("axes"),
    };
    if listed.is_empty() {
        return Ok(match n.int("noop_with_empty_axes", 0) != 0 {
            true => None,
            false => Some((0..rank).collect()),
        });
    }
    let mut out = vec![];
    for a in listed {
        let r = rank as i64;
        anyhow::ensure!(
            (-r..r.max(1)).contains(&a),
            "{} `{}`: axis {a} is outside rank {rank}",
            n.op(),
            n.proto.name
        );
        out.push(a.rem_euclid(r.max(1)) as usize);
    }
    out.sort_unstable();
    out.dedup();
    Ok(Some(out))
}

/// The output shape: reduced axes dropped, or kept at extent 1 with `keepdims`.
fn reduced_shape(shape: &[usize], axes: &[usize], keep: bool) -> Vec<usize> {
    (shape.iter().enumerate())
        .filter_map(|(i, &d)| match axes.contains(&i) {
            true => keep.then_some(1),
            false => Some(d),
        })
        .collect()
}

/// `a` reduced over `axes` (kept at extent 1) from `identity` with `f`.
fn fold<T: Copy>(a: &ArrayD<T>, axes: &[usize], identity: T, f: impl Fn(T, T) -> T) -> ArrayD<T> {
    let mut out = a.clone();
    for &ax in axes {
        out = out.map_axis(Axis(ax), |lane| lane.iter().fold(identity, |m, &v| f(m, v)));
        out.insert_axis_inplace(Axis(ax));
    }
    out
}

/// The smallest and largest value of an integer type, as i64 (the type's own extremes are what ONNX gives for an
/// empty set; u64's largest is beyond i64 and is taken as i64's).
fn limits(dt: DatumType) -> (i64, i64) {
    match dt {
        DatumType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DatumType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DatumType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DatumType::U8 => (0, u8::MAX.into()),
        DatumType::U16 => (0, u16::MAX.into()),
        DatumType::U32 => (0, u32::MAX.into()),
        DatumType::U64 => (0, i64::MAX),
        _ => (i64::MIN, i64::MAX),
    }
}

impl Extreme {
    fn floats(&self, x: &Tensor, axes: &[usize]) -> TractResult<Tensor> {
        let a = x.cast_to::<f64>()?.to_plain_array_view::<f64>()?.to_owned();
        let (identity, pick): (f64, fn(f64, f64) -> f64) = match self.max {
            true => (f64::NEG_INFINITY, super::super::extrema::max),
            false => (f64::INFINITY, super::super::extrema::min),
        };
        Ok(fold(&a, axes, identity, pick).into_tensor())
    }

    fn integers(&self, x: &Tensor, axes: &[usize]) -> TractResult<Tensor> {
        let dt = x.datum_type();
        let a = x.cast_to::<i64>()?.to_plain_array_view::<i64>()?.to_owned();
        let (lo, hi) = limits(dt);
        let r = match self.max {
            true => fold(&a, axes, lo, i64::max),
            false => fold(&a, axes, hi, i64::min),
        };
        Ok(r.into_tensor().cast_to_dt(dt)?.into_owned())
    }

    fn booleans(&self, x: &Tensor, axes: &[usize]) -> TractResult<Tensor> {
        let a = x.to_plain_array_view::<bool>()?.to_owned();
        Ok(match self.max {
            true => fold(&a, axes, false, |m, v| m || v),
            false => fold(&a, axes, true, |m, v| m && v),
        }
        .into_tensor())
    }
}

/// The facts of a reduction's output: `x`'s type (floats as the reference computes them) and its reduced shape.
fn reduced_facts(
    n: &Node,
    ins: &[Option<&Fact>],
    values: &[Option<&Tensor>],
) -> TractResult<Vec<Fact>> {
    let (dt, shape) = fact(n, ins, 0)?;
    let dt = match dt.is_float() {
        true => float_type(n, &(*dt, shape.clone()))?,
        false => *dt,
    };
    let given = values.get(1).copied().flatten();
    anyhow::ensure!(
        given.is_some() || ins.get(1).copied().flatten().is_none(),
        "{} `{}`: its axes input must be known before the run",
        n.op(),
        n.proto.name
    );
    let out = match axes(n, shape.len(), given)? {
        Some(ax) => reduced_shape(shape, &ax, n.int("keepdims", 1) != 0),
        None => shape.clone(),
    };
    Ok(vec![(dt, out)])
}

/// The reductions phantom computes: `ReduceMax`/`ReduceMin` ([`Extreme`]) and `ReduceLogSumExp`, shifted by each
/// reduced set's maximum m: m + ln Σ exp(x − m). NaN propagates; an infinite m is the answer itself (+∞, or −∞ for a
/// set of −∞ or an empty one). `ReduceLogSumExp` of integers is computed in f64 and truncated to their type, as
/// ONNX's function body casts.
enum Reduction {
    Extreme(Extreme),
    LogSumExp,
}

impl Reduction {
    /// `x` reduced over `ax` (kept at extent 1).
    fn reduce(&self, x: &Tensor, ax: &[usize]) -> TractResult<Tensor> {
        Ok(match self {
            Reduction::Extreme(e) => match x.datum_type() {
                dt if dt.is_float() => e.floats(x, ax)?,
                DatumType::Bool => e.booleans(x, ax)?,
                _ => e.integers(x, ax)?,
            },
            Reduction::LogSumExp => {
                let a = x.cast_to::<f64>()?.to_plain_array_view::<f64>()?.to_owned();
                let r = log_sum_exp(&a, ax).into_tensor();
                match x.datum_type().is_float() {
                    true => r,
                    false => r.cast_to_dt(x.datum_type())?.into_owned(),
                }
            }
        })
    }
}

impl Kernel for Reduction {
    fn value_slots(&self) -> &'static [usize] {
        &[1]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        reduced_facts(n, ins, values)
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let Some(ax) = axes(n, x.rank(), ins.get(1).copied().flatten())? else {
            return Ok(vec![x.clone()]);
        };
        let shape = reduced_shape(x.shape(), &ax, n.int("keepdims", 1) != 0);
        Ok(vec![self.reduce(x, &ax)?.into_shape(&shape)?])
    }
}

/// m + ln Σ exp(x − m) over `axes` (kept at extent 1), m the maximum of each reduced set.
fn log_sum_exp(a: &ArrayD<f64>, axes: &[usize]) -> ArrayD<f64> {
    let nan_max = super::super::extrema::max;
    let m = fold(a, axes, f64::NEG_INFINITY, nan_max);
    let shifted = a - &m;
    let sums = fold(&shifted.mapv(f64::exp), axes, 0.0, |s, v| s + v);
    plus_log(&m, &sums)
}

/// m + ln s elementwise, where an infinite or NaN m is the answer itself.
fn plus_log(m: &ArrayD<f64>, sums: &ArrayD<f64>) -> ArrayD<f64> {
    let mut out = m.clone();
    out.zip_mut_with(sums, |m, &s| {
        if m.is_finite() {
            *m += s.ln();
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::prelude::tract_ndarray::{arr2, Array2};

    #[test]
    fn an_empty_set_reduces_to_the_identity() {
        let empty = Array2::<f64>::zeros((0, 3)).into_dyn();
        let r = fold(&empty, &[0], f64::NEG_INFINITY, f64::max);
        assert_eq!(r.shape(), &[1, 3]);
        assert!(r.iter().all(|v| *v == f64::NEG_INFINITY));
    }

    #[test]
    fn axes_reduce_in_turn_and_shapes_follow_keepdims() {
        let a = arr2(&[[1i64, 7, 3], [4, 5, 6]]).into_dyn();
        assert_eq!(
            fold(&a, &[1], i64::MIN, i64::max)
                .into_raw_vec_and_offset()
                .0,
            [7, 6]
        );
        assert_eq!(
            fold(&a, &[0, 1], i64::MAX, i64::min)
                .into_raw_vec_and_offset()
                .0,
            [1]
        );
        assert_eq!(reduced_shape(&[2, 3, 4], &[0, 2], false), [3]);
        assert_eq!(reduced_shape(&[2, 3, 4], &[0, 2], true), [1, 3, 1]);
    }

    /// Shifted by the maximum: no overflow at 1e300, −∞ for a row of −∞, NaN propagated.
    #[test]
    fn log_sum_exp_is_shifted_by_the_maximum() {
        let inf = f64::INFINITY;
        let a = arr2(&[
            [1e300, 0.0],
            [-inf, -inf],
            [1.0, f64::NAN],
            [inf, 1.0],
            [0.0, 0.0],
        ])
        .into_dyn();
        let r = log_sum_exp(&a, &[1]).into_raw_vec_and_offset().0;
        assert_eq!(&r[..2], &[1e300, -inf]);
        assert!(r[2].is_nan());
        assert_eq!(r[3], inf);
        assert!((r[4] - std::f64::consts::LN_2).abs() < 1e-16);
    }
}
