//! `Squeeze` without axes: every extent-1 axis removed (ONNX's rule when `axes` is neither an attribute, before
//! opset 13, nor an input, from 13). tract requires the axes, so phantom evaluates this form itself: the output's
//! shape depends only on the input's, which is concrete here. Any element type passes through unchanged.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::fact;

/// Claimed without axes only ([`claims_squeeze`]).
pub(super) const TABLE: &[Row] = &[Row::new("Squeeze", &SqueezeAll)];

/// Whether `n` is a default-domain Squeeze that names no axes.
pub fn claims_squeeze(n: &tract_onnx::pb::NodeProto) -> bool {
    let axes_attr = n.attribute.iter().any(|a| a.name == "axes");
    let axes_input = n.input.get(1).is_some_and(|i| !i.is_empty());
    n.op_type == "Squeeze" && n.domain.is_empty() && !axes_attr && !axes_input
}

struct SqueezeAll;

fn squeezed(shape: &[usize]) -> Vec<usize> {
    shape.iter().copied().filter(|&d| d != 1).collect()
}

impl Kernel for SqueezeAll {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        Ok(vec![(*dt, squeezed(shape))])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = ins
            .first()
            .copied()
            .flatten()
            .ok_or_else(|| anyhow::anyhow!("Squeeze `{}` lacks its input", n.proto.name))?;
        Ok(vec![x.clone().into_shape(&squeezed(x.shape()))?])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_unit_axis_goes() {
        assert_eq!(super::squeezed(&[1, 3, 1, 4, 1]), vec![3, 4]);
        assert_eq!(super::squeezed(&[1, 1]), Vec::<usize>::new());
    }
}
