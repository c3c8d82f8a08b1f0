//! ONNX's GridSample in f64 (tract computes it in f32 only): samples X [N, C, D1, …, Dr] at the points of a grid
//! [N, O1, …, Or, r] of normalized coordinates in [−1, 1] (the last axis lists them innermost spatial axis first:
//! x along the width, then y, then z), giving Y [N, C, O1, …, Or]. Every mode (`nearest`, `bilinear`/`linear`,
//! `bicubic`/`cubic`, opset 16's names and opset 20's), padding mode (`zeros`, `border`, `reflection`) and
//! `align_corners`, for any r ≥ 1 (ONNX's tests use 4-D and 5-D inputs).
//!
//! As ONNX's reference (onnx/reference/ops/op_grid_sample.py) computes it: a coordinate is denormalized to pixel
//! units, rounded half to even in `nearest` mode, then, where it lies outside the sampled range ([−0.5, D − 0.5],
//! or [0, D − 1] with `align_corners`), clamped to [0, D − 1] (`border`) or reflected into the range
//! (`reflection`). Interpolation is separable: each axis gives its taps (1, 2 or 4 pixel indices and weights,
//! Keys' cubic with a = −0.75), and a tap outside the input reads 0 (`zeros`), the nearest edge pixel (`border`)
//! or its reflection, truncated to an index (`reflection`).

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact, float_type, opt, shaped, string};

/// Claimed in any domain: tract computes GridSample in f32.
pub(super) const TABLE: &[Row] = &[Row::any_domain("GridSample", &GridSample)];

/// How a pixel value is made from its neighbours.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

/// What is read outside the input.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// The node's attributes.
#[derive(Debug, Clone, Copy)]
struct Sampling {
    mode: Mode,
    padding: Padding,
    align_corners: bool,
}

fn sampling(n: &Node) -> TractResult<Sampling> {
    let mode = match string(n, "mode", "linear").as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        other => anyhow::bail!("GridSample `{}`: unknown mode `{other}`", n.proto.name),
    };
    let padding = match string(n, "padding_mode", "zeros").as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => anyhow::bail!(
            "GridSample `{}`: unknown padding_mode `{other}`",
            n.proto.name
        ),
    };
    Ok(Sampling {
        mode,
        padding,
        align_corners: n.int("align_corners", 0) != 0,
    })
}

/// One spatial axis of X: its length, and the range of pixel coordinates that lie inside it.
#[derive(Debug, Clone, Copy)]
struct Line {
    len: usize,
    lo: f64,
    hi: f64,
}

/// Reflects `x` off the bounds of [lo, hi] until it lies within (ONNX's and PyTorch's `reflect`).
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let span = hi - lo;
    if span <= 0.0 {
        // A one-pixel axis with align_corners: [0, 0] (the reference would divide by 0).
        return lo;
    }
    let (dx, from_lo) = match x {
        x if x < lo => (lo - x, true),
        x if x > hi => (x - hi, false),
        x => return x,
    };
    let flips = (dx / span).trunc();
    let r = dx - flips * span;
    // An even number of flips leaves the point measured from the bound it crossed; an odd one from the other.
    match (flips % 2.0 == 0.0, from_lo) {
        (true, true) | (false, false) => lo + r,
        _ => hi - r,
    }
}

/// Keys' cubic convolution weights (a = −0.75) of the 4 pixels around a point `t` ∈ [0, 1) past the second.
fn cubic(t: f64) -> [f64; 4] {
    let a = -0.75;
    let x = t.abs();
    let far = |d: f64| ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
    let near = |d: f64| ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
    [far(x + 1.0), near(x), near(1.0 - x), far(2.0 - x)]
}

impl Sampling {
    fn line(&self, len: usize) -> Line {
        let (lo, hi) = match self.align_corners {
            true => (0.0, len as f64 - 1.0),
            false => (-0.5, len as f64 - 0.5),
        };
        Line { len, lo, hi }
    }

    /// The pixel coordinate of normalized `g` on `line`, rounded (`nearest`) and brought inside by the padding.
    fn coordinate(&self, g: f64, line: Line) -> f64 {
        let d = line.len as f64;
        let mut x = match self.align_corners {
            true => (g + 1.0) / 2.0 * (d - 1.0),
            false => ((g + 1.0) * d - 1.0) / 2.0,
        };
        if self.mode == Mode::Nearest {
            x = x.round_ties_even();
        }
        if x < line.lo || x > line.hi {
            match self.padding {
                Padding::Border => x = x.min(d - 1.0).max(0.0),
                Padding::Reflection => x = reflect(x, line.lo, line.hi),
                Padding::Zeros => {}
            }
        }
        x
    }

    /// The index read for integral pixel coordinate `i`, `None` where that reads zeros.
    fn pixel(&self, i: f64, line: Line) -> Option<usize> {
        let last = line.len as f64 - 1.0;
        match self.padding {
            Padding::Zeros => (i >= 0.0 && i <= last).then_some(i as usize),
            Padding::Border => Some(i.min(last).max(0.0) as usize),
            Padding::Reflection => {
                Some(reflect(i, line.lo, line.hi).trunc().min(last).max(0.0) as usize)
            }
        }
    }

    /// The taps of coordinate `x` on `line`: (index, weight) pairs, the index `None` where it reads zeros.
    fn taps(&self, x: f64, line: Line) -> Vec<(Option<usize>, f64)> {
        match self.mode {
            // The reference truncates the rounded (and padded) coordinate to an integer.
            Mode::Nearest => vec![(self.pixel(x.trunc(), line), 1.0)],
            Mode::Linear => {
                let x0 = x.floor();
                let t = x - x0;
                vec![
                    (self.pixel(x0, line), 1.0 - t),
                    (self.pixel(x0 + 1.0, line), t),
                ]
            }
            Mode::Cubic => {
                let x0 = x.floor();
                let w = cubic(x - x0);
                (0..4)
                    .map(|k| (self.pixel(x0 + k as f64 - 1.0, line), w[k]))
                    .collect()
            }
        }
    }

    /// The (offset within one channel, weight) pairs of the grid point `g` (innermost axis first), every axis's
    /// taps multiplied out; `strides` are the channel's row-major strides.
    fn point(&self, g: &[f64], lines: &[Line], strides: &[usize]) -> Vec<(usize, f64)> {
        let mut acc = vec![(0usize, 1.0f64)];
        for (i, (&line, &stride)) in lines.iter().zip(strides).enumerate() {
            let taps = self.taps(self.coordinate(g[g.len() - 1 - i], line), line);
            acc = acc
                .iter()
                .flat_map(|&(o, w)| {
                    taps.iter()
                        .filter_map(move |&(j, tw)| j.map(|j| (o + j * stride, w * tw)))
                })
                .collect();
        }
        acc
    }
}

/// Y's shape from X's and the grid's, checked: [N, C, O1, …, Or].
fn out_shape(n: &Node, x: &[usize], grid: &[usize]) -> TractResult<Vec<usize>> {
    let r = x.len().saturating_sub(2);
    anyhow::ensure!(
        r >= 1 && grid.len() == r + 2 && grid[0] == x[0] && grid[r + 1] == r,
        "GridSample `{}`: X of shape {x:?} and grid of shape {grid:?} do not fit (expected [N, C, D1..Dr] and \
         [N, O1..Or, r])",
        n.proto.name
    );
    Ok([&x[..2], &grid[1..=r]].concat())
}

struct GridSample;

impl Kernel for GridSample {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let grid = fact(n, ins, 1)?;
        let dt = float_type(n, x)?;
        float_type(n, grid)?;
        Ok(vec![(dt, out_shape(n, &x.1, &grid.1)?)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let s = sampling(n)?;
        let (xshape, gshape) = (
            opt(n, ins, 0)?.shape().to_vec(),
            opt(n, ins, 1)?.shape().to_vec(),
        );
        let yshape = out_shape(n, &xshape, &gshape)?;
        let mut y = vec![0.0; yshape.iter().product()];
        if y.is_empty() {
            return Ok(vec![shaped(&yshape, y)?]);
        }
        let dims = &xshape[2..];
        anyhow::ensure!(
            dims.iter().all(|&d| d > 0),
            "GridSample `{}`: X of shape {xshape:?} has no pixels to sample",
            n.proto.name
        );
        let x = f64s(n, ins, 0)?.iter().copied().collect::<Vec<f64>>();
        let grid = f64s(n, ins, 1)?.iter().copied().collect::<Vec<f64>>();
        let lines: Vec<Line> = dims.iter().map(|&d| s.line(d)).collect();
        let strides: Vec<usize> = (0..dims.len())
            .map(|i| dims[i + 1..].iter().product())
            .collect();
        let (c, r) = (xshape[1], dims.len());
        let (pixels, points) = (
            dims.iter().product::<usize>(),
            yshape[2..].iter().product::<usize>(),
        );
        for b in 0..xshape[0] {
            for p in 0..points {
                let taps = s.point(&grid[(b * points + p) * r..][..r], &lines, &strides);
                for ch in 0..c {
                    let plane = &x[(b * c + ch) * pixels..][..pixels];
                    y[(b * c + ch) * points + p] = taps.iter().map(|&(o, w)| w * plane[o]).sum();
                }
            }
        }
        Ok(vec![shaped(&yshape, y)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(mode: &str, padding: &str, align: i64) -> Node {
        let s = |name: &str, v: &str| tract_onnx::pb::AttributeProto {
            name: name.into(),
            s: v.as_bytes().to_vec(),
            ..Default::default()
        };
        let align = tract_onnx::pb::AttributeProto {
            name: "align_corners".into(),
            i: align,
            ..Default::default()
        };
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: "GridSample".into(),
            input: vec!["x".into(), "grid".into()],
            output: vec!["y".into()],
            attribute: vec![s("mode", mode), s("padding_mode", padding), align],
            ..Default::default()
        })
    }

    /// Samples X [1, 1, 2, 2] = [[1, 2], [3, 4]] at the grid points `pts` (x, y).
    fn sample(n: &Node, pts: &[[f64; 2]]) -> Vec<f64> {
        let x = Tensor::from_shape(&[1, 1, 2, 2], &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
        let flat: Vec<f64> = pts.iter().flatten().copied().collect();
        let grid = Tensor::from_shape(&[1, 1, pts.len(), 2], &flat).unwrap();
        let y = GridSample.eval(n, &[Some(&x), Some(&grid)]).unwrap();
        super::super::util::values::<f64>(&y[0]).unwrap()
    }

    #[test]
    fn bilinear_align_corners() {
        // With align_corners the corners are ±1: the centre is the mean, (1, −1) the top-right pixel.
        let n = node("bilinear", "zeros", 1);
        assert_eq!(
            sample(&n, &[[0.0, 0.0], [1.0, -1.0], [0.0, -1.0]]),
            vec![2.5, 2.0, 1.5]
        );
    }

    #[test]
    fn bilinear_zeros_outside() {
        // Without align_corners x = −1 is pixel −0.5: half of pixel 0, half of zeros.
        let n = node("linear", "zeros", 0);
        assert_eq!(sample(&n, &[[-1.0, -0.5]]), vec![0.5]);
        // border reads pixel 0 for the tap at −1.
        let n = node("linear", "border", 0);
        assert_eq!(sample(&n, &[[-1.0, -0.5]]), vec![1.0]);
    }

    #[test]
    fn nearest_rounds_half_to_even() {
        // align_corners, x = 0 → pixel 0.5 → 0 (even); y = 1 → row 1.
        let n = node("nearest", "zeros", 1);
        assert_eq!(sample(&n, &[[0.0, 1.0]]), vec![3.0]);
    }

    #[test]
    fn reflection() {
        // align_corners: range [0, 1]; x = 3 (pixel 2) reflects to 0, y = −1 (pixel 0) stays.
        let n = node("nearest", "reflection", 1);
        assert_eq!(sample(&n, &[[3.0, -1.0]]), vec![1.0]);
        assert_eq!(reflect(-0.75, -0.5, 1.5), -0.25);
        assert_eq!(reflect(4.0, 0.0, 1.0), 0.0);
        assert_eq!(reflect(3.0, 0.0, 1.0), 1.0);
    }

    #[test]
    fn cubic_weights_sum_to_one_and_interpolate() {
        for t in [0.0, 0.25, 0.5, 0.9] {
            assert!((cubic(t).iter().sum::<f64>() - 1.0).abs() < 1e-15);
        }
        assert_eq!(cubic(0.0), [0.0, 1.0, 0.0, 0.0]);
        // At pixel centres bicubic gives the pixel itself.
        let n = node("bicubic", "border", 1);
        assert_eq!(sample(&n, &[[1.0, 1.0], [-1.0, 1.0]]), vec![4.0, 3.0]);
    }
}
