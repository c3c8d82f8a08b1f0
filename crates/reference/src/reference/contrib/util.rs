//! Shared pieces of the contrib kernels: reading inputs as f64 arrays, facts, broadcasting, row normalization.

use tract_onnx::prelude::tract_ndarray::{ArrayD, IxDyn};
use tract_onnx::prelude::*;

use super::node::{Fact, Node};

/// Input `slot` as an owned f64 array (cast from its own type).
pub fn f64s(n: &Node, ins: &[Option<&Tensor>], slot: usize) -> TractResult<ArrayD<f64>> {
    let t = opt(n, ins, slot)?;
    Ok(t.cast_to::<f64>()?.to_plain_array_view::<f64>()?.to_owned())
}

/// Input `slot` as an f64 array, or `None` where the optional input is absent.
pub fn f64s_opt(ins: &[Option<&Tensor>], slot: usize) -> TractResult<Option<ArrayD<f64>>> {
    match ins.get(slot).copied().flatten() {
        Some(t) => Ok(Some(
            t.cast_to::<f64>()?.to_plain_array_view::<f64>()?.to_owned(),
        )),
        None => Ok(None),
    }
}

/// Required input `slot`.
pub fn opt<'a>(n: &Node, ins: &[Option<&'a Tensor>], slot: usize) -> TractResult<&'a Tensor> {
    ins.get(slot)
        .copied()
        .flatten()
        .ok_or_else(|| anyhow::anyhow!("{} `{}` lacks its input {slot}", n.op(), n.proto.name))
}

/// Required fact of input `slot`.
pub fn fact<'a>(n: &Node, ins: &[Option<&'a Fact>], slot: usize) -> TractResult<&'a Fact> {
    ins.get(slot)
        .copied()
        .flatten()
        .ok_or_else(|| anyhow::anyhow!("{} `{}` lacks its input {slot}", n.op(), n.proto.name))
}

/// One f64 output shaped like input `slot` (element-wise kernels).
pub fn f64_like(n: &Node, ins: &[Option<&Fact>], slot: usize) -> TractResult<Vec<Fact>> {
    let (_, shape) = fact(n, ins, slot)?;
    Ok(vec![(f64::datum_type(), shape.clone())])
}

/// An f64 array as a tensor.
pub fn tensor(a: ArrayD<f64>) -> Tensor {
    a.into_tensor()
}

/// An f64 array of `shape` from row-major data.
pub fn shaped(shape: &[usize], data: Vec<f64>) -> TractResult<Tensor> {
    Ok(ArrayD::from_shape_vec(IxDyn(shape), data)?.into_tensor())
}

/// `a + b` with `b` broadcast to `a`'s shape (numpy rules, `b` no larger than `a`).
pub fn add_into(a: &mut ArrayD<f64>, b: &ArrayD<f64>, what: &str) -> TractResult<()> {
    let bb = b.broadcast(a.raw_dim()).ok_or_else(|| {
        anyhow::anyhow!(
            "{what} of shape {:?} does not broadcast to {:?}",
            b.shape(),
            a.shape()
        )
    })?;
    a.zip_mut_with(&bb, |x, &y| *x += y);
    Ok(())
}

/// Checks that a per-channel vector (gamma, beta, bias) has `h` elements.
pub fn check_len(a: &ArrayD<f64>, h: usize, what: &str) -> TractResult<()> {
    anyhow::ensure!(
        a.len() == h,
        "{what} has {} elements, the normalized axis {h}",
        a.len()
    );
    Ok(())
}

/// How a row of `h` values is normalized.
pub struct RowNorm<'a> {
    pub gamma: &'a [f64],
    pub beta: Option<&'a [f64]>,
    pub epsilon: f64,
    /// RMS normalization (no mean subtracted, no beta).
    pub simplified: bool,
}

impl RowNorm<'_> {
    /// Normalizes `row` in place; returns (mean, 1/σ). The variance is the two-pass definition, mean((x − μ)²),
    /// not E[x²] − μ² (ORT's single pass, which loses digits when |μ| ≫ σ).
    pub fn apply(&self, row: &mut [f64]) -> (f64, f64) {
        let h = row.len() as f64;
        let mean = if self.simplified {
            0.0
        } else {
            row.iter().sum::<f64>() / h
        };
        let var = row.iter().map(|&x| (x - mean) * (x - mean)).sum::<f64>() / h;
        let inv = 1.0 / (var + self.epsilon).sqrt();
        for (j, x) in row.iter_mut().enumerate() {
            let b = self.beta.map_or(0.0, |b| b[j]);
            *x = (*x - mean) * inv * self.gamma[j] + b;
        }
        (mean, inv)
    }
}

/// The input's element type when it is a float (the type a contrib op's float outputs take).
pub fn float_type(n: &Node, f: &Fact) -> TractResult<DatumType> {
    anyhow::ensure!(
        f.0.is_float(),
        "{} `{}` expects a float input, got {:?}",
        n.op(),
        n.proto.name,
        f.0
    );
    Ok(f.0)
}

/// Every element of `t`, cast to `T`, in row-major order.
pub fn values<T: Datum + Copy>(t: &Tensor) -> TractResult<Vec<T>> {
    Ok(t.cast_to::<T>()?
        .to_plain_array_view::<T>()?
        .iter()
        .copied()
        .collect())
}

/// A string attribute of `n`, or `default` where absent.
pub fn string(n: &Node, name: &str, default: &str) -> String {
    n.proto
        .attribute
        .iter()
        .find(|a| a.name == name)
        .map_or(default.into(), |a| {
            String::from_utf8_lossy(&a.s).into_owned()
        })
}

/// An integer attribute of `n`, or `None` where absent (where absence means something else than any value).
pub fn int_opt(n: &Node, name: &str) -> Option<i64> {
    n.proto
        .attribute
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.i)
}

/// The tensor of `shape` whose elements are `src`'s at the flat (row-major) indices `idx`, in `src`'s type.
fn pick_t<T: Datum>(src: &Tensor, idx: &[usize], shape: &[usize]) -> TractResult<Tensor> {
    let view = src.to_plain_array_view::<T>()?;
    let data: Vec<&T> = view.iter().collect();
    let out = (idx.iter())
        .map(|&i| {
            (data.get(i).map(|&v| v.clone()))
                .ok_or_else(|| anyhow::anyhow!("index {i} is outside {} elements", data.len()))
        })
        .collect::<TractResult<Vec<T>>>()?;
    Ok(ArrayD::from_shape_vec(IxDyn(shape), out)?.into_tensor())
}

/// The data-movement ops' output: `src`'s elements at the flat indices `idx`, shaped `shape`, of any element type
/// (values are copied, so integers, booleans and strings pass through exactly).
pub fn pick(src: &Tensor, idx: &[usize], shape: &[usize]) -> TractResult<Tensor> {
    tract_onnx::prelude::tract_data::dispatch_datum!(pick_t(src.datum_type())(src, idx, shape))
}

/// Row-major strides of `shape`, in elements.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}
