//! ONNX's `SpaceToDepth` in the `CRD` mode opset 28 added: each `blocksize`×`blocksize` block of an [N, C, H, W]
//! input moves into channels, giving [N, C·b², H/b, W/b]. `DCR` (the default, and all earlier opsets have) orders
//! the new channels block position first, (bh·b + bw)·C + c; `CRD` channel first, c·b² + bh·b + bw (ONNX's
//! reference, op_space_to_depth.py). tract's SpaceToDepth reads `blocksize` only and computes DCR whatever the
//! mode, so phantom claims the nodes whose mode is not DCR ([`claims`]). Values are copied, so any element type
//! passes through exactly.

use tract_onnx::pb::NodeProto;
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{fact, opt, pick, string};

/// Claimed in CRD mode only ([`claims`]): tract computes it as DCR.
pub(super) const TABLE: &[Row] = &[Row::new("SpaceToDepth", &SpaceToDepth)];

/// Whether phantom evaluates this SpaceToDepth: its mode is other than DCR (tract computes DCR only).
pub fn claims(n: &NodeProto) -> bool {
    (n.attribute.iter()).any(|a| a.name == "mode" && a.s.as_slice() != b"DCR")
}

/// The block size, whether the mode is CRD, and the output's shape, for an input of `shape`.
fn geometry(n: &Node, shape: &[usize]) -> TractResult<(usize, bool, Vec<usize>)> {
    let name = &n.proto.name;
    let crd = match string(n, "mode", "DCR").as_str() {
        "DCR" => false,
        "CRD" => true,
        other => {
            anyhow::bail!("{INVALID}SpaceToDepth `{name}`: unknown mode `{other}` (DCR or CRD)")
        }
    };
    let b = n.req_int("blocksize")?;
    let ok = |d: usize| b > 0 && d.is_multiple_of(b as usize);
    anyhow::ensure!(
        shape.len() == 4 && ok(shape[2]) && ok(shape[3]),
        "{INVALID}SpaceToDepth `{name}`: blocksize {b} does not divide the H and W of an [N, C, H, W] input \
         (got {shape:?})"
    );
    let b = b as usize;
    let out = vec![shape[0], shape[1] * b * b, shape[2] / b, shape[3] / b];
    Ok((b, crd, out))
}

/// The flat input index of every output element.
fn sources(shape: &[usize], b: usize, crd: bool, out: &[usize]) -> Vec<usize> {
    let (c_in, h_in, w_in) = (shape[1], shape[2], shape[3]);
    let mut idx = Vec::with_capacity(out.iter().product());
    for nb in 0..out[0] {
        for oc in 0..out[1] {
            let (c, bh, bw) = match crd {
                true => (oc / (b * b), (oc % (b * b)) / b, oc % b),
                false => (oc % c_in, oc / c_in / b, (oc / c_in) % b),
            };
            for h in 0..out[2] {
                for w in 0..out[3] {
                    let (y, x) = (h * b + bh, w * b + bw);
                    idx.push(((nb * c_in + c) * h_in + y) * w_in + x);
                }
            }
        }
    }
    idx
}

struct SpaceToDepth;

impl Kernel for SpaceToDepth {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        Ok(vec![(*dt, geometry(n, shape)?.2)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let (b, crd, out) = geometry(n, x.shape())?;
        Ok(vec![pick(x, &sources(x.shape(), b, crd, &out), &out)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(mode: &str, blocksize: i64) -> Node {
        Node::new(&NodeProto {
            op_type: "SpaceToDepth".into(),
            attribute: vec![
                tract_onnx::pb::AttributeProto {
                    name: "blocksize".into(),
                    i: blocksize,
                    ..Default::default()
                },
                tract_onnx::pb::AttributeProto {
                    name: "mode".into(),
                    s: mode.as_bytes().to_vec(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        })
    }

    /// The output channels of a [1, 2, 2, 2] input 0..8 with blocksize 2 (each channel one element).
    fn channels(mode: &str) -> Vec<usize> {
        let (b, crd, out) = geometry(&node(mode, 2), &[1, 2, 2, 2]).unwrap();
        assert_eq!(out, [1, 8, 1, 1]);
        sources(&[1, 2, 2, 2], b, crd, &out)
    }

    #[test]
    fn crd_orders_channels_first_dcr_blocks_first() {
        assert_eq!(channels("CRD"), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(channels("DCR"), [0, 4, 1, 5, 2, 6, 3, 7]);
    }

    #[test]
    fn bad_modes_and_sizes_are_refused() {
        assert!(geometry(&node("XYZ", 2), &[1, 2, 2, 2]).is_err());
        assert!(geometry(&node("CRD", 3), &[1, 2, 2, 2]).is_err());
        assert!(geometry(&node("CRD", 0), &[1, 2, 2, 2]).is_err());
        assert!(claims(&node("CRD", 2).proto) && !claims(&node("DCR", 2).proto));
    }
}
