//! f64 transposed convolution (ONNX `ConvTranspose`, tract's `Deconv`): per image and group one f64 GEMM gives
//! every (output channel, tap) contribution of every input position, and col2im adds them into the output, one
//! rayon task per output channel. The kernel is in tract's layout [C_out, C_in/group, *kernel] (tract-onnx
//! regroups ONNX's [C_in, C_out/group, *kernel] before the op).

use rayon::prelude::*;

use super::conv::{add_bias, Geometry};
use super::gemm::{matmul, Mat};

/// Input positions per GEMM tile (bounds the column buffer whatever the image size).
const TILE_ELEMS: usize = 1 << 20;

/// `y = conv_transpose(x, w) + bias`; in `g`, `input` is the transposed convolution's input (the geometry of the
/// forward convolution it inverts, read backwards) and `output` its output; `y`, zeroed, is [N, C_out, *output].
pub fn deconv(g: &Geometry, x: &[f64], w: &[f64], bias: &[f64], y: &mut [f64]) {
    let (cg, og, taps) = (
        g.c_in / g.group,
        g.c_out / g.group,
        g.kernel.iter().product::<usize>(),
    );
    let (pin, pout): (usize, usize) = (g.input.iter().product(), g.output.iter().product());
    if y.is_empty() {
        return;
    }
    let rows = og * taps;
    let per_tile = (TILE_ELEMS / rows.max(1)).clamp(1, pin.max(1));
    let mut cols = Vec::new();
    for n in 0..g.batch {
        for grp in 0..g.group {
            let xg = &x[(n * g.c_in + grp * cg) * pin..][..cg * pin];
            let wt = regrouped(&w[grp * og * cg * taps..][..og * cg * taps], og, cg, taps);
            let wt = Mat::rows(&wt, cg);
            let yg = &mut y[(n * g.c_out + grp * og) * pout..][..og * pout];
            let mut p0 = 0;
            while p0 < pin {
                let p = per_tile.min(pin - p0);
                cols.resize(rows * p, 0.0);
                let xs = Mat {
                    data: &xg[p0..],
                    rs: pin,
                    cs: 1,
                };
                matmul(rows, cg, p, wt, xs, &mut cols);
                col2im(g, &cols, p0..p0 + p, yg);
                p0 += p;
            }
        }
    }
    add_bias(y, bias, g.c_out, pout);
}

/// One group's kernel [og, cg, taps] as the matrix [og·taps, cg] the GEMM multiplies the input by.
fn regrouped(w: &[f64], og: usize, cg: usize, taps: usize) -> Vec<f64> {
    let mut out = vec![0.0; w.len()];
    for o in 0..og {
        for c in 0..cg {
            for t in 0..taps {
                out[(o * taps + t) * cg + c] = w[(o * cg + c) * taps + t];
            }
        }
    }
    out
}

/// Adds `cols` [og·taps, positions] into `yg` [og, *output]: input position i through tap t lands on
/// `i·stride + t·dilation − pad_before` on each axis, when inside the output.
fn col2im(g: &Geometry, cols: &[f64], positions: std::ops::Range<usize>, yg: &mut [f64]) {
    let taps: usize = g.kernel.iter().product();
    let pout: usize = g.output.iter().product();
    let width = positions.len();
    yg.par_chunks_mut(pout).enumerate().for_each(|(o, plane)| {
        for tap in 0..taps {
            let t = [
                tap / (g.kernel[1] * g.kernel[2]),
                (tap / g.kernel[2]) % g.kernel[1],
                tap % g.kernel[2],
            ];
            let src = &cols[(o * taps + tap) * width..][..width];
            for (v, i) in src.iter().zip(positions.clone()) {
                let at = [
                    i / (g.input[1] * g.input[2]),
                    (i / g.input[2]) % g.input[1],
                    i % g.input[2],
                ];
                let mut dst = 0;
                let mut inside = true;
                for a in 0..3 {
                    match (at[a] * g.stride[a] + t[a] * g.dilation[a]).checked_sub(g.pad_before[a])
                    {
                        Some(q) if q < g.output[a] => dst = dst * g.output[a] + q,
                        _ => inside = false,
                    }
                }
                if inside {
                    plane[dst] += v;
                }
            }
        }
    });
}
