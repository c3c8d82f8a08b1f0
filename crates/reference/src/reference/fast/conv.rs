//! f64 convolution (ONNX `Conv`: 1-D to 3-D, groups, strides, dilations, explicit or computed pads): im2col over
//! tiles of output rows, then one f64 GEMM per tile and group ([`super::gemm`]); a 1×1 stride-1 unpadded kernel
//! multiplies the input in place; a kernel that reads one input channel per output channel (depthwise) runs as a
//! direct loop, one rayon task per channel. Spatial ranks below 3 are handled as 3-D with leading extents of 1.

use rayon::prelude::*;

use super::gemm::{matmul, Mat};

/// Bytes of im2col buffer per tile: big enough for GEMM efficiency, small enough to stay in a few MB of cache
/// and memory whatever the image size.
const TILE_ELEMS: usize = 1 << 20;

/// The shape of one convolution, spatial axes padded to three.
#[derive(Clone, Debug)]
pub struct Geometry {
    pub batch: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub group: usize,
    pub input: [usize; 3],
    pub kernel: [usize; 3],
    pub output: [usize; 3],
    pub stride: [usize; 3],
    pub dilation: [usize; 3],
    pub pad_before: [usize; 3],
}

impl Geometry {
    fn in_size(&self) -> usize {
        self.input.iter().product()
    }
    fn out_size(&self) -> usize {
        self.output.iter().product()
    }
    fn taps(&self) -> usize {
        self.kernel.iter().product()
    }
    /// Input position along axis `a` read by output `o` through tap `t`, if inside the (unpadded) input.
    #[inline]
    fn source(&self, a: usize, o: usize, t: usize) -> Option<usize> {
        (o * self.stride[a] + t * self.dilation[a])
            .checked_sub(self.pad_before[a])
            .filter(|&i| i < self.input[a])
    }

    /// The outputs along the last axis whose tap `t` reads inside the input: `lo..hi`, reading from `first`
    /// with step `stride[2]`.
    #[inline]
    fn span(&self, t: usize) -> (usize, usize, usize) {
        let (s, off, pad) = (self.stride[2], t * self.dilation[2], self.pad_before[2]);
        let lo = pad.saturating_sub(off).div_ceil(s);
        // Outputs o with o·s + off − pad ≤ input − 1.
        let hi = match (self.input[2] + pad).checked_sub(off + 1) {
            Some(last) => (last / s + 1).min(self.output[2]),
            None => 0,
        };
        if lo >= hi {
            return (0, 0, 0);
        }
        (lo, hi, lo * s + off - pad)
    }
}

/// `y = conv(x, w) + bias`: `x` is [N, C_in, *input] row-major, `w` [C_out, C_in/group, *kernel], `bias` empty,
/// one value, or C_out values; `y`, zeroed, is [N, C_out, *output] row-major.
pub fn conv(g: &Geometry, x: &[f64], w: &[f64], bias: &[f64], y: &mut [f64]) {
    let (cg, og) = (g.c_in / g.group, g.c_out / g.group);
    let (pin, pout, k) = (g.in_size(), g.out_size(), cg * g.taps());
    if y.is_empty() {
        return;
    }
    if cg == 1 && og == 1 {
        depthwise(g, x, w, y);
    } else {
        for n in 0..g.batch {
            for grp in 0..g.group {
                let xg = &x[(n * g.c_in + grp * cg) * pin..][..cg * pin];
                let wg = Mat::rows(&w[grp * og * k..][..og * k], k);
                let yg = &mut y[(n * g.c_out + grp * og) * pout..][..og * pout];
                group_gemm(g, xg, wg, yg);
            }
        }
    }
    add_bias(y, bias, g.c_out, pout);
}

/// One group of one image: `yg` [og, P] = `wg` [og, K] · im2col(`xg`) [K, P], tile by tile.
fn group_gemm(g: &Geometry, xg: &[f64], wg: Mat, yg: &mut [f64]) {
    let pointwise =
        g.taps() == 1 && g.stride == [1; 3] && g.pad_before == [0; 3] && g.input == g.output;
    if pointwise {
        let (k, pout) = (g.c_in / g.group, g.out_size());
        matmul(yg.len() / pout.max(1), k, pout, wg, Mat::rows(xg, pout), yg);
        return;
    }
    tiled(g, xg, wg, yg, |x| x, |y| y);
}

/// The im2col route for one group of one image: input elements read through `widen`, each tile's products
/// written to `yg` through `store`.
fn tiled<T, O>(
    g: &Geometry,
    xg: &[T],
    wg: Mat,
    yg: &mut [O],
    widen: impl Fn(T) -> f64 + Sync,
    store: impl Fn(f64) -> O,
) where
    T: Copy + Sync,
{
    let (cg, taps, pout) = (g.c_in / g.group, g.taps(), g.out_size());
    let og = yg.len() / pout.max(1);
    let k = cg * taps;
    let row = g.output[2];
    let rows_per_tile = (TILE_ELEMS / (k * row).max(1)).max(1);
    let (rows, mut cols, mut out) = (g.output[0] * g.output[1], Vec::new(), Vec::new());
    let mut r0 = 0;
    while r0 < rows {
        let r1 = (r0 + rows_per_tile).min(rows);
        let p = (r1 - r0) * row;
        cols.resize(k * p, 0.0);
        im2col(g, xg, r0..r1, &mut cols, &widen);
        out.resize(og * p, 0.0);
        matmul(og, k, p, wg, Mat::rows(&cols, p), &mut out);
        for (o, src) in out.chunks_exact(p).enumerate() {
            let dst = &mut yg[o * pout + r0 * row..][..p];
            dst.iter_mut().zip(src).for_each(|(d, &v)| *d = store(v));
        }
        r0 = r1;
    }
}

/// `y = Σ (x − x_zero)·w + bias` over integer codes (ONNX `ConvInteger`): `x` [N, C_in, *input] holds the codes,
/// `w` the kernel already less its zero points, as f64. The caller keeps every partial sum an integer below 2^31,
/// so the f64 GEMM sums it exactly, in any order: the result is the i32 accumulator ONNX defines.
pub fn conv_integer<T>(g: &Geometry, x: &[T], x_zero: f64, w: &[f64], bias: &[i32], y: &mut [i32])
where
    T: Copy + Sync + Into<f64>,
{
    let (cg, og) = (g.c_in / g.group, g.c_out / g.group);
    let (pin, pout, k) = (g.in_size(), g.out_size(), cg * g.taps());
    if y.is_empty() {
        return;
    }
    for n in 0..g.batch {
        for grp in 0..g.group {
            let xg = &x[(n * g.c_in + grp * cg) * pin..][..cg * pin];
            let wg = Mat::rows(&w[grp * og * k..][..og * k], k);
            let yg = &mut y[(n * g.c_out + grp * og) * pout..][..og * pout];
            // Padding reads the zero point (ONNX), which is 0 once subtracted: im2col's fill.
            tiled(g, xg, wg, yg, |v: T| v.into() - x_zero, |v| v as i32);
        }
    }
    add_bias(y, bias, g.c_out, pout);
}

/// Fills `cols` [cg·taps, rows·W_out]: row (c, tap) holds the input each output position of `rows` reads, through
/// `widen`.
fn im2col<T: Copy + Sync>(
    g: &Geometry,
    xg: &[T],
    rows: std::ops::Range<usize>,
    cols: &mut [f64],
    widen: &(impl Fn(T) -> f64 + Sync),
) {
    let (taps, pin) = (g.taps(), g.in_size());
    let width = rows.len() * g.output[2];
    cols.par_chunks_mut(width).enumerate().for_each(|(r, dst)| {
        let (c, tap) = (r / taps, r % taps);
        let (t0, t1, t2) = (
            tap / (g.kernel[1] * g.kernel[2]),
            (tap / g.kernel[2]) % g.kernel[1],
            tap % g.kernel[2],
        );
        let plane = &xg[c * pin..][..pin];
        for (i, orow) in rows.clone().enumerate() {
            let line = &mut dst[i * g.output[2]..][..g.output[2]];
            let src = g
                .source(0, orow / g.output[1], t0)
                .zip(g.source(1, orow % g.output[1], t1));
            let Some((i0, i1)) = src else {
                line.fill(0.0);
                continue;
            };
            let xrow = &plane[(i0 * g.input[1] + i1) * g.input[2]..][..g.input[2]];
            let (lo, hi, first) = g.span(t2);
            line[..lo].fill(0.0);
            line[hi..].fill(0.0);
            let src = xrow[first..].iter().step_by(g.stride[2]);
            line[lo..hi]
                .iter_mut()
                .zip(src)
                .for_each(|(v, &x)| *v = widen(x));
        }
    });
}

/// Each output channel reads one input channel: a direct loop per channel, channels in parallel.
fn depthwise(g: &Geometry, x: &[f64], w: &[f64], y: &mut [f64]) {
    let (pin, pout, taps) = (g.in_size(), g.out_size(), g.taps());
    y.par_chunks_mut(pout).enumerate().for_each(|(nc, out)| {
        let (n, c) = (nc / g.c_out, nc % g.c_out);
        let plane = &x[(n * g.c_in + c) * pin..][..pin];
        let wc = &w[c * taps..][..taps];
        for (tap, &wv) in wc.iter().enumerate() {
            let t = [
                tap / (g.kernel[1] * g.kernel[2]),
                (tap / g.kernel[2]) % g.kernel[1],
                tap % g.kernel[2],
            ];
            for o0 in 0..g.output[0] {
                let Some(i0) = g.source(0, o0, t[0]) else {
                    continue;
                };
                for o1 in 0..g.output[1] {
                    let Some(i1) = g.source(1, o1, t[1]) else {
                        continue;
                    };
                    let xrow = &plane[(i0 * g.input[1] + i1) * g.input[2]..][..g.input[2]];
                    let orow = &mut out[(o0 * g.output[1] + o1) * g.output[2]..][..g.output[2]];
                    let (lo, hi, first) = g.span(t[2]);
                    let src = xrow[first..].iter().step_by(g.stride[2]);
                    orow[lo..hi]
                        .iter_mut()
                        .zip(src)
                        .for_each(|(v, &x)| *v += wv * x);
                }
            }
        }
    });
}

/// Adds a bias broadcast over [N, C, P]: none, one value, or one per channel.
pub fn add_bias<T>(y: &mut [T], bias: &[T], channels: usize, plane: usize)
where
    T: Copy + Send + Sync + std::ops::AddAssign,
{
    if bias.is_empty() || plane == 0 {
        return;
    }
    y.par_chunks_mut(plane).enumerate().for_each(|(nc, out)| {
        let b = if bias.len() == 1 {
            bias[0]
        } else {
            bias[nc % channels]
        };
        out.iter_mut().for_each(|v| *v += b);
    });
}
