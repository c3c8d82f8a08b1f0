//! ONNX's `TensorScatter` (opset 24, a KV cache's in-place update; tract has none): the past cache with `update`
//! written along `axis` (default −2, never the batch axis 0) from each batch row's `write_indices` entry (0 where
//! absent). In `linear` mode a write past the axis's end is an error; in `circular` mode positions wrap around it.
//! As ONNX's reference (op_tensor_scatter.py): update and cache agree on every axis but `axis`, where the update is
//! no longer. Values are copied, so any element type passes through unchanged.

use tract_onnx::prelude::tract_ndarray::{ArrayD, IxDyn};
use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::dispatch_datum;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, opt, string, values};

/// Claimed in any domain: tract lacks TensorScatter.
pub(super) const TABLE: &[Row] = &[Row::any_domain("TensorScatter", &TensorScatter)];

/// The scatter's geometry: the cache [outer…, max, inner…] split at `axis`, the update's `len` along it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Layout {
    batch: usize,
    /// Elements of the axes between batch and `axis` (exclusive), per batch row.
    middle: usize,
    max: usize,
    len: usize,
    /// Elements of the axes after `axis`.
    inner: usize,
    circular: bool,
}

impl Layout {
    fn new(n: &Node, cache: &[usize], update: &[usize]) -> TractResult<Layout> {
        let name = &n.proto.name;
        let rank = cache.len() as i64;
        let axis = n.int("axis", -2);
        anyhow::ensure!(
            (-rank..rank).contains(&axis) && axis.rem_euclid(rank.max(1)) != 0,
            "TensorScatter `{name}`: axis {axis} is the batch axis or outside rank {rank}"
        );
        let axis = axis.rem_euclid(rank) as usize;
        let fits = update.len() == cache.len()
            && (0..cache.len()).all(|i| {
                if i == axis {
                    update[i] <= cache[i]
                } else {
                    update[i] == cache[i]
                }
            });
        anyhow::ensure!(fits, "TensorScatter `{name}`: update of shape {update:?} does not fit the cache's {cache:?} along axis {axis}");
        let circular = match string(n, "mode", "linear").as_str() {
            "linear" => false,
            "circular" => true,
            other => anyhow::bail!("TensorScatter `{name}`: unknown mode `{other}`"),
        };
        Ok(Layout {
            batch: cache[0],
            middle: cache[1..axis].iter().product(),
            max: cache[axis],
            len: update[axis],
            inner: cache[axis + 1..].iter().product(),
            circular,
        })
    }

    /// (cache offset, update offset) of the first element of each run of `inner` elements the update writes.
    fn moves(&self, n: &Node, starts: &[i64]) -> TractResult<Vec<(usize, usize)>> {
        let name = &n.proto.name;
        anyhow::ensure!(
            starts.len() == self.batch,
            "TensorScatter `{name}`: {} write_indices for a batch of {}",
            starts.len(),
            self.batch
        );
        let mut out = Vec::with_capacity(self.batch * self.middle * self.len);
        for (b, &start) in starts.iter().enumerate() {
            for m in 0..self.middle {
                let row = b * self.middle + m;
                for s in 0..self.len {
                    let at = start + s as i64;
                    let at = if self.circular {
                        at.rem_euclid(self.max.max(1) as i64)
                    } else {
                        at
                    };
                    let at = usize::try_from(at).ok().filter(|&a| a < self.max).ok_or_else(|| {
                        anyhow::anyhow!("TensorScatter `{name}`: batch row {b} writes position {at}, outside 0..{}", self.max)
                    })?;
                    out.push((
                        (row * self.max + at) * self.inner,
                        (row * self.len + s) * self.inner,
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// `cache` with each run of `inner` elements of `update` copied to where `moves` says.
fn scatter<T: Datum>(
    cache: &Tensor,
    update: &Tensor,
    moves: &[(usize, usize)],
    inner: usize,
) -> TractResult<Tensor> {
    let mut out: Vec<T> = cache.to_plain_array_view::<T>()?.iter().cloned().collect();
    let src: Vec<T> = update.to_plain_array_view::<T>()?.iter().cloned().collect();
    for &(to, from) in moves {
        out[to..to + inner].clone_from_slice(&src[from..from + inner]);
    }
    Ok(ArrayD::from_shape_vec(IxDyn(cache.shape()), out)?.into_tensor())
}

struct TensorScatter;

impl Kernel for TensorScatter {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, cache) = fact(n, ins, 0)?;
        let (udt, update) = fact(n, ins, 1)?;
        anyhow::ensure!(
            dt == udt,
            "TensorScatter `{}`: cache of {dt:?}, update of {udt:?}",
            n.proto.name
        );
        Layout::new(n, cache, update)?;
        Ok(vec![(*dt, cache.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (cache, update) = (opt(n, ins, 0)?, opt(n, ins, 1)?);
        let layout = Layout::new(n, cache.shape(), update.shape())?;
        let starts = match ins.get(2).copied().flatten() {
            Some(t) => values::<i64>(t)?,
            None => vec![0; layout.batch],
        };
        let moves = layout.moves(n, &starts)?;
        let update = update.cast_to_dt(cache.datum_type())?;
        let out = dispatch_datum!(scatter(cache.datum_type())(
            cache,
            &update,
            &moves,
            layout.inner
        ))?;
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(mode: &str) -> Node {
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: "TensorScatter".into(),
            attribute: vec![tract_onnx::pb::AttributeProto {
                name: "mode".into(),
                s: mode.as_bytes().to_vec(),
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    fn run(mode: &str, starts: &[i64]) -> TractResult<Vec<i64>> {
        // Cache [2, 4, 1] of zeros, update [2, 2, 1] of 1, 2 (row 0) and 3, 4 (row 1).
        let cache = Tensor::zero::<i64>(&[2, 4, 1])?;
        let update = Tensor::from_shape(&[2, 2, 1], &[1i64, 2, 3, 4])?;
        let idx = Tensor::from_shape(&[2], starts)?;
        let y = TensorScatter.eval(&node(mode), &[Some(&cache), Some(&update), Some(&idx)])?;
        values::<i64>(&y[0])
    }

    #[test]
    fn linear_writes_from_each_rows_index() {
        assert_eq!(run("linear", &[1, 2]).unwrap(), [0, 1, 2, 0, 0, 0, 3, 4]);
        assert!(run("linear", &[3, 0]).is_err());
    }

    #[test]
    fn circular_wraps_around() {
        assert_eq!(run("circular", &[3, 0]).unwrap(), [2, 0, 0, 1, 3, 4, 0, 0]);
    }
}
