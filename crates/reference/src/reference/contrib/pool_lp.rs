//! ONNX's `LpPool` in f64 (tract has no kernel for it): Y[n, c, o] = (Σ |X[n, c, i]|^p)^(1/p) over the input
//! elements i of the window of o; padding and the window's overhang past the input (`ceil_mode`) add nothing.
//! That is how ONNX's tests compute it (onnx/backend/test/case/node/lppool.py, the `LPPOOL` branch of
//! `pool()` in onnx/reference/ops/op_pool_common.py) and how ONNX Runtime does. (ONNX's op reference,
//! op_lp_pool.py, goes through an average instead, which rescales windows that overhang the padding; the suite's
//! data does not use it.)
//!
//! The output shape follows the pooling rules common to ONNX's pools: explicit `pads` with `ceil_mode` (where a
//! last window that would start in the end padding is dropped), or `auto_pad` VALID / SAME_UPPER / SAME_LOWER
//! (output ⌈in / stride⌉, the total padding split with the odd element at the end for SAME_UPPER, at the start for
//! SAME_LOWER). Windows are dilated by `dilations`.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact, float_type, shaped, string};

/// Claimed in any domain: tract lacks LpPool.
pub(super) const TABLE: &[Row] = &[Row::any_domain("LpPool", &LpPool)];

/// One spatial axis of the pooling: input extent, kernel, stride, dilation, leading padding and output extent.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Line {
    len: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    begin: i64,
    out: usize,
}

impl Line {
    /// The input positions the window of output `o` reads (those inside the input).
    fn taps(&self, o: usize) -> Vec<usize> {
        let start = (o * self.stride) as i64 - self.begin;
        (0..self.kernel)
            .map(|j| start + (j * self.dilation) as i64)
            .filter(|&i| (0..self.len as i64).contains(&i))
            .map(|i| i as usize)
            .collect()
    }
}

/// A per-axis integer attribute (`default` on every axis when absent), checked to have `r` entries ≥ `min`.
fn per_axis(n: &Node, name: &str, r: usize, default: i64, min: i64) -> TractResult<Vec<i64>> {
    let v = match n.ints(name) {
        v if v.is_empty() => vec![default; r],
        v => v,
    };
    anyhow::ensure!(
        v.len() == r && v.iter().all(|&x| x >= min),
        "LpPool `{}`: `{name}` {v:?} does not fit {r} spatial axes",
        n.proto.name
    );
    Ok(v)
}

/// The pooling geometry of an input of `shape` [N, C, D1, …, Dr].
fn lines(n: &Node, shape: &[usize]) -> TractResult<Vec<Line>> {
    anyhow::ensure!(
        shape.len() >= 3,
        "LpPool `{}`: input rank {} < 3",
        n.proto.name,
        shape.len()
    );
    let spatial = &shape[2..];
    let r = spatial.len();
    let kernel = per_axis(n, "kernel_shape", r, 0, 1)?;
    let strides = per_axis(n, "strides", r, 1, 1)?;
    let dilations = per_axis(n, "dilations", r, 1, 1)?;
    let pads = per_axis(n, "pads", 2 * r, 0, 0)?;
    let auto = string(n, "auto_pad", "NOTSET");
    let ceil = n.int("ceil_mode", 0) != 0;
    let mut out = vec![];
    for a in 0..r {
        let (len, k, s, d) = (spatial[a] as i64, kernel[a], strides[a], dilations[a]);
        let span = d * (k - 1) + 1;
        let (begin, o) = match auto.as_str() {
            "NOTSET" | "" => (
                pads[a],
                explicit(len + pads[a] + pads[a + r], span, s, ceil, len + pads[a]),
            ),
            "VALID" => (0, (len - span).div_euclid(s) + 1),
            "SAME_UPPER" | "SAME_LOWER" => {
                let o = (len + s - 1) / s;
                let total = ((o - 1) * s + span - len).max(0);
                let begin = if auto == "SAME_UPPER" {
                    total / 2
                } else {
                    total - total / 2
                };
                (begin, o)
            }
            other => anyhow::bail!("LpPool `{}`: unknown auto_pad `{other}`", n.proto.name),
        };
        out.push(Line {
            len: spatial[a],
            kernel: k as usize,
            stride: s as usize,
            dilation: d as usize,
            begin,
            out: o.max(0) as usize,
        });
    }
    Ok(out)
}

/// Output extent of an axis padded to `padded` (`limit`: input extent plus leading pad, where a window must start).
fn explicit(padded: i64, span: i64, s: i64, ceil: bool, limit: i64) -> i64 {
    let room = padded - span;
    if room < 0 {
        return 0;
    }
    match ceil {
        false => room / s + 1,
        true => {
            let o = (room + s - 1) / s + 1;
            // The last window must start inside the input or its leading padding.
            if (o - 1) * s >= limit {
                o - 1
            } else {
                o
            }
        }
    }
}

/// Input offsets (within one [D1, …, Dr] plane) read by each output position, row-major.
fn windows(lines: &[Line]) -> Vec<Vec<usize>> {
    let mut acc = vec![vec![0usize]];
    for l in lines {
        let taps: Vec<Vec<usize>> = (0..l.out).map(|o| l.taps(o)).collect();
        acc = (acc.iter())
            .flat_map(|prev| {
                taps.iter().map(move |t| {
                    (prev.iter())
                        .flat_map(|&p| t.iter().map(move |&i| p * l.len + i))
                        .collect()
                })
            })
            .collect();
    }
    acc
}

struct LpPool;

impl Kernel for LpPool {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let f = fact(n, ins, 0)?;
        let lines = lines(n, &f.1)?;
        let shape = f.1[..2]
            .iter()
            .copied()
            .chain(lines.iter().map(|l| l.out))
            .collect();
        Ok(vec![(float_type(n, f)?, shape)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let lines = lines(n, x.shape())?;
        let p = n.int("p", 2);
        anyhow::ensure!(
            p >= 1,
            "LpPool `{}`: p = {p} (must be at least 1)",
            n.proto.name
        );
        let p = p as f64;
        let plane: usize = x.shape()[2..].iter().product();
        let wins = windows(&lines);
        let data = x.as_standard_layout();
        let data = data
            .as_slice()
            .ok_or_else(|| anyhow::anyhow!("LpPool: a non-contiguous input"))?;
        let mut out = Vec::with_capacity(data.len() / plane.max(1) * wins.len());
        for base in (0..x.shape()[0] * x.shape()[1]).map(|k| k * plane) {
            for w in &wins {
                let sum: f64 = w.iter().map(|&i| data[base + i].abs().powf(p)).sum();
                out.push(sum.powf(1.0 / p));
            }
        }
        let shape: Vec<usize> = x.shape()[..2]
            .iter()
            .copied()
            .chain(lines.iter().map(|l| l.out))
            .collect();
        Ok(vec![shaped(&shape, out)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(len: usize, kernel: usize, stride: usize, begin: i64, out: usize) -> Line {
        Line {
            len,
            kernel,
            stride,
            dilation: 1,
            begin,
            out,
        }
    }

    #[test]
    fn windows_skip_padding_and_overhang() {
        let l = line(4, 3, 2, 1, 2);
        assert_eq!(l.taps(0), [0, 1]);
        assert_eq!(l.taps(1), [1, 2, 3]);
        let wide = Line {
            dilation: 2,
            ..line(5, 2, 1, 0, 3)
        };
        assert_eq!(wide.taps(2), [2, 4]);
    }

    #[test]
    fn ceil_mode_drops_a_window_starting_in_the_end_padding() {
        assert_eq!(explicit(3, 2, 2, false, 3), 1);
        assert_eq!(explicit(3, 2, 2, true, 3), 2);
        // 4 + 1 pad at the end, kernel 1, stride 2: ceil gives 3 windows, the third would start at 4 (padding).
        assert_eq!(explicit(5, 1, 2, true, 4), 2);
        // As ONNX's reference: one window at most is dropped.
        assert_eq!(explicit(6, 1, 2, true, 4), 3);
    }

    #[test]
    fn plane_windows_combine_axes_row_major() {
        let w = windows(&[line(2, 2, 1, 0, 1), line(3, 2, 1, 0, 2)]);
        assert_eq!(w, vec![vec![0, 1, 3, 4], vec![1, 2, 4, 5]]);
    }
}
