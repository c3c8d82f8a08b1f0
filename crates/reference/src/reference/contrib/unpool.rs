//! ONNX's `MaxUnpool` (tract has none): zeros of the output's shape, each element of X written at the flat index its
//! element of I gives (I is MaxPool's second output: indices into the flattened tensor MaxPool read). The output's
//! shape is the `output_shape` input where given (its value must be known when the model is typed), else the one
//! the attributes infer: N, C, then (Xᵢ − 1)·strideᵢ − padsᵢ(begin + end) + kernelᵢ per spatial axis.
//!
//! Where `output_shape` differs from the inferred shape, phantom follows the definition and ONNX Runtime: the flat
//! indices address the output's shape (what MaxPool indexed). ONNX's reference (op_max_unpool.py) writes them into
//! the inferred shape and pads that to `output_shape`, which misplaces every value (onnx/onnx#2398): the suite's
//! `test_maxunpool_export_with_output_shape` expects that.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::signal::known;
use super::util::{f64s, fact, float_type, opt, shaped, values};

/// Claimed in any domain: tract lacks MaxUnpool.
pub(super) const TABLE: &[Row] = &[Row::any_domain("MaxUnpool", &MaxUnpool)];

/// The output shape the attributes infer for an X of shape `x`.
fn inferred(n: &Node, x: &[usize]) -> TractResult<Vec<usize>> {
    let name = &n.proto.name;
    let kernel = n.ints("kernel_shape");
    let r = kernel.len();
    anyhow::ensure!(
        r >= 1 && x.len() == r + 2,
        "MaxUnpool `{name}`: X of shape {x:?} does not fit kernel_shape {kernel:?}"
    );
    let strides = match n.ints("strides") {
        s if s.is_empty() => vec![1; r],
        s => s,
    };
    let pads = match n.ints("pads") {
        p if p.is_empty() => vec![0; 2 * r],
        p => p,
    };
    anyhow::ensure!(
        strides.len() == r && pads.len() == 2 * r,
        "MaxUnpool `{name}`: strides {strides:?} or pads {pads:?} do not fit kernel_shape {kernel:?}"
    );
    let mut out = x[..2].to_vec();
    for i in 0..r {
        let d = (x[i + 2] as i64 - 1) * strides[i] - (pads[i] + pads[r + i]) + kernel[i];
        let d = usize::try_from(d).map_err(|_| {
            anyhow::anyhow!("MaxUnpool `{name}`: spatial axis {i} infers a negative extent {d}")
        })?;
        out.push(d);
    }
    Ok(out)
}

/// The output's shape: `given` (the output_shape input's value) where present, else the inferred one.
fn out_shape(n: &Node, x: &[usize], given: Option<&Tensor>) -> TractResult<Vec<usize>> {
    let infer = inferred(n, x)?;
    let Some(t) = given else {
        return Ok(infer);
    };
    let dims = values::<i64>(t)?;
    anyhow::ensure!(
        dims.len() == x.len() && dims.iter().all(|&d| d >= 0),
        "MaxUnpool `{}`: output_shape {dims:?} is not a shape of X's rank {}",
        n.proto.name,
        x.len()
    );
    Ok(dims.iter().map(|&d| d as usize).collect())
}

/// Zeros of `shape` with `x[i]` written at flat index `idx[i]`.
fn unpool(n: &Node, x: &[f64], idx: &[i64], shape: &[usize]) -> TractResult<Vec<f64>> {
    anyhow::ensure!(
        x.len() == idx.len(),
        "MaxUnpool `{}`: X has {} elements, I {}",
        n.proto.name,
        x.len(),
        idx.len()
    );
    let mut y = vec![0.0; shape.iter().product()];
    let len = y.len();
    for (&v, &i) in x.iter().zip(idx) {
        let slot = usize::try_from(i)
            .ok()
            .filter(|&i| i < len)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "MaxUnpool `{}`: index {i} is outside the output's {len} elements",
                    n.proto.name
                )
            })?;
        y[slot] = v;
    }
    Ok(y)
}

struct MaxUnpool;

impl Kernel for MaxUnpool {
    fn value_slots(&self) -> &'static [usize] {
        &[2]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let given = match ins.get(2).copied().flatten() {
            Some(_) => Some(known(n, values, 2, "output_shape")?),
            None => None,
        };
        Ok(vec![(float_type(n, x)?, out_shape(n, &x.1, given)?)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let shape = out_shape(n, x.shape(), ins.get(2).copied().flatten())?;
        let idx = values::<i64>(opt(n, ins, 1)?)?;
        let xs: Vec<f64> = f64s(n, ins, 0)?.iter().copied().collect();
        Ok(vec![shaped(&shape, unpool(n, &xs, &idx, &shape)?)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        let ints = |name: &str, v: &[i64]| tract_onnx::pb::AttributeProto {
            name: name.into(),
            ints: v.to_vec(),
            ..Default::default()
        };
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: "MaxUnpool".into(),
            attribute: vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
            ..Default::default()
        })
    }

    #[test]
    fn the_shape_is_inferred_or_given() {
        assert_eq!(
            out_shape(&node(), &[1, 1, 2, 2], None).unwrap(),
            [1, 1, 4, 4]
        );
        let given = tensor1(&[1i64, 1, 5, 5]);
        assert_eq!(
            out_shape(&node(), &[1, 1, 2, 2], Some(&given)).unwrap(),
            [1, 1, 5, 5]
        );
    }

    #[test]
    fn values_land_at_their_flat_indices() {
        let y = unpool(
            &node(),
            &[1.0, 2.0, 3.0, 4.0],
            &[5, 7, 13, 15],
            &[1, 1, 4, 4],
        )
        .unwrap();
        let at: Vec<usize> = (0..16).filter(|&i| y[i] != 0.0).collect();
        assert_eq!(at, [5, 7, 13, 15]);
        assert!(unpool(&node(), &[1.0], &[16], &[1, 1, 4, 4]).is_err());
    }
}
