//! What the HTML report draws for one value, beyond its metrics: a histogram of how much of its tolerance each
//! element uses, the worst elements with their indices and both values, and a downsampled heatmap of |t − r|.
//! The heatmap views a tensor as `[channels, H, W]` (the last two dimensions; the leading ones flattened into
//! channels) and keeps at most [`MAX_CHANNELS`] channels of at most [`GRID`]×[`GRID`] cells, each cell the largest
//! |t − r| of the elements it covers, so a 5,000-node report stays a few megabytes.

use rayon::prelude::*;
use serde::Serialize;

use super::Tolerance;
use crate::tensor::{Tensor, ToF64};

/// Lowest log10(error ÷ allowed) with its own histogram bin.
pub const HIST_LO: f64 = -8.0;
/// Bins per decade.
pub const HIST_PER_DECADE: usize = 2;
/// Number of histogram bins between 1e-8 and 1e4 of the tolerance.
pub const HIST_BINS: usize = 24;
/// Worst elements listed per value.
pub const TOP_K: usize = 8;
/// Heatmap cells per side at most.
pub const GRID: usize = 32;
/// Heatmap channels kept at most.
pub const MAX_CHANNELS: usize = 4;

/// Histogram of |t − r| ÷ (atol + rtol·max(|r|, scale)) over the elements: 1 is the tolerance.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Histogram {
    /// Elements with t == r exactly.
    pub exact: u64,
    /// Elements using less than 1e-8 of their tolerance (but not exact).
    pub below: u64,
    /// `counts[i]` covers 10^(-8 + i/2) ..< 10^(-8 + (i+1)/2) of the tolerance.
    pub counts: Vec<u64>,
    /// Elements using 1e4 times their tolerance or more.
    pub above: u64,
    /// NaN/Inf mismatches.
    pub nonfinite: u64,
}

/// One element of a value.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Element {
    pub index: Vec<usize>,
    pub reference: f64,
    pub target: f64,
    /// |t − r| ÷ allowed error; null for a NaN/Inf mismatch.
    pub tolerance_used: Option<f64>,
}

/// Downsampled |t − r| of a value viewed as `[channels, H, W]`.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Heatmap {
    /// The `[channels, H, W]` view of the tensor.
    pub view: [usize; 3],
    /// Grid cells per channel (rows, columns).
    pub grid: [usize; 2],
    /// Indices (into the `channels` of the view) of the channels kept: the one with the worst element, then the
    /// others by their largest error, in index order.
    pub channels: Vec<usize>,
    /// Per kept channel, rows × columns cells of the largest |t − r| they cover, quantized on a log scale:
    /// 0 exact, 1..=254 from `lo` to `hi`, 255 a NaN/Inf mismatch; two hex digits per cell.
    pub cells: Vec<String>,
    /// Smallest non-zero cell value.
    pub lo: f64,
    /// Largest finite cell value.
    pub hi: f64,
}

/// Per-element view of one compared value.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Detail {
    pub histogram: Histogram,
    /// The worst elements, most tolerance used first.
    pub worst: Vec<Element>,
    pub heatmap: Option<Heatmap>,
}

fn used(tol: Tolerance, scale: f64, r: f64, t: f64) -> f64 {
    if !(r.is_finite() && t.is_finite()) {
        return if r == t || (r.is_nan() && t.is_nan()) {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let d = (t - r).abs();
    let allowed = tol.atol + tol.rtol * r.abs().max(scale);
    if d == 0.0 {
        0.0
    } else if allowed > 0.0 {
        d / allowed
    } else {
        f64::INFINITY
    }
}

fn abs_err(r: f64, t: f64) -> f64 {
    if r.is_finite() && t.is_finite() {
        (t - r).abs()
    } else if r == t || (r.is_nan() && t.is_nan()) {
        0.0
    } else {
        f64::INFINITY
    }
}

#[derive(Clone, Default)]
struct Part {
    hist: Histogram,
    top: Vec<(f64, usize)>,
}

impl Part {
    fn push_top(&mut self, u: f64, at: usize) {
        if self.top.len() < TOP_K || u > self.top[TOP_K - 1].0 {
            let pos = self.top.partition_point(|&(x, _)| x >= u);
            self.top.insert(pos, (u, at));
            self.top.truncate(TOP_K);
        }
    }
    fn merge(mut self, o: Part) -> Part {
        self.hist.exact += o.hist.exact;
        self.hist.below += o.hist.below;
        self.hist.above += o.hist.above;
        self.hist.nonfinite += o.hist.nonfinite;
        for (a, b) in self.hist.counts.iter_mut().zip(&o.hist.counts) {
            *a += b;
        }
        for (u, at) in o.top {
            self.push_top(u, at);
        }
        self
    }
}

fn new_part() -> Part {
    Part {
        hist: Histogram {
            counts: vec![0; HIST_BINS],
            ..Default::default()
        },
        top: Vec::with_capacity(TOP_K + 1),
    }
}

enum Bin {
    Below,
    At(usize),
    Above,
}

/// The histogram's bin edges: 10^(HIST_LO + k / HIST_PER_DECADE) for k = 0..=HIST_BINS.
fn edges() -> &'static [f64; HIST_BINS + 1] {
    static EDGES: std::sync::OnceLock<[f64; HIST_BINS + 1]> = std::sync::OnceLock::new();
    EDGES.get_or_init(|| {
        std::array::from_fn(|k| 10f64.powf(HIST_LO + k as f64 / HIST_PER_DECADE as f64))
    })
}

/// The bin of a positive finite share of tolerance `u`: a binary search over the edges (a `log10` per element
/// cost more than the rest of the scan).
#[inline]
fn bin(u: f64) -> Bin {
    let e = edges();
    match e.partition_point(|&x| x <= u) {
        0 => Bin::Below,
        k if k > HIST_BINS => Bin::Above,
        k => Bin::At(k - 1),
    }
}

fn scan<T: ToF64 + Sync>(r: &[f64], t: &[T], tol: Tolerance, scale: f64) -> Part {
    const CHUNK: usize = 1 << 16;
    r.par_chunks(CHUNK)
        .zip(t.par_chunks(CHUNK))
        .enumerate()
        .map(|(c, (rc, tc))| {
            let mut p = new_part();
            for (k, (&rv, tv)) in rc.iter().zip(tc).enumerate() {
                let u = used(tol, scale, rv, tv.to_f64());
                let h = &mut p.hist;
                if u == 0.0 {
                    h.exact += 1;
                    continue;
                }
                if u.is_infinite() {
                    h.nonfinite += 1;
                } else {
                    match bin(u) {
                        Bin::Below => h.below += 1,
                        Bin::Above => h.above += 1,
                        Bin::At(b) => h.counts[b] += 1,
                    }
                }
                p.push_top(u, c * CHUNK + k);
            }
            p
        })
        .reduce(new_part, Part::merge)
}

/// `[channels, H, W]` view of a shape.
fn view(shape: &[usize]) -> [usize; 3] {
    match shape.len() {
        0 => [1, 1, 1],
        1 => [1, 1, shape[0]],
        n => [shape[..n - 2].iter().product(), shape[n - 2], shape[n - 1]],
    }
}

fn heatmap<T: ToF64 + Sync>(r: &[f64], t: &[T], shape: &[usize], worst: Option<usize>) -> Heatmap {
    let [c, h, w] = view(shape);
    let plane = h * w;
    let chan_max: Vec<f64> = (0..c)
        .into_par_iter()
        .map(|ch| {
            let s = ch * plane;
            (s..s + plane)
                .map(|i| abs_err(r[i], t[i].to_f64()))
                .fold(0.0, f64::max)
        })
        .collect();
    let mut order: Vec<usize> = (0..c).collect();
    order.sort_by(|a, b| chan_max[*b].total_cmp(&chan_max[*a]).then(a.cmp(b)));
    let first = worst.map(|i| i / plane.max(1)).unwrap_or(order[0]);
    let mut channels: Vec<usize> = std::iter::once(first)
        .chain(order.into_iter().filter(|&x| x != first))
        .take(MAX_CHANNELS)
        .collect();
    channels[1..].sort_unstable();
    let (gh, gw) = (h.clamp(1, GRID), w.clamp(1, GRID));
    let grids: Vec<Vec<f64>> = channels
        .par_iter()
        .map(|&ch| {
            let mut g = vec![0.0f64; gh * gw];
            for y in 0..h {
                for x in 0..w {
                    let i = ch * plane + y * w + x;
                    let cell = (y * gh / h) * gw + x * gw / w;
                    g[cell] = g[cell].max(abs_err(r[i], t[i].to_f64()));
                }
            }
            g
        })
        .collect();
    let finite = grids.iter().flatten().filter(|v| v.is_finite());
    let lo = finite
        .clone()
        .filter(|v| **v > 0.0)
        .fold(f64::INFINITY, |a, &b| a.min(b));
    let hi = finite.fold(0.0, |a: f64, &b| a.max(b));
    let (llo, lhi) = (lo.log10(), hi.log10());
    let cells = grids
        .iter()
        .map(|g| {
            g.iter()
                .map(|&v| {
                    let q = if v == 0.0 {
                        0
                    } else if !v.is_finite() {
                        255
                    } else if lhi <= llo {
                        254
                    } else {
                        1 + ((v.log10() - llo) / (lhi - llo) * 253.0).round() as u8
                    };
                    format!("{q:02x}")
                })
                .collect()
        })
        .collect();
    Heatmap {
        view: [c, h, w],
        grid: [gh, gw],
        channels,
        cells,
        lo: if lo.is_finite() { lo } else { 0.0 },
        hi,
    }
}

fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[i] = flat % d;
            flat /= d;
        }
    }
    idx
}

/// The per-element view of `target` against `reference` (same length and shape); `scale` as in the metrics.
/// The heatmap is drawn only with `with_heatmap` (the HTML report asks for it).
pub fn detail(
    reference: &[f64],
    target: &Tensor,
    tol: Tolerance,
    scale: f64,
    with_heatmap: bool,
) -> Detail {
    let shape = target.shape().to_vec();
    crate::dispatch_tensor!(target, a => {
        let owned;
        let t = match a.as_slice() {
            Some(s) => s,
            None => {
                owned = a.iter().copied().collect::<Vec<_>>();
                &owned
            }
        };
        let part = scan(reference, t, tol, scale);
        let worst = part
            .top
            .iter()
            .map(|&(u, at)| Element {
                index: unravel(at, &shape),
                reference: reference[at],
                target: t[at].to_f64(),
                tolerance_used: u.is_finite().then_some(u),
            })
            .collect::<Vec<_>>();
        let heatmap = (with_heatmap && !t.is_empty() && part.top.first().is_some_and(|x| x.0 > 0.0))
            .then(|| heatmap(reference, t, &shape, part.top.first().map(|x| x.1)));
        Detail { histogram: part.hist, worst, heatmap }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{ArrayD, IxDyn};

    #[test]
    fn bins_match_half_decades_of_log10() {
        let mut u: f64 = 3.0e-10;
        while u < 1.0e5 {
            let want = ((u.log10() - HIST_LO) * HIST_PER_DECADE as f64).floor();
            let got = match bin(u) {
                Bin::Below => -1.0,
                Bin::At(b) => b as f64,
                Bin::Above => HIST_BINS as f64,
            };
            assert_eq!(got, want.clamp(-1.0, HIST_BINS as f64), "u = {u:e}");
            u *= 1.0137;
        }
    }

    #[test]
    fn histogram_worst_and_heatmap_on_known_values() {
        // 2 channels of 2x3; one element off by 0.5 in channel 1, one NaN mismatch in channel 0.
        let r: Vec<f64> = (0..12).map(|i| i as f64).collect();
        let mut t: Vec<f32> = r.iter().map(|&v| v as f32).collect();
        t[10] += 0.5;
        t[1] = f32::NAN;
        let t = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[2, 2, 3]), t).unwrap());
        let tol = Tolerance {
            atol: 0.1,
            rtol: 0.0,
        };
        let d = detail(&r, &t, tol, 1.0, true);
        assert_eq!(d.histogram.exact, 10);
        assert_eq!(d.histogram.nonfinite, 1);
        // 0.5 / 0.1 = 5 → log10 = 0.699 → bin (0.699 + 8) * 2 = 17
        assert_eq!(d.histogram.counts[17], 1);
        assert_eq!(d.worst[0].index, vec![0, 0, 1], "the NaN mismatch first");
        assert_eq!(d.worst[1].index, vec![1, 1, 1]);
        assert_eq!(d.worst[1].target, 10.5);
        let h = d.heatmap.unwrap();
        assert_eq!(h.view, [2, 2, 3]);
        assert_eq!(h.channels, vec![0, 1]);
        assert_eq!(&h.cells[0][2..4], "ff", "NaN cell of channel 0");
        assert_eq!(&h.cells[1][8..10], "fe", "largest finite cell of channel 1");
        assert_eq!(h.hi, 0.5);
    }
}
