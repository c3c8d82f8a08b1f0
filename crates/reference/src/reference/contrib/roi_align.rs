//! ONNX's `RoiAlign` in f64 (tract has no kernel for it): for each region of interest (x1, y1, x2, y2, scaled by
//! `spatial_scale`) and channel, an `output_height` × `output_width` grid of bins, each sampled at a regular grid of
//! points (`sampling_ratio` per axis, or ⌈bin extent⌉ when 0) by bilinear interpolation, then averaged (`avg`) or
//! maxed (`max`). Output [num_rois, C, output_height, output_width].
//!
//! phantom follows ONNX Runtime's CPU kernel (which ONNX's reference, op_roi_align.py, copies) where the spec is
//! loose: `half_pixel` shifts the region by −0.5 and keeps it as it is, `output_half_pixel` (opset 10's only
//! behaviour, pinned by [`pin_default`]) does not shift it and widens it to at least 1×1; a sample more than one
//! pixel outside the map counts as 0; and `max` takes the largest of the four *weighted corner values* of each
//! sample (w·x, not the interpolated value), the largest over the bin's samples.

use tract_onnx::pb::{AttributeProto, NodeProto, OperatorSetIdProto};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{fact, float_type, opt, shaped, string, values};

/// Claimed in any domain: tract lacks RoiAlign.
pub(super) const TABLE: &[Row] = &[Row::any_domain("RoiAlign", &RoiAlign)];

/// Before opset 16 RoiAlign had no `coordinate_transformation_mode` and behaved as `output_half_pixel`; since,
/// the absent attribute means `half_pixel`. Writes opset 10's behaviour out on such a node, so the kernel needs no
/// opset.
pub fn pin_default(n: &mut NodeProto, opsets: &[OperatorSetIdProto]) {
    let onnx = |o: &&OperatorSetIdProto| o.domain.is_empty() || o.domain == "ai.onnx";
    let old = opsets.iter().find(onnx).is_some_and(|o| o.version < 16);
    let given = n
        .attribute
        .iter()
        .any(|a| a.name == "coordinate_transformation_mode");
    if n.op_type == "RoiAlign" && n.domain.is_empty() && old && !given {
        n.attribute.push(AttributeProto {
            name: "coordinate_transformation_mode".into(),
            r#type: 3,
            s: b"output_half_pixel".to_vec(),
            ..Default::default()
        });
    }
}

/// One sample point: the four corners' flat offsets in an H × W map, with their bilinear weights.
type Sample = [(usize, f64); 4];

/// The attributes of one node.
struct Params {
    height: usize,
    width: usize,
    half_pixel: bool,
    max: bool,
    scale: f64,
    ratio: i64,
}

impl Params {
    fn new(n: &Node, x: &[usize], rois: &[usize], idx: &[usize]) -> TractResult<Params> {
        let name = &n.proto.name;
        anyhow::ensure!(
            x.len() == 4 && rois.len() == 2 && rois[1] == 4 && idx == [rois[0]],
            "{INVALID}RoiAlign `{name}`: X {x:?}, rois {rois:?} and batch_indices {idx:?} are not [N, C, H, W], \
             [R, 4] and [R]"
        );
        let half_pixel = match string(n, "coordinate_transformation_mode", "half_pixel").as_str() {
            "half_pixel" => true,
            "output_half_pixel" => false,
            m => anyhow::bail!("RoiAlign `{name}`: unknown coordinate_transformation_mode `{m}`"),
        };
        let max = match string(n, "mode", "avg").as_str() {
            "avg" => false,
            "max" => true,
            m => anyhow::bail!("RoiAlign `{name}`: unknown mode `{m}` (avg or max)"),
        };
        Ok(Params {
            height: x[2],
            width: x[3],
            half_pixel,
            max,
            scale: n.float("spatial_scale", 1.0),
            ratio: n.int("sampling_ratio", 0),
        })
    }

    /// The bilinear corners of point (y, x), or `None` where it lies more than a pixel outside the map.
    fn sample(&self, y: f64, x: f64) -> Option<Sample> {
        let (h, w) = (self.height as f64, self.width as f64);
        if y < -1.0 || y > h || x < -1.0 || x > w {
            return None;
        }
        let axis = |v: f64, len: usize| {
            let v = v.max(0.0);
            let low = v as usize;
            match low + 1 >= len {
                true => (len - 1, len - 1, 0.0),
                false => (low, low + 1, v - low as f64),
            }
        };
        let (y0, y1, ly) = axis(y, self.height);
        let (x0, x1, lx) = axis(x, self.width);
        let (hy, hx) = (1.0 - ly, 1.0 - lx);
        let at = |r: usize, c: usize| r * self.width + c;
        Some([
            (at(y0, x0), hy * hx),
            (at(y0, x1), hy * lx),
            (at(y1, x0), ly * hx),
            (at(y1, x1), ly * lx),
        ])
    }

    /// The samples of every bin of one region (row-major bins), each `None` where it counts as 0.
    fn bins(&self, roi: &[f64], out: (usize, usize)) -> Vec<Vec<Option<Sample>>> {
        let shift = if self.half_pixel { 0.5 } else { 0.0 };
        let [x1, y1, x2, y2] = [0, 1, 2, 3].map(|k| roi[k] * self.scale - shift);
        let (mut rh, mut rw) = (y2 - y1, x2 - x1);
        if !self.half_pixel {
            (rh, rw) = (rh.max(1.0), rw.max(1.0));
        }
        let (bh, bw) = (rh / out.0 as f64, rw / out.1 as f64);
        let grid = |extent: f64| match self.ratio > 0 {
            true => self.ratio as usize,
            false => extent.ceil().max(0.0) as usize,
        };
        let (gh, gw) = (grid(bh), grid(bw));
        let mut bins = vec![];
        for ph in 0..out.0 {
            for pw in 0..out.1 {
                let mut points = vec![];
                for iy in 0..gh {
                    let y = y1 + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                    for ix in 0..gw {
                        let x = x1 + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                        points.push(self.sample(y, x));
                    }
                }
                bins.push(points);
            }
        }
        bins
    }

    /// One bin's value over one channel's map.
    fn pool(&self, map: &[f64], points: &[Option<Sample>]) -> f64 {
        let weighted = |s: &Option<Sample>| s.map_or([0.0; 4], |s| s.map(|(k, w)| w * map[k]));
        if self.max {
            let best = points
                .iter()
                .map(|s| weighted(s).into_iter().fold(f64::MIN, f64::max));
            return best.reduce(f64::max).unwrap_or(0.0);
        }
        let sum: f64 = points.iter().map(|s| weighted(s).iter().sum::<f64>()).sum();
        sum / points.len().max(1) as f64
    }
}

/// The output's extent per pooled axis (at least 1).
fn pooled(n: &Node) -> TractResult<(usize, usize)> {
    let (h, w) = (n.int("output_height", 1), n.int("output_width", 1));
    anyhow::ensure!(
        h >= 1 && w >= 1,
        "{INVALID}RoiAlign `{}`: output_height {h} and output_width {w} must be at least 1",
        n.proto.name
    );
    Ok((h as usize, w as usize))
}

struct RoiAlign;

impl Kernel for RoiAlign {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        let (rois, idx) = (&fact(n, ins, 1)?.1, &fact(n, ins, 2)?.1);
        Params::new(n, &x.1, rois, idx)?;
        let (h, w) = pooled(n)?;
        Ok(vec![(float_type(n, x)?, vec![rois[0], x.1[1], h, w])])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let shape = |k| Ok::<_, TractError>(opt(n, ins, k)?.shape().to_vec());
        let (xs, rs) = (shape(0)?, shape(1)?);
        let p = Params::new(n, &xs, &rs, &shape(2)?)?;
        let out = pooled(n)?;
        let x = values::<f64>(opt(n, ins, 0)?)?;
        let rois = values::<f64>(opt(n, ins, 1)?)?;
        let batch = values::<i64>(opt(n, ins, 2)?)?;
        let (c, hw) = (xs[1], xs[2] * xs[3]);
        let mut y = Vec::with_capacity(rs[0] * c * out.0 * out.1);
        for (r, &b) in batch.iter().enumerate() {
            anyhow::ensure!(
                (0..xs[0] as i64).contains(&b),
                "{INVALID}RoiAlign `{}`: batch index {b} of region {r} is outside X's {} images",
                n.proto.name,
                xs[0]
            );
            let bins = p.bins(&rois[4 * r..4 * r + 4], out);
            for ch in 0..c {
                let at = (b as usize * c + ch) * hw;
                let map = &x[at..at + hw];
                y.extend(bins.iter().map(|points| p.pool(map, points)));
            }
        }
        Ok(vec![shaped(&[rs[0], c, out.0, out.1], y)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(half_pixel: bool, max: bool) -> Params {
        Params {
            height: 2,
            width: 2,
            half_pixel,
            max,
            scale: 1.0,
            ratio: 1,
        }
    }

    #[test]
    fn one_bin_samples_its_centre() {
        // The region (0, 0)–(1, 1) has one bin whose one sample sits at (0.5, 0.5): the mean of the 2×2 map.
        let map = [1.0, 2.0, 3.0, 4.0];
        let p = params(false, false);
        let bins = p.bins(&[0.0, 0.0, 1.0, 1.0], (1, 1));
        assert_eq!(p.pool(&map, &bins[0]), 2.5);
        // half_pixel shifts the region to (−0.5, −0.5)–(0.5, 0.5): the sample lands on pixel (0, 0).
        let p = params(true, false);
        let bins = p.bins(&[0.0, 0.0, 1.0, 1.0], (1, 1));
        assert_eq!(p.pool(&map, &bins[0]), 1.0);
    }

    #[test]
    fn opset_10_nodes_get_their_coordinate_mode_written_out() {
        let node = || NodeProto {
            op_type: "RoiAlign".into(),
            ..Default::default()
        };
        let opset = |version| OperatorSetIdProto {
            domain: String::new(),
            version,
        };
        let mut old = node();
        pin_default(&mut old, &[opset(10)]);
        assert_eq!(old.attribute[0].s, b"output_half_pixel");
        let mut new = node();
        pin_default(&mut new, &[opset(16)]);
        assert!(new.attribute.is_empty());
    }

    #[test]
    fn max_takes_the_largest_weighted_corner() {
        // At (0.5, 0.5) every corner weighs 1/4: the max is 4/4, not the interpolated 2.5.
        let map = [1.0, 2.0, 3.0, 4.0];
        let p = params(false, true);
        let bins = p.bins(&[0.0, 0.0, 1.0, 1.0], (1, 1));
        assert_eq!(p.pool(&map, &bins[0]), 1.0);
        assert!(p.sample(-1.5, 0.0).is_none(), "far outside the map");
    }
}
