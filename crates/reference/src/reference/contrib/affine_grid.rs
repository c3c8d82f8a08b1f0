//! ONNX's `AffineGrid` in f64 (tract has no kernel for it): the sampling grid of a batch of affine transforms,
//! what `GridSample` reads. For `size` [N, C, H, W] and θ [N, 2, 3] the output [N, H, W, 2] holds θₙ·(x, y, 1) at
//! each pixel; for [N, C, D, H, W] and θ [N, 3, 4], [N, D, H, W, 3] holds θₙ·(x, y, z, 1). The base coordinates
//! are normalized to [−1, 1] per axis of extent L: −1 + 2i/(L − 1) with `align_corners` (pixel centres at the
//! ends), else −1 + (2i + 1)/L (pixel edges at the ends), as ONNX's reference (onnx/reference/ops/op_affine_grid.py)
//! computes them; an axis of one pixel with `align_corners` sits at −1, as that reference's `arange` gives.
//! `size` decides the output shape, so its value must be known when the model is typed.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact, float_type, opt, shaped, values};

/// Claimed in any domain: tract lacks AffineGrid.
pub(super) const TABLE: &[Row] = &[Row::any_domain("AffineGrid", &AffineGrid)];

/// The normalized coordinates of an axis of `len` pixels.
fn base(len: usize, align_corners: bool) -> Vec<f64> {
    let l = len as f64;
    (0..len)
        .map(|i| match (align_corners, len) {
            (true, 1) => -1.0,
            (true, _) => -1.0 + 2.0 * i as f64 / (l - 1.0),
            (false, _) => -1.0 + (2 * i + 1) as f64 / l,
        })
        .collect()
}

/// The spatial extents of `size` ([N, C, H, W] or [N, C, D, H, W]), checked against θ's shape [N, r, r + 1].
fn spatial(n: &Node, size: &Tensor, theta: &[usize]) -> TractResult<Vec<usize>> {
    let size = values::<i64>(size)?;
    let r = size.len().saturating_sub(2);
    anyhow::ensure!(
        (r == 2 || r == 3) && size.iter().all(|&s| s >= 0),
        "AffineGrid `{}`: size {size:?} is not [N, C, H, W] or [N, C, D, H, W]",
        n.proto.name
    );
    anyhow::ensure!(
        theta == [size[0] as usize, r, r + 1],
        "AffineGrid `{}`: theta {theta:?} does not fit size {size:?} (expected [{}, {r}, {}])",
        n.proto.name,
        size[0],
        r + 1
    );
    Ok(size[2..].iter().map(|&s| s as usize).collect())
}

/// The output shape [N, spatial…, r].
fn out_shape(theta: &[usize], spatial: &[usize]) -> Vec<usize> {
    [theta[0]]
        .into_iter()
        .chain(spatial.iter().copied())
        .chain([spatial.len()])
        .collect()
}

/// The homogeneous base point of every output position, row-major: (x, y, 1) or (x, y, z, 1), x along the last axis.
fn points(spatial: &[usize], align_corners: bool) -> Vec<Vec<f64>> {
    let axes: Vec<Vec<f64>> = spatial.iter().map(|&l| base(l, align_corners)).collect();
    // Built outermost axis first, each point's coordinates innermost-axis first: prepend as axes deepen.
    let mut acc: Vec<Vec<f64>> = vec![vec![1.0]];
    for coords in &axes {
        acc = (acc.iter())
            .flat_map(|p| coords.iter().map(move |&c| [&[c], p.as_slice()].concat()))
            .collect();
    }
    acc
}

struct AffineGrid;

impl Kernel for AffineGrid {
    fn value_slots(&self) -> &'static [usize] {
        &[1]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let f = fact(n, ins, 0)?;
        let size = (values.get(1).copied().flatten()).ok_or_else(|| {
            anyhow::anyhow!(
                "AffineGrid `{}`: its size input must be known before the run",
                n.proto.name
            )
        })?;
        let spatial = spatial(n, size, &f.1)?;
        Ok(vec![(float_type(n, f)?, out_shape(&f.1, &spatial))])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let theta = f64s(n, ins, 0)?;
        let spatial = spatial(n, opt(n, ins, 1)?, theta.shape())?;
        let r = spatial.len();
        let pts = points(&spatial, n.int("align_corners", 0) != 0);
        let mut out = Vec::with_capacity(theta.shape()[0] * pts.len() * r);
        for t in theta.outer_iter() {
            for p in &pts {
                for row in t.outer_iter() {
                    out.push(row.iter().zip(p).map(|(a, b)| a * b).sum());
                }
            }
        }
        Ok(vec![shaped(&out_shape(theta.shape(), &spatial), out)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_coordinates_follow_align_corners() {
        assert_eq!(base(3, true), [-1.0, 0.0, 1.0]);
        assert_eq!(base(2, false), [-0.5, 0.5]);
        assert_eq!(base(1, true), [-1.0]);
        assert_eq!(base(1, false), [0.0]);
    }

    #[test]
    fn points_list_x_first_with_x_along_the_last_axis() {
        let p = points(&[2, 3], true);
        assert_eq!(p.len(), 6);
        assert_eq!(p[0], [-1.0, -1.0, 1.0]);
        assert_eq!(p[1], [0.0, -1.0, 1.0]);
        assert_eq!(p[3], [-1.0, 1.0, 1.0]);
    }
}
