//! ONNX's `Compress`: the slices of the input along `axis` whose `condition` entry is true, or, without `axis`, the
//! elements of the flattened input whose entry is (numpy.compress, which ONNX's reference calls). A condition
//! shorter than the axis selects among its first entries only; one longer may not select past the axis's end.
//!
//! tract's Compress cannot be typed (its output's length is the number of true entries), so phantom computes it:
//! the condition's value must be known when the model is typed (a constant, or a graph input the run gives, as in
//! the conformance suite). Values are copied, so every element type passes through exactly.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::signal::known;
use super::util::{fact, int_opt, opt, pick, strides, values};

/// Claimed in any domain: tract cannot type Compress.
pub(super) const TABLE: &[Row] = &[Row::any_domain("Compress", &Compress)];

/// The selected indices along the axis of length `len`.
fn selected(n: &Node, cond: &[bool], len: usize) -> TractResult<Vec<usize>> {
    let chosen: Vec<usize> = (0..cond.len()).filter(|&i| cond[i]).collect();
    if let Some(&i) = chosen.iter().find(|&&i| i >= len) {
        anyhow::bail!(
            "{INVALID}Compress `{}`: condition selects index {i}, past the axis's {len} entries",
            n.proto.name
        );
    }
    Ok(chosen)
}

/// The axis (`None`: the flattened input), validated against `rank`.
fn axis(n: &Node, rank: usize) -> TractResult<Option<usize>> {
    let Some(a) = int_opt(n, "axis") else {
        return Ok(None);
    };
    let r = rank as i64;
    anyhow::ensure!(
        (-r..r).contains(&a),
        "{INVALID}Compress `{}`: axis {a} is outside the input's rank {rank}",
        n.proto.name
    );
    Ok(Some(a.rem_euclid(r) as usize))
}

/// The output's shape and the flat input index of each of its elements.
fn layout(n: &Node, shape: &[usize], cond: &[bool]) -> TractResult<(Vec<usize>, Vec<usize>)> {
    let Some(ax) = axis(n, shape.len())? else {
        let chosen = selected(n, cond, shape.iter().product())?;
        return Ok((vec![chosen.len()], chosen));
    };
    let chosen = selected(n, cond, shape[ax])?;
    let mut out = shape.to_vec();
    out[ax] = chosen.len();
    let st = strides(shape);
    let outer: usize = shape[..ax].iter().product();
    let inner = st[ax];
    let mut idx = Vec::with_capacity(out.iter().product());
    for o in 0..outer {
        for &c in &chosen {
            let base = o * shape[ax] * inner + c * inner;
            idx.extend(base..base + inner);
        }
    }
    Ok((out, idx))
}

struct Compress;

impl Kernel for Compress {
    fn value_slots(&self) -> &'static [usize] {
        &[1]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        vals: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        let cond = values::<bool>(known(n, vals, 1, "condition")?)?;
        Ok(vec![(*dt, layout(n, shape, &cond)?.0)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let cond = values::<bool>(opt(n, ins, 1)?)?;
        let (shape, idx) = layout(n, x.shape(), &cond)?;
        Ok(vec![pick(x, &idx, &shape)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(axis: Option<i64>) -> Node {
        let attribute = (axis.into_iter())
            .map(|i| tract_onnx::pb::AttributeProto {
                name: "axis".into(),
                i,
                ..Default::default()
            })
            .collect();
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: "Compress".into(),
            attribute,
            ..Default::default()
        })
    }

    fn run(axis: Option<i64>, cond: &[bool]) -> TractResult<(Vec<usize>, Vec<i64>)> {
        let x = Tensor::from_shape(&[3, 2], &[1i64, 2, 3, 4, 5, 6])?;
        let c = Tensor::from_shape(&[cond.len()], cond)?;
        let y = Compress.eval(&node(axis), &[Some(&x), Some(&c)])?;
        Ok((y[0].shape().to_vec(), values::<i64>(&y[0])?))
    }

    #[test]
    fn rows_columns_or_flat_elements_are_kept() {
        assert_eq!(
            run(Some(0), &[false, true, true]).unwrap(),
            (vec![2, 2], vec![3, 4, 5, 6])
        );
        assert_eq!(
            run(Some(-1), &[false, true]).unwrap(),
            (vec![3, 1], vec![2, 4, 6])
        );
        assert_eq!(
            run(None, &[false, true, false, false, true]).unwrap(),
            (vec![2], vec![2, 5])
        );
    }

    #[test]
    fn a_selection_past_the_axis_or_a_bad_axis_is_refused() {
        assert!(run(Some(1), &[false, false, true]).is_err());
        assert!(run(Some(2), &[true]).is_err());
        assert_eq!(run(Some(1), &[true, false, false]).unwrap().1, [1, 3, 5]);
    }
}
