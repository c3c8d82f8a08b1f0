//! ONNX's `ReverseSequence` (tract parses it but cannot type it): for each slice `i` along `batch_axis` (default
//! 1), the first `sequence_lens[i]` elements along `time_axis` (default 0) in reverse order, the rest as they are.
//! The two axes are 0 and 1 in either order (the spec); each length lies in [0, time] (ONNX Runtime refuses others;
//! ONNX's reference, op_reverse_sequence.py, would read past the end). Values are copied, so every element type
//! passes through exactly.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{fact, opt, pick, strides, values};

/// Claimed in any domain: tract cannot type ReverseSequence.
pub(super) const TABLE: &[Row] = &[Row::any_domain("ReverseSequence", &ReverseSequence)];

/// (batch axis, time axis), validated against the input's `rank`.
fn axes(n: &Node, rank: usize) -> TractResult<(usize, usize)> {
    let (b, t) = (n.int("batch_axis", 1), n.int("time_axis", 0));
    anyhow::ensure!(
        rank >= 2 && matches!((b, t), (0, 1) | (1, 0)),
        "{INVALID}ReverseSequence `{}`: batch_axis {b} and time_axis {t} must be 0 and 1 of an input of rank 2 or \
         more (rank {rank})",
        n.proto.name
    );
    Ok((b as usize, t as usize))
}

/// The flat input index of every output element.
fn sources(n: &Node, shape: &[usize], lens: &[i64]) -> TractResult<Vec<usize>> {
    let (b, t) = axes(n, shape.len())?;
    let name = &n.proto.name;
    anyhow::ensure!(
        lens.len() == shape[b],
        "{INVALID}ReverseSequence `{name}`: {} sequence_lens for a batch of {}",
        lens.len(),
        shape[b]
    );
    let time = shape[t];
    if let Some(l) = lens.iter().find(|&&l| l < 0 || l as usize > time) {
        anyhow::bail!(
            "{INVALID}ReverseSequence `{name}`: sequence length {l} is outside 0..={time}"
        );
    }
    let st = strides(shape);
    let total: usize = shape.iter().product();
    let mut idx = Vec::with_capacity(total);
    for flat in 0..total {
        let (bi, ti) = ((flat / st[b]) % shape[b], (flat / st[t]) % time);
        let len = lens[bi] as usize;
        idx.push(match ti < len {
            true => flat - ti * st[t] + (len - 1 - ti) * st[t],
            false => flat,
        });
    }
    Ok(idx)
}

struct ReverseSequence;

impl Kernel for ReverseSequence {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        let (b, _) = axes(n, shape.len())?;
        let (_, lens) = fact(n, ins, 1)?;
        anyhow::ensure!(
            lens.as_slice() == [shape[b]],
            "{INVALID}ReverseSequence `{}`: sequence_lens of shape {lens:?} for a batch of {}",
            n.proto.name,
            shape[b]
        );
        Ok(vec![(*dt, shape.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let lens = values::<i64>(opt(n, ins, 1)?)?;
        let idx = sources(n, x.shape(), &lens)?;
        Ok(vec![pick(x, &idx, x.shape())?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(batch: i64, time: i64) -> Node {
        let int = |name: &str, i: i64| tract_onnx::pb::AttributeProto {
            name: name.into(),
            i,
            ..Default::default()
        };
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: "ReverseSequence".into(),
            attribute: vec![int("batch_axis", batch), int("time_axis", time)],
            ..Default::default()
        })
    }

    #[test]
    fn the_specs_examples() {
        // Example 2: batch on axis 0, lengths 1..=4 over a 4×4 of 0..16.
        let idx = sources(&node(0, 1), &[4, 4], &[1, 2, 3, 4]).unwrap();
        assert_eq!(idx, [0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12]);
        // Example 1: batch on axis 1, lengths 4, 3, 2, 1.
        let idx = sources(&node(1, 0), &[4, 4], &[4, 3, 2, 1]).unwrap();
        assert_eq!(idx, [12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15]);
    }

    #[test]
    fn bad_axes_or_lengths_are_refused() {
        assert!(sources(&node(0, 0), &[2, 2], &[1, 1]).is_err());
        assert!(sources(&node(0, 1), &[2, 2], &[3, 1]).is_err());
        assert!(sources(&node(0, 1), &[2, 2], &[1]).is_err());
        let x = Tensor::from_shape(&[2, 2], &[true, false, false, true]).unwrap();
        let lens = tensor1(&[2i64, 0]);
        let y = ReverseSequence
            .eval(&node(0, 1), &[Some(&x), Some(&lens)])
            .unwrap();
        assert_eq!(values::<bool>(&y[0]).unwrap(), [false, true, false, true]);
    }
}
