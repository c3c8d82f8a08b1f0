//! The layout kernels behind ONNX Runtime's NCHWc ops (`com.microsoft.nchwc`, written by its optimizer at
//! `ORT_ENABLE_ALL` on x86 and ARM CPUs), which [`crate::reference::nchwc`] expands each NCHWc node into around
//! ONNX's own op on the f64 kernels. A blocked tensor keeps the shape [N, Cp, H, W] (Cp: the channels rounded up
//! to the block size B) and holds its elements in the order [N, Cp/B, H, W, B], as MLAS's reorder routines
//! (`MlasReorderInputNchw`, `MlasReorderOutputNchw`, onnxruntime/core/mlas/lib/reorder.cpp) write it; a filter is
//! stored reordered the same way (`MlasReorderFilterOIHWBo`, `MlasReorderFilterOIHWBiBo`). Every kernel here only
//! moves elements (padding with zeros), so values pass through exactly:
//! - `NchwcBlock` [N, C, H, W] → blocked [N, Cp, H, W], the padded channels zero (`ReorderInput`);
//! - `NchwcUnblock` blocked [N, Cp, H, W] → [N, C, H, W], `channels` C (0: all Cp) (`ReorderOutput`);
//! - `NchwcConvInput` (X, W): a convolution's input in plain order, unblocked where the NCHWc `Conv` reads it
//!   blocked (a grouped convolution, or a filter of at least B input channels; a filter of fewer reads X as NCHW);
//! - `NchwcFilter` (W): the filter back in OIHW order, read as OIHWBo (fewer than B input channels per group, or
//!   grouped) or OIHWBiBo.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{f64s, fact, opt, pick, shaped};
use crate::tensor::{nchwc_filter_bibo, nchwc_filter_sources};

pub(super) const TABLE: &[Row] = &[
    Row::new("NchwcBlock", &Block),
    Row::new("NchwcUnblock", &Unblock),
    Row::new("NchwcConvInput", &ConvInput),
    Row::new("NchwcFilter", &Filter),
];

/// The block size, from the node's `block` attribute.
fn block(n: &Node) -> TractResult<usize> {
    let b = n.int("block", 0);
    anyhow::ensure!(b > 0, "{} `{}`: no block size", n.op(), n.proto.name);
    Ok(b as usize)
}

/// N, C, H·W of a rank-4 shape.
fn dims(n: &Node, shape: &[usize]) -> TractResult<(usize, usize, usize)> {
    anyhow::ensure!(
        shape.len() == 4,
        "{INVALID}{} `{}`: an NCHWc tensor has rank 4, got {shape:?}",
        n.op(),
        n.proto.name
    );
    Ok((shape[0], shape[1], shape[2] * shape[3]))
}

/// The flat index, in a blocked buffer of `cp` channels and `hw` positions per channel, of element (n, c, p).
fn blocked_at(b: usize, cp: usize, hw: usize, (n, c, p): (usize, usize, usize)) -> usize {
    ((n * (cp / b) + c / b) * hw + p) * b + c % b
}

/// Whether a convolution with filter dims `w` and `group` reads its input blocked (MLAS's rule: grouped, or at
/// least one block of input channels).
fn reads_blocked(b: usize, w: &[usize], group: i64) -> bool {
    group > 1 || w.get(1).is_some_and(|&i| i >= b)
}

/// The channels of `shape` rounded up to the block.
fn padded(b: usize, c: usize) -> usize {
    c.div_ceil(b) * b
}

/// The blocked buffer of a plain [N, C, H, W] `x` (floats, as f64), its padded channels zero.
fn to_blocked(b: usize, x: &[f64], (n, c, hw): (usize, usize, usize)) -> Vec<f64> {
    let cp = padded(b, c);
    let mut out = vec![0.0; n * cp * hw];
    for i in 0..n {
        for ch in 0..c {
            for p in 0..hw {
                out[blocked_at(b, cp, hw, (i, ch, p))] = x[(i * c + ch) * hw + p];
            }
        }
    }
    out
}

/// The flat source index in a blocked buffer of `cp` channels of every element of the plain [N, C, H·W] result.
fn from_blocked(b: usize, cp: usize, (n, c, hw): (usize, usize, usize)) -> Vec<usize> {
    let mut idx = Vec::with_capacity(n * c * hw);
    for i in 0..n {
        for ch in 0..c {
            for p in 0..hw {
                idx.push(blocked_at(b, cp, hw, (i, ch, p)));
            }
        }
    }
    idx
}

struct Block;

impl Kernel for Block {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        let (b, _) = (block(n)?, dims(n, shape)?);
        let mut out = shape.clone();
        out[1] = padded(b, shape[1]);
        Ok(vec![(*dt, out)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let (b, d) = (block(n)?, dims(n, x.shape())?);
        let plain: Vec<f64> = x.iter().copied().collect();
        let data = to_blocked(b, &plain, d);
        let mut shape = x.shape().to_vec();
        shape[1] = padded(b, shape[1]);
        Ok(vec![shaped(&shape, data)?])
    }
}

struct Unblock;

impl Unblock {
    fn out_shape(n: &Node, shape: &[usize]) -> TractResult<(usize, Vec<usize>)> {
        let (b, (_, cp, _)) = (block(n)?, dims(n, shape)?);
        let c = match n.int("channels", 0) {
            0 => cp,
            c => c as usize,
        };
        anyhow::ensure!(
            cp.is_multiple_of(b) && c <= cp && cp - c < b,
            "{} `{}`: {c} channels do not fit a blocked tensor of {cp} (block {b})",
            n.op(),
            n.proto.name
        );
        let mut out = shape.to_vec();
        out[1] = c;
        Ok((b, out))
    }
}

impl Kernel for Unblock {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        Ok(vec![(*dt, Unblock::out_shape(n, shape)?.1)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let (b, out) = Unblock::out_shape(n, x.shape())?;
        let (nb, c, hw) = dims(n, &out)?;
        let idx = from_blocked(b, x.shape()[1], (nb, c, hw));
        Ok(vec![pick(x, &idx, &out)?])
    }
}

struct ConvInput;

impl Kernel for ConvInput {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let ((dt, shape), (_, w)) = (fact(n, ins, 0)?, fact(n, ins, 1)?);
        dims(n, shape)?;
        let blocked = reads_blocked(block(n)?, w, n.int("group", 1));
        anyhow::ensure!(
            !blocked || shape[1].is_multiple_of(block(n)?),
            "Conv `{}` reads a blocked input of {} channels, not a multiple of the block {}",
            n.proto.name,
            shape[1],
            block(n)?
        );
        Ok(vec![(*dt, shape.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (x, w) = (opt(n, ins, 0)?, opt(n, ins, 1)?);
        let b = block(n)?;
        if !reads_blocked(b, w.shape(), n.int("group", 1)) {
            return Ok(vec![x.clone()]);
        }
        let d = dims(n, x.shape())?;
        Ok(vec![pick(x, &from_blocked(b, d.1, d), x.shape())?])
    }
}

struct Filter;

impl Kernel for Filter {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, w) = fact(n, ins, 0)?;
        let b = block(n)?;
        let bibo = nchwc_filter_bibo(b, w, n.int("group", 1));
        anyhow::ensure!(
            w.len() == 4 && w[0].is_multiple_of(b) && (!bibo || w[1].is_multiple_of(b)),
            "Conv `{}`: a filter of dims {w:?} is not in NCHWc blocks of {b}",
            n.proto.name
        );
        Ok(vec![(*dt, w.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let w = opt(n, ins, 0)?;
        let b = block(n)?;
        let bibo = nchwc_filter_bibo(b, w.shape(), n.int("group", 1));
        let idx = nchwc_filter_sources(b, w.shape(), bibo);
        Ok(vec![pick(w, &idx, w.shape())?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_then_unblocking_gives_the_plain_tensor_back_with_zero_padding_between() {
        let (b, n, c, hw) = (4, 2, 6, 3);
        let x: Vec<f64> = (0..n * c * hw).map(|v| v as f64 + 1.0).collect();
        let blocked = to_blocked(b, &x, (n, c, hw));
        assert_eq!(blocked.len(), n * 8 * hw);
        // Channel 0..4 of position 0 come first, then the same channels at position 1.
        assert_eq!(&blocked[..8], &[1.0, 4.0, 7.0, 10.0, 2.0, 5.0, 8.0, 11.0]);
        assert_eq!(blocked.iter().filter(|v| **v == 0.0).count(), n * 2 * hw);
        let back: Vec<f64> = (from_blocked(b, 8, (n, c, hw)).iter())
            .map(|&i| blocked[i])
            .collect();
        assert_eq!(back, x);
    }
}
