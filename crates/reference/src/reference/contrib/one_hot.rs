//! ONNX's `OneHot`: `values[1]` (on) where an index names the position along the new `axis` (default −1, the
//! innermost) of length `depth`, `values[0]` (off) elsewhere. A negative index counts from the end (−1 is
//! depth − 1); one outside [−depth, depth − 1], or a float index that is not a whole number, matches nothing and
//! gives a row of off values (the spec; ONNX's reference, op_one_hot.py). A float depth is truncated to an integer.
//!
//! tract builds its OneHot only from a constant depth and constant values, and types nothing when they are graph
//! inputs (the conformance suite's cases), so phantom computes it: the depth must be known when the model is typed.
//! The output takes the values' type, each element copied from `values`, so it is exact in every type.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::signal::known;
use super::util::{fact, opt, pick, values};

/// Claimed in any domain: tract cannot type OneHot.
pub(super) const TABLE: &[Row] = &[Row::any_domain("OneHot", &OneHot)];

/// The positive depth a one-element `depth` tensor holds.
fn depth(n: &Node, t: &Tensor) -> TractResult<usize> {
    let v = values::<f64>(t)?;
    match v.as_slice() {
        [d] if d.trunc() >= 1.0 && d.is_finite() => Ok(d.trunc() as usize),
        _ => anyhow::bail!(
            "{INVALID}OneHot `{}`: depth {v:?} is not one positive number",
            n.proto.name
        ),
    }
}

/// The output's shape, and where the new axis sits, for indices of `shape`.
fn out_shape(n: &Node, shape: &[usize], depth: usize) -> TractResult<(Vec<usize>, usize)> {
    let r = shape.len() as i64;
    let a = n.int("axis", -1);
    anyhow::ensure!(
        (-r - 1..=r).contains(&a),
        "{INVALID}OneHot `{}`: axis {a} is outside the output's rank {}",
        n.proto.name,
        r + 1
    );
    let axis = a.rem_euclid(r + 1) as usize;
    let mut out = shape.to_vec();
    out.insert(axis, depth);
    Ok((out, axis))
}

/// For each output element, 1 (on) or 0 (off): the index into `values`.
fn on_off(indices: &[f64], shape: &[usize], axis: usize, depth: usize) -> Vec<usize> {
    let inner: usize = shape[axis..].iter().product();
    let outer = indices.len().checked_div(inner).unwrap_or(0);
    let mut out = vec![0; outer * depth * inner];
    for o in 0..outer {
        for i in 0..inner {
            let v = indices[o * inner + i];
            let v = if v < 0.0 { v + depth as f64 } else { v };
            if v >= 0.0 && v < depth as f64 && v.fract() == 0.0 {
                out[(o * depth + v as usize) * inner + i] = 1;
            }
        }
    }
    out
}

struct OneHot;

impl Kernel for OneHot {
    fn value_slots(&self) -> &'static [usize] {
        &[1]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        vals: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        let (dt, v) = fact(n, ins, 2)?;
        anyhow::ensure!(
            v.iter().product::<usize>() == 2,
            "{INVALID}OneHot `{}`: values of shape {v:?}, not the two [off, on]",
            n.proto.name
        );
        let d = depth(n, known(n, vals, 1, "depth")?)?;
        Ok(vec![(*dt, out_shape(n, shape, d)?.0)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let idx = opt(n, ins, 0)?;
        let d = depth(n, opt(n, ins, 1)?)?;
        let vals = opt(n, ins, 2)?;
        anyhow::ensure!(
            vals.len() == 2,
            "{INVALID}OneHot `{}`: {} values, not the two [off, on]",
            n.proto.name,
            vals.len()
        );
        let (shape, axis) = out_shape(n, idx.shape(), d)?;
        let which = on_off(&values::<f64>(idx)?, idx.shape(), axis, d);
        Ok(vec![pick(vals, &which, &shape)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(axis: i64, indices: &[f64], shape: &[usize], depth: f64) -> TractResult<Tensor> {
        let n = Node::new(&tract_onnx::pb::NodeProto {
            op_type: "OneHot".into(),
            attribute: vec![tract_onnx::pb::AttributeProto {
                name: "axis".into(),
                i: axis,
                ..Default::default()
            }],
            ..Default::default()
        });
        let idx = Tensor::from_shape(shape, indices)?;
        let vals = Tensor::from_shape(&[2], &[2i32, 7])?;
        let y = OneHot.eval(&n, &[Some(&idx), Some(&tensor0(depth)), Some(&vals)])?;
        Ok(y.into_iter().next().unwrap())
    }

    #[test]
    fn negative_indices_wrap_and_out_of_range_ones_are_off() {
        let y = run(-1, &[1.0, -1.0, 3.0, -4.0], &[4], 3.0).unwrap();
        assert_eq!(y.shape(), [4, 3]);
        assert_eq!(
            values::<i32>(&y).unwrap(),
            [2, 7, 2, 2, 2, 7, 2, 2, 2, 2, 2, 2]
        );
    }

    #[test]
    fn the_new_axis_goes_where_axis_says() {
        // Indices [[0, 2]] with depth 3 at axis 1: output [1, 3, 2].
        let y = run(1, &[0.0, 2.0], &[1, 2], 3.5).unwrap();
        assert_eq!(y.shape(), [1, 3, 2]);
        assert_eq!(values::<i32>(&y).unwrap(), [7, 2, 2, 2, 2, 7]);
        assert!(run(3, &[0.0], &[1], 2.0).is_err());
        assert!(run(0, &[0.0], &[1], 0.0).is_err());
    }
}
