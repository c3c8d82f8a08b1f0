//! u8×s8 product pairs of a quantized 2-D convolution (`QLinearConv`, `ConvInteger`) whose sum exceeds int16. x86
//! kernels without VNNI (AVX2 `vpmaddubsw`) multiply the input's bytes by the filter's and add adjacent pairs in
//! saturating int16 arithmetic. ONNX Runtime's convolution multiplies im2col rows in NHWC order, so a pair is two
//! adjacent taps of the filter taken kernel position by kernel position, channel by channel within each (an odd
//! count ends with a tap alone). Checked on ONNX Runtime's `ORT_ENABLE_ALL` QLinearConv over 3 channels on an
//! AVX2 CPU: every output it computed off the exact level has such a pair beyond int16.

use ndarray::{ArrayD, ArrayView4, Ix4};

/// The attributes of the convolution that decide which products meet.
pub(super) struct Geometry {
    pub channels_last: bool,
    pub group: usize,
    pub strides: [usize; 2],
    pub pads: [usize; 2],
    pub dilations: [usize; 2],
    /// The input's zero point: the byte padding reads.
    pub pad_byte: f64,
    /// About how many pairs to check at most (output positions are sampled beyond).
    pub budget: usize,
}

/// The pairs a cause checks at most in one product.
pub(super) const BUDGET: usize = 20_000_000;

/// (pairs over int16, the largest |pair sum|, pairs checked) of `x` (N, C, H, W; or N, H, W, C when channels
/// last) convolved with `w` (M, C/group, kH, kW); output positions sampled to bound the work.
pub(super) fn pair_saturation(
    x: &ArrayD<f64>,
    w: &ArrayD<f64>,
    g: &Geometry,
) -> Option<(usize, f64, usize)> {
    let x = x.view().into_dimensionality::<Ix4>().ok()?;
    let x: ArrayView4<f64> = match g.channels_last {
        true => x.permuted_axes([0, 3, 1, 2]),
        false => x,
    };
    let w = w.view().into_dimensionality::<Ix4>().ok()?;
    let (c, h, wd) = (x.shape()[1], x.shape()[2], x.shape()[3]);
    let (m, cg, kh, kw) = (w.shape()[0], w.shape()[1], w.shape()[2], w.shape()[3]);
    if g.group == 0 || cg * g.group != c || m % g.group != 0 || cg * kh * kw < 2 {
        return None;
    }
    let span = |k: usize, d: usize| d * (k - 1) + 1;
    let out = |n: usize, k: usize, i: usize| {
        (n + 2 * g.pads[i])
            .checked_sub(span(k, g.dilations[i]))
            .map(|v| v / g.strides[i].max(1) + 1)
    };
    let (oh, ow) = (out(h, kh, 0)?, out(wd, kw, 1)?);
    let work = oh * ow * m * kh * kw * cg / 2;
    let step = (work / g.budget.max(1)).max(1);
    let at = |ci: usize, y: isize, xx: isize| match (y, xx) {
        (y, xx) if y < 0 || xx < 0 || y as usize >= h || xx as usize >= wd => g.pad_byte,
        (y, xx) => x[[0, ci, y as usize, xx as usize]],
    };
    // The filter's taps in the order the kernel's packed row holds them: kernel position, then channel.
    let taps: Vec<(usize, usize, usize)> = (0..kh)
        .flat_map(|ky| (0..kw).flat_map(move |kx| (0..cg).map(move |ci| (ky, kx, ci))))
        .collect();
    let (mut over, mut worst, mut checked) = (0usize, 0f64, 0usize);
    for pos in (0..oh * ow).step_by(step) {
        let (py, px) = (pos / ow, pos % ow);
        for mo in 0..m {
            let c0 = mo / (m / g.group) * cg;
            let product = |&(ky, kx, ci): &(usize, usize, usize)| {
                let y = (py * g.strides[0] + ky * g.dilations[0]) as isize - g.pads[0] as isize;
                let xx = (px * g.strides[1] + kx * g.dilations[1]) as isize - g.pads[1] as isize;
                at(c0 + ci, y, xx) * w[[mo, ci, ky, kx]]
            };
            for pair in taps.chunks(2) {
                let sum: f64 = pair.iter().map(product).sum();
                checked += 1;
                if sum.abs() > 32767.0 {
                    over += 1;
                    worst = worst.max(sum.abs());
                }
            }
        }
    }
    Some((over, worst, checked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(channels_last: bool) -> Geometry {
        Geometry {
            channels_last,
            group: 1,
            strides: [1, 1],
            pads: [0, 0],
            dilations: [1, 1],
            pad_byte: 0.0,
            budget: BUDGET,
        }
    }

    #[test]
    fn adjacent_channel_pairs_beyond_int16_are_counted_in_either_layout() {
        // One 1×1 filter over two channels: 255·127 + 255·127 = 64770 saturates; 100·127 + 100·127 does not.
        let nchw =
            ArrayD::from_shape_vec(vec![1, 2, 1, 2], vec![255.0, 100.0, 255.0, 100.0]).unwrap();
        let nhwc =
            ArrayD::from_shape_vec(vec![1, 1, 2, 2], vec![255.0, 255.0, 100.0, 100.0]).unwrap();
        let w = ArrayD::from_shape_vec(vec![1, 2, 1, 1], vec![127.0, 127.0]).unwrap();
        for (x, last) in [(nchw, false), (nhwc, true)] {
            let (over, worst, checked) = pair_saturation(&x, &w, &geometry(last)).unwrap();
            assert_eq!((over, worst, checked), (1, 64770.0, 2));
        }
        // A 1×1 depthwise filter pairs nothing; three taps make a pair and a tap alone.
        let w1 = ArrayD::from_shape_vec(vec![2, 1, 1, 1], vec![127.0, 127.0]).unwrap();
        let mut dw = geometry(false);
        dw.group = 2;
        let x = ArrayD::from_shape_vec(vec![1, 2, 1, 1], vec![255.0, 255.0]).unwrap();
        assert!(pair_saturation(&x, &w1, &dw).is_none());
        let x3 = ArrayD::from_shape_vec(vec![1, 3, 1, 1], vec![255.0, 255.0, 255.0]).unwrap();
        let w3 = ArrayD::from_shape_vec(vec![1, 3, 1, 1], vec![127.0, 1.0, 127.0]).unwrap();
        assert_eq!(
            pair_saturation(&x3, &w3, &geometry(false)),
            Some((0, 0.0, 2))
        );
    }
}
