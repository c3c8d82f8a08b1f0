//! ONNX's `DeformConv` (opset 19; tract has none) in f64: a grouped convolution whose every kernel tap reads X at
//! its regular position plus a learned fractional offset, interpolated (bi)linearly, a tap outside X reading 0, and
//! scaled by an optional mask. X [N, C, D1..Dr], W [OC, C/group, k1..kr], offset [N, offset_group·K·r, O1..Or]
//! (K = k1·…·kr; for offset group g and kernel tap t the r displacements, outermost axis first), B [OC] and mask
//! [N, offset_group·K, O1..Or] optional; Y [N, OC, O1..Or] with Oᵢ = ⌊(Dᵢ + pads − ((kᵢ − 1)·dilationᵢ + 1)) /
//! strideᵢ⌋ + 1. As ONNX's reference (op_deform_conv.py, which samples with GridSample, `align_corners`, zero
//! padding) and ONNX Runtime (torchvision's bilinear sampling) compute it, for any r ≥ 1 (both take r = 2 only).

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, f64s_opt, fact, float_type, shaped};

/// Claimed in any domain: tract lacks DeformConv.
pub(super) const TABLE: &[Row] = &[Row::any_domain("DeformConv", &DeformConv)];

/// The convolution's geometry, checked against every input's shape.
#[derive(Debug, Clone, PartialEq)]
struct Geometry {
    batch: usize,
    channels: usize,
    out_channels: usize,
    group: usize,
    offset_group: usize,
    dims: Vec<usize>,
    kernel: Vec<usize>,
    out: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    /// Padding at the start of each spatial axis.
    begin: Vec<usize>,
}

/// An attribute list of `r` positive or non-negative integers, `default` where absent.
fn list(n: &Node, name: &str, r: usize, default: usize) -> TractResult<Vec<usize>> {
    let v = n.ints(name);
    if v.is_empty() {
        return Ok(vec![default; r]);
    }
    let v: Vec<usize> = v.iter().filter_map(|&x| usize::try_from(x).ok()).collect();
    anyhow::ensure!(
        v.len() == r,
        "DeformConv `{}`: `{name}` {v:?} does not fit {r} spatial axes",
        n.proto.name
    );
    Ok(v)
}

impl Geometry {
    fn new(n: &Node, x: &[usize], w: &[usize], offset: &[usize]) -> TractResult<Geometry> {
        let name = &n.proto.name;
        let r = x.len().saturating_sub(2);
        anyhow::ensure!(
            r >= 1 && w.len() == r + 2,
            "DeformConv `{name}`: X {x:?} and W {w:?} do not fit"
        );
        // kernel_shape defaults to W's spatial extents.
        let kernel = match n.ints("kernel_shape").is_empty() {
            true => w[2..].to_vec(),
            false => list(n, "kernel_shape", r, 0)?,
        };
        let pads = list(n, "pads", 2 * r, 0)?;
        let (strides, dilations) = (list(n, "strides", r, 1)?, list(n, "dilations", r, 1)?);
        let (group, offset_group) = (
            n.int("group", 1).max(1) as usize,
            n.int("offset_group", 1).max(1) as usize,
        );
        let c = x[1];
        anyhow::ensure!(
            w[1] * group == c && w[0].is_multiple_of(group) && c.is_multiple_of(offset_group) && w[2..] == kernel[..],
            "DeformConv `{name}`: X {x:?}, W {w:?}, group {group}, offset_group {offset_group} and kernel {kernel:?} disagree"
        );
        let mut out = vec![];
        for i in 0..r {
            let span = (kernel[i].max(1) - 1) * dilations[i] + 1;
            let padded = x[i + 2] + pads[i] + pads[r + i];
            anyhow::ensure!(
                padded >= span && strides[i] > 0,
                "DeformConv `{name}`: kernel {kernel:?} exceeds X {x:?}"
            );
            out.push((padded - span) / strides[i] + 1);
        }
        let taps: usize = kernel.iter().product();
        let want = [&[x[0], offset_group * taps * r][..], &out].concat();
        anyhow::ensure!(
            offset == want,
            "DeformConv `{name}`: offset of shape {offset:?}, expected {want:?}"
        );
        Ok(Geometry {
            batch: x[0],
            channels: c,
            out_channels: w[0],
            group,
            offset_group,
            dims: x[2..].to_vec(),
            kernel,
            out,
            strides,
            dilations,
            begin: pads[..r].to_vec(),
        })
    }

    fn out_shape(&self) -> Vec<usize> {
        [&[self.batch, self.out_channels][..], &self.out].concat()
    }

    /// The (offset within one channel, weight) of the pixels a point `p` (pixel units) interpolates: the corners
    /// of its cell, those outside X left out (they read 0).
    fn corners(&self, p: &[f64]) -> Vec<(usize, f64)> {
        let mut acc = vec![(0usize, 1.0f64)];
        for (a, &x) in p.iter().enumerate() {
            let stride: usize = self.dims[a + 1..].iter().product();
            let lo = x.floor();
            let t = x - lo;
            let inside =
                |i: f64| (i >= 0.0 && i < self.dims[a] as f64).then_some(i as usize * stride);
            let taps: Vec<(usize, f64)> = [(lo, 1.0 - t), (lo + 1.0, t)]
                .into_iter()
                .filter(|&(_, w)| w != 0.0)
                .filter_map(|(i, w)| inside(i).map(|o| (o, w)))
                .collect();
            acc = (acc.iter())
                .flat_map(|&(o, w)| taps.iter().map(move |&(to, tw)| (o + to, w * tw)))
                .collect();
        }
        acc
    }

    /// The multi-index of flat position `i` in `shape`.
    fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
        let mut idx = vec![0; shape.len()];
        for a in (0..shape.len()).rev() {
            idx[a] = i % shape[a].max(1);
            i /= shape[a].max(1);
        }
        idx
    }
}

/// The node's inputs, flattened row-major.
struct Inputs {
    x: Vec<f64>,
    w: Vec<f64>,
    offset: Vec<f64>,
    bias: Option<Vec<f64>>,
    mask: Option<Vec<f64>>,
}

/// Y [N, OC, O1..Or], row-major.
fn convolve(g: &Geometry, v: &Inputs) -> Vec<f64> {
    let r = g.dims.len();
    let (taps, points, pixels): (usize, usize, usize) = (
        g.kernel.iter().product(),
        g.out.iter().product(),
        g.dims.iter().product(),
    );
    let (c_per_group, oc_per_group, c_per_offset) = (
        g.channels / g.group,
        g.out_channels / g.group,
        g.channels / g.offset_group,
    );
    let mut y = vec![0.0; g.batch * g.out_channels * points];
    for b in 0..g.batch {
        for og in 0..g.offset_group {
            for p in 0..points {
                let o = Geometry::unravel(p, &g.out);
                for t in 0..taps {
                    let k = Geometry::unravel(t, &g.kernel);
                    let at = |a: usize| ((b * g.offset_group + og) * taps + t) * r + a;
                    let pos: Vec<f64> = (0..r)
                        .map(|a| {
                            let base = (o[a] * g.strides[a] + k[a] * g.dilations[a]) as f64
                                - g.begin[a] as f64;
                            base + v.offset[at(a) * points + p]
                        })
                        .collect();
                    let scale = v.mask.as_ref().map_or(1.0, |m| {
                        m[((b * g.offset_group + og) * taps + t) * points + p]
                    });
                    let corners = g.corners(&pos);
                    for ic in og * c_per_offset..(og + 1) * c_per_offset {
                        let plane = &v.x[(b * g.channels + ic) * pixels..][..pixels];
                        let val = scale * corners.iter().map(|&(i, w)| w * plane[i]).sum::<f64>();
                        let grp = ic / c_per_group;
                        for oc in grp * oc_per_group..(grp + 1) * oc_per_group {
                            let wk = v.w[(oc * c_per_group + ic % c_per_group) * taps + t];
                            y[(b * g.out_channels + oc) * points + p] += wk * val;
                        }
                    }
                }
            }
        }
    }
    if let Some(bias) = &v.bias {
        for (i, yv) in y.iter_mut().enumerate() {
            *yv += bias[(i / points) % g.out_channels];
        }
    }
    y
}

struct DeformConv;

impl Kernel for DeformConv {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let g = Geometry::new(n, &x.1, &fact(n, ins, 1)?.1, &fact(n, ins, 2)?.1)?;
        Ok(vec![(float_type(n, x)?, g.out_shape())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let flat = |a: tract_onnx::prelude::tract_ndarray::ArrayD<f64>| {
            a.iter().copied().collect::<Vec<f64>>()
        };
        let (x, w, offset) = (f64s(n, ins, 0)?, f64s(n, ins, 1)?, f64s(n, ins, 2)?);
        let g = Geometry::new(n, x.shape(), w.shape(), offset.shape())?;
        let (bias, mask) = (f64s_opt(ins, 3)?.map(flat), f64s_opt(ins, 4)?.map(flat));
        let taps: usize = g.kernel.iter().product();
        let points: usize = g.out.iter().product();
        anyhow::ensure!(
            bias.as_ref().is_none_or(|b| b.len() == g.out_channels)
                && mask
                    .as_ref()
                    .is_none_or(|m| m.len() == g.batch * g.offset_group * taps * points),
            "DeformConv `{}`: B or mask does not fit Y of shape {:?}",
            n.proto.name,
            g.out_shape()
        );
        let v = Inputs {
            x: flat(x),
            w: flat(w),
            offset: flat(offset),
            bias,
            mask,
        };
        Ok(vec![shaped(&g.out_shape(), convolve(&g, &v))?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: "DeformConv".into(),
            ..Default::default()
        })
    }

    #[test]
    fn zero_offsets_make_a_plain_convolution() {
        // X 3×3 = 0..9, W 2×2 of ones: each output is the sum of a 2×2 window.
        let g = Geometry::new(&node(), &[1, 1, 3, 3], &[1, 1, 2, 2], &[1, 8, 2, 2]).unwrap();
        let v = Inputs {
            x: (0..9).map(f64::from).collect(),
            w: vec![1.0; 4],
            offset: vec![0.0; 32],
            bias: None,
            mask: None,
        };
        assert_eq!(convolve(&g, &v), [8.0, 12.0, 20.0, 24.0]);
    }

    #[test]
    fn fractional_points_interpolate_and_read_zero_outside() {
        let g = Geometry::new(&node(), &[1, 1, 2, 2], &[1, 1, 1, 1], &[1, 2, 2, 2]).unwrap();
        // Pixels 0..4 of [[0, 1], [2, 3]]: the centre (0.5, 0.5) is their mean; (−0.5, 0) half of pixel 0 and zeros.
        let plane = [0.0, 1.0, 2.0, 3.0];
        let at = |p: &[f64]| g.corners(p).iter().map(|&(i, w)| w * plane[i]).sum::<f64>();
        assert_eq!(at(&[0.5, 0.5]), 1.5);
        assert_eq!(at(&[0.0, -0.5]), 0.0);
        assert_eq!(at(&[1.0, 1.5]), 1.5);
        assert_eq!(at(&[2.0, 0.0]), 0.0);
    }
}
