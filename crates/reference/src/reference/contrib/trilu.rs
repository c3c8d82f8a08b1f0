//! `Trilu` whose `k` a node computes. tract's `Shape` yields its own dimension type, so a `k` computed from shapes
//! (a KV-cache decoder's causal mask: the cache length plus one) reaches tract's Trilu as that type, and typing
//! refuses it ("Impossible to unify TDim with I64"; a Cast to int64 stays that type in tract). phantom claims such a
//! Trilu ([`claimed`]) and keeps or zeroes each element of the last two axes itself: above or on the `k`-th
//! diagonal (`upper`, the default) or below or on it. A `k` that is an initializer or a graph input stays tract's.

use std::collections::HashSet;

use tract_onnx::pb::GraphProto;
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{fact, opt, values};

/// The Trilus whose k a node computes, which tract cannot type, are claimed by [`claimed`].
pub(super) const TABLE: &[Row] = &[Row::new("Trilu", &Trilu)];

/// The `Trilu` nodes of `g` whose `k` another node of `g` computes, by node index.
pub fn claimed(g: &GraphProto) -> HashSet<usize> {
    let computed: HashSet<&str> = (g.node.iter())
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    (g.node.iter().enumerate())
        .filter(|(_, n)| n.op_type == "Trilu" && n.domain.is_empty())
        .filter(|(_, n)| {
            n.input
                .get(1)
                .is_some_and(|k| computed.contains(k.as_str()))
        })
        .map(|(i, _)| i)
        .collect()
}

struct Trilu;

impl Kernel for Trilu {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        anyhow::ensure!(
            x.1.len() >= 2,
            "{INVALID}Trilu `{}`: input of rank {} (at least 2)",
            n.proto.name,
            x.1.len()
        );
        Ok(vec![x.clone()])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let k = match ins.get(1).copied().flatten() {
            Some(k) => *values::<i64>(k)?
                .first()
                .ok_or_else(|| anyhow::anyhow!("Trilu `{}`: an empty k", n.proto.name))?,
            None => 0,
        };
        let upper = n.int("upper", 1) != 0;
        let out = match x.datum_type() {
            DatumType::F64 => keep::<f64>(x, k, upper),
            DatumType::F32 => keep::<f32>(x, k, upper),
            DatumType::I64 => keep::<i64>(x, k, upper),
            DatumType::I32 => keep::<i32>(x, k, upper),
            DatumType::Bool => keep::<bool>(x, k, upper),
            dt => {
                let wide = x.cast_to_dt(DatumType::F64)?;
                keep::<f64>(&wide, k, upper)?
                    .cast_to_dt(dt)
                    .map(|t| t.into_owned())
            }
        }?;
        Ok(vec![out])
    }
}

/// `x` with the elements off the kept triangle of its last two axes set to zero.
fn keep<T: Datum + Copy + Default>(x: &Tensor, k: i64, upper: bool) -> TractResult<Tensor> {
    let shape = x.shape().to_vec();
    let r = shape.len();
    let (rows, cols) = (shape[r - 2], shape[r - 1]);
    let mut v = values::<T>(x)?;
    for (m, e) in v.iter_mut().enumerate() {
        let p = m % (rows * cols).max(1);
        let (i, j) = ((p / cols.max(1)) as i64, (p % cols.max(1)) as i64);
        let kept = match upper {
            true => j - i >= k,
            false => j - i <= k,
        };
        if !kept {
            *e = T::default();
        }
    }
    Ok(tract_ndarray::ArrayD::from_shape_vec(shape, v)?.into_tensor())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kth_diagonal_bounds_the_kept_triangle() {
        let x = tract_ndarray::Array2::from_shape_fn((3, 4), |(i, j)| (1 + 4 * i + j) as f64);
        let x = x.into_dyn().into_tensor();
        let got =
            |k, upper| -> Vec<f64> { values::<f64>(&keep::<f64>(&x, k, upper).unwrap()).unwrap() };
        let upper_2 = [0., 0., 3., 4., 0., 0., 0., 8., 0., 0., 0., 0.];
        assert_eq!(got(2, true), upper_2);
        let lower_m1 = [0., 0., 0., 0., 5., 0., 0., 0., 9., 10., 0., 0.];
        assert_eq!(got(-1, false), lower_m1);
    }
}
