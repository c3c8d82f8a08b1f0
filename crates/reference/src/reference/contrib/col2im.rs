//! ONNX's `Col2Im` in f64 (tract has no kernel for it): the inverse of im2col, summing sliding blocks back into an
//! image. The input [N, C·∏block, L] holds, for each channel c and block offset k (row-major over
//! `block_shape`), the values of the L = ∏ Lᵢ block positions (row-major), where Lᵢ = ⌊(imageᵢ + padsᵢ + pads_endᵢ
//! − dilationᵢ·(blockᵢ − 1) − 1) / strideᵢ⌋ + 1. Each value is added at image position
//! posᵢ·strideᵢ − padᵢ + kᵢ·dilationᵢ when that lies inside the image. Output [N, C, image…], as ONNX's reference
//! (onnx/reference/ops/op_col2im.py) computes it, for any number of spatial axes. `image_shape` and `block_shape`
//! are inputs whose values decide the output shape, so they must be known when the model is typed.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact, float_type, opt, shaped, values};

/// Claimed in any domain: tract lacks Col2Im.
pub(super) const TABLE: &[Row] = &[Row::any_domain("Col2Im", &Col2Im)];

/// The geometry of one node: image and block extents, strides, dilations and leading pads per spatial axis, and
/// the number of block positions along each.
#[derive(Debug, Clone, PartialEq)]
struct Geometry {
    image: Vec<usize>,
    block: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    begin: Vec<i64>,
    cols: Vec<usize>,
}

/// A per-axis attribute (`default` everywhere when absent) checked to have `len` entries ≥ `min`.
fn per_axis(n: &Node, name: &str, len: usize, default: i64, min: i64) -> TractResult<Vec<i64>> {
    let v = match n.ints(name) {
        v if v.is_empty() => vec![default; len],
        v => v,
    };
    anyhow::ensure!(
        v.len() == len && v.iter().all(|&x| x >= min),
        "Col2Im `{}`: `{name}` {v:?} does not fit {} spatial axes",
        n.proto.name,
        len / if name == "pads" { 2 } else { 1 }
    );
    Ok(v)
}

/// A shape-like input (`image_shape`, `block_shape`) as extents ≥ `min`.
fn extents(n: &Node, t: &Tensor, what: &str, min: i64) -> TractResult<Vec<usize>> {
    let v = values::<i64>(t)?;
    anyhow::ensure!(
        v.iter().all(|&x| x >= min),
        "Col2Im `{}`: {what} {v:?} has an extent below {min}",
        n.proto.name
    );
    Ok(v.into_iter().map(|x| x as usize).collect())
}

fn geometry(n: &Node, image: &Tensor, block: &Tensor) -> TractResult<Geometry> {
    let image = extents(n, image, "image_shape", 0)?;
    let block = extents(n, block, "block_shape", 1)?;
    let r = image.len();
    anyhow::ensure!(
        block.len() == r && r > 0,
        "Col2Im `{}`: image_shape has {r} axes, block_shape {}",
        n.proto.name,
        block.len()
    );
    let strides = per_axis(n, "strides", r, 1, 1)?;
    let dilations = per_axis(n, "dilations", r, 1, 1)?;
    let pads = per_axis(n, "pads", 2 * r, 0, 0)?;
    let mut cols = vec![];
    for a in 0..r {
        let span = dilations[a] * (block[a] as i64 - 1) + 1;
        let room = image[a] as i64 + pads[a] + pads[a + r] - span;
        anyhow::ensure!(
            room >= 0,
            "Col2Im `{}`: the block does not fit axis {a}",
            n.proto.name
        );
        cols.push((room / strides[a] + 1) as usize);
    }
    Ok(Geometry {
        image,
        block,
        strides: strides.iter().map(|&s| s as usize).collect(),
        dilations: dilations.iter().map(|&d| d as usize).collect(),
        begin: pads[..r].to_vec(),
        cols,
    })
}

impl Geometry {
    /// The output shape for an input of `shape` [N, C·∏block, L], checked against the geometry.
    fn out_shape(&self, n: &Node, shape: &[usize]) -> TractResult<Vec<usize>> {
        let per: usize = self.block.iter().product();
        let blocks: usize = self.cols.iter().product();
        anyhow::ensure!(
            shape.len() == 3 && shape[1].is_multiple_of(per) && shape[2] == blocks,
            "Col2Im `{}`: input {shape:?} does not hold {per} block elements × {blocks} block positions",
            n.proto.name
        );
        Ok([shape[0], shape[1] / per]
            .into_iter()
            .chain(self.image.iter().copied())
            .collect())
    }

    /// For each block offset (row-major) and block position (row-major), the flat image index it adds to, if any.
    fn targets(&self) -> Vec<Vec<Option<usize>>> {
        let offsets = grid(&self.block);
        let positions = grid(&self.cols);
        (offsets.iter())
            .map(|k| positions.iter().map(|p| self.target(k, p)).collect())
            .collect()
    }

    fn target(&self, k: &[usize], p: &[usize]) -> Option<usize> {
        let mut flat = 0usize;
        for a in 0..self.image.len() {
            let i = (p[a] * self.strides[a] + k[a] * self.dilations[a]) as i64 - self.begin[a];
            if !(0..self.image[a] as i64).contains(&i) {
                return None;
            }
            flat = flat * self.image[a] + i as usize;
        }
        Some(flat)
    }
}

/// Every multi-index of `extents`, row-major.
fn grid(extents: &[usize]) -> Vec<Vec<usize>> {
    let mut acc = vec![vec![]];
    for &e in extents {
        acc = (acc.iter())
            .flat_map(|prev: &Vec<usize>| (0..e).map(move |i| [prev.as_slice(), &[i]].concat()))
            .collect();
    }
    acc
}

struct Col2Im;

impl Kernel for Col2Im {
    fn value_slots(&self) -> &'static [usize] {
        &[1, 2]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let f = fact(n, ins, 0)?;
        let known = |slot: usize| {
            (values.get(slot).copied().flatten()).ok_or_else(|| {
                anyhow::anyhow!(
                    "Col2Im `{}`: its input {slot} must be known before the run",
                    n.proto.name
                )
            })
        };
        let g = geometry(n, known(1)?, known(2)?)?;
        Ok(vec![(float_type(n, f)?, g.out_shape(n, &f.1)?)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let g = geometry(n, opt(n, ins, 1)?, opt(n, ins, 2)?)?;
        let x = f64s(n, ins, 0)?;
        let shape = g.out_shape(n, x.shape())?;
        let x = x.as_standard_layout();
        let x = x
            .as_slice()
            .ok_or_else(|| anyhow::anyhow!("Col2Im: a non-contiguous input"))?;
        let image: usize = g.image.iter().product();
        let blocks: usize = g.cols.iter().product();
        let targets = g.targets();
        let mut out = vec![0.0; shape[0] * shape[1] * image];
        // Input rows are (n, c, k) in order: row j belongs to output image j / ∏block, block offset j % ∏block.
        for (j, row) in x
            .chunks(blocks.max(1))
            .enumerate()
            .take(shape[0] * shape[1] * targets.len())
        {
            let (img, k) = (j / targets.len(), j % targets.len());
            for (&v, t) in row.iter().zip(&targets[k]) {
                if let Some(t) = t {
                    out[img * image + t] += v;
                }
            }
        }
        Ok(vec![shaped(&shape, out)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(
        image: &[usize],
        block: &[usize],
        strides: &[usize],
        begin: &[i64],
        cols: &[usize],
    ) -> Geometry {
        Geometry {
            image: image.to_vec(),
            block: block.to_vec(),
            strides: strides.to_vec(),
            dilations: vec![1; image.len()],
            begin: begin.to_vec(),
            cols: cols.to_vec(),
        }
    }

    #[test]
    fn grids_are_row_major() {
        assert_eq!(
            grid(&[2, 2]),
            vec![vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1]]
        );
        assert_eq!(grid(&[]), vec![Vec::<usize>::new()]);
    }

    #[test]
    fn blocks_land_at_stride_plus_offset_minus_pad() {
        // A 1-D image of 4, blocks of 2 with stride 2 and one pad each side: 3 positions, at −1, 1, 3.
        let g = geom(&[4], &[2], &[2], &[1], &[3]);
        assert_eq!(
            g.targets(),
            vec![vec![None, Some(1), Some(3)], vec![Some(0), Some(2), None]]
        );
    }
}
