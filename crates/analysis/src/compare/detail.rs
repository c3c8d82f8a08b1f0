//! What the HTML report draws for one value, beyond its metrics: a histogram of how much of its tolerance each
//! element uses, the worst elements with their indices and both values, and a downsampled heatmap of |t − r|.
//! The heatmap views a tensor as `[channels, H, W]` (the last two dimensions; the leading ones flattened into
//! channels) and keeps at most [`MAX_CHANNELS`] channels of at most [`GRID`]×[`GRID`] cells, each cell the largest
//! |t − r| of the elements it covers, so a 5,000-node report stays a few megabytes.

use rayon::prelude::*;
use serde::Serialize;

use super::metrics::unravel;
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
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Element {
    pub index: Vec<usize>,
    pub reference: f64,
    pub target: f64,
    /// |t − r| ÷ allowed error; null for a NaN/Inf mismatch.
    pub tolerance_used: Option<f64>,
}

/// Downsampled |t − r| of a value viewed as `[channels, H, W]`.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Detail {
    pub histogram: Histogram,
    /// The worst elements, most tolerance used first.
    pub worst: Vec<Element>,
    pub heatmap: Option<Heatmap>,
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

/// Histogram slots: exact, below, the [`HIST_BINS`] bins, above, NaN/Inf mismatch.
const SLOTS: usize = HIST_BINS + 4;

/// The histogram and the worst elements of one value, accumulated by the metrics pass
/// ([`super::metrics::compare`]) so the elements are read once.
#[derive(Clone, Debug)]
pub struct Spread {
    slots: [u64; SLOTS],
    /// (share of tolerance used, flat index), most used first, at most [`TOP_K`].
    pub top: Vec<(f64, usize)>,
    /// The share an element must exceed to enter `top`: 0 until it holds [`TOP_K`], then its last.
    threshold: f64,
}

impl Spread {
    pub fn new() -> Spread {
        Spread {
            slots: [0; SLOTS],
            top: Vec::with_capacity(TOP_K + 1),
            threshold: 0.0,
        }
    }

    /// Counts one element using `u` of its tolerance (0: exact; infinite: a NaN/Inf mismatch) at flat index
    /// `at`. Branch-free but for the rare entry into `top`: exact and inexact elements alternate unpredictably.
    #[inline(always)]
    pub fn add(&mut self, u: f64, at: usize) {
        self.slots[slot(edges(), u)] += 1;
        if u > self.threshold {
            self.push_top(u, at);
        }
    }

    /// Counts a block of shares of tolerance, the first at flat index `base`. Four histograms take turns so
    /// that runs of elements in one slot do not wait on each other's increment.
    #[inline(always)]
    pub fn add_block(&mut self, u: &[f64], base: usize) {
        let e = edges();
        let mut lanes = [[0u32; SLOTS]; 4];
        let mut quads = u.chunks_exact(4);
        for q in &mut quads {
            for (lane, &x) in lanes.iter_mut().zip(q) {
                lane[slot(e, x)] += 1;
            }
        }
        for &x in quads.remainder() {
            lanes[0][slot(e, x)] += 1;
        }
        for lane in lanes {
            for (a, b) in self.slots.iter_mut().zip(lane) {
                *a += b as u64;
            }
        }
        // Nearly every block holds no element above the threshold: its largest share (four independent maxima the
        // compiler vectorizes) says so without a branch per element.
        let mut most = [0.0f64; 4];
        for q in u.chunks_exact(4) {
            for (m, &x) in most.iter_mut().zip(q) {
                *m = if x > *m { x } else { *m };
            }
        }
        let tail = u.chunks_exact(4).remainder().iter();
        let most = most.into_iter().chain(tail.copied()).fold(0.0, f64::max);
        if most <= self.threshold {
            return;
        }
        for (i, &x) in u.iter().enumerate() {
            if x > self.threshold {
                self.push_top(x, base + i);
            }
        }
    }

    #[inline(never)]
    fn push_top(&mut self, u: f64, at: usize) {
        let pos = self.top.partition_point(|&(x, _)| x >= u);
        self.top.insert(pos, (u, at));
        self.top.truncate(TOP_K);
        if self.top.len() == TOP_K {
            self.threshold = self.top[TOP_K - 1].0;
        }
    }

    /// Joins the spread of a later chunk (ties keep the earlier element first).
    pub fn merge(mut self, o: Spread) -> Spread {
        for (a, b) in self.slots.iter_mut().zip(o.slots) {
            *a += b;
        }
        for (u, at) in o.top {
            if u > self.threshold {
                self.push_top(u, at);
            }
        }
        self
    }

    /// The histogram counted.
    pub fn histogram(&self) -> Histogram {
        let s = &self.slots;
        Histogram {
            exact: s[0],
            below: s[1],
            counts: s[2..HIST_BINS + 2].to_vec(),
            above: s[HIST_BINS + 2],
            nonfinite: s[HIST_BINS + 3],
        }
    }
}

impl Default for Spread {
    fn default() -> Spread {
        Spread::new()
    }
}

/// Per binary exponent, the slot of its power of two and the one histogram edge inside its binade ([`Binade`]). The
/// edges are 10^(HIST_LO + k / HIST_PER_DECADE) for k = 0..=HIST_BINS.
struct Edges {
    by_exponent: [Binade; 2048],
}

/// A binade's slots: `base` below `fence`, `base + 1` from it. Edges are 10^0.5 apart, so at most one lies inside a
/// binade; one load gives both (the slot of the power of two, then the edge above it, were two dependent loads).
#[derive(Clone, Copy)]
struct Binade {
    fence: f64,
    base: u32,
}

fn edges() -> &'static Edges {
    static EDGES: std::sync::OnceLock<Edges> = std::sync::OnceLock::new();
    EDGES.get_or_init(|| {
        // Between a 0 and an infinity: `fences[c] ≤ u < fences[c + 1]` when `c` edges are at or below `u` > 0.
        let fences: [f64; HIST_BINS + 3] = std::array::from_fn(|i| match i {
            0 => 0.0,
            i if i == HIST_BINS + 2 => f64::INFINITY,
            i => 10f64.powf(HIST_LO + (i - 1) as f64 / HIST_PER_DECADE as f64),
        });
        let by_exponent = std::array::from_fn(|e| match e {
            // Zero is exact (slot 0); a subnormal share is below the lowest edge (slot 1).
            0 => Binade {
                fence: f64::from_bits(1),
                base: 0,
            },
            e => {
                let p = f64::from_bits((e as u64) << 52);
                let below = fences[1..HIST_BINS + 2].iter().filter(|&&x| x <= p).count();
                Binade {
                    fence: fences[below + 1],
                    base: 1 + below as u32,
                }
            }
        });
        Edges { by_exponent }
    })
}

/// The slot of a share of tolerance `u` ≥ 0 (0 exact, infinite a NaN/Inf mismatch), without a branch: its binade's
/// base, plus one past the edge inside it (a `log10` per element cost more than the rest of the scan).
#[inline(always)]
fn slot(e: &Edges, u: f64) -> usize {
    let b = e.by_exponent[(u.to_bits() >> 52) as usize & 0x7ff];
    b.base as usize + (b.fence <= u) as usize
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

/// The per-element view of `target` against `reference` (same length and shape) from the `spread` the metrics
/// pass accumulated. The heatmap is drawn only with `with_heatmap` (the HTML report asks for it).
pub fn detail(reference: &[f64], target: &Tensor, spread: Spread, with_heatmap: bool) -> Detail {
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
        let worst = spread
            .top
            .iter()
            .map(|&(u, at)| Element {
                index: unravel(at, &shape),
                reference: reference[at],
                target: t[at].to_f64(),
                tolerance_used: u.is_finite().then_some(u),
            })
            .collect::<Vec<_>>();
        let first = spread.top.first().map(|x| x.1);
        let heatmap = (with_heatmap && !t.is_empty() && first.is_some())
            .then(|| heatmap(reference, t, &shape, first));
        Detail { histogram: spread.histogram(), worst, heatmap }
    }, _s => Detail { histogram: spread.histogram(), worst: vec![], heatmap: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::Tolerance;
    use ndarray::{ArrayD, IxDyn};

    #[test]
    fn bins_match_half_decades_of_log10() {
        let mut u: f64 = 3.0e-300;
        while u < 1.0e300 {
            let want = ((u.log10() - HIST_LO) * HIST_PER_DECADE as f64).floor();
            let got = slot(edges(), u) as f64 - 2.0;
            assert_eq!(got, want.clamp(-1.0, HIST_BINS as f64), "u = {u:e}");
            u *= if (1e-10..1e5).contains(&u) {
                1.0137
            } else {
                1.7
            };
        }
        let e = edges();
        for k in 1..HIST_BINS {
            let at = 10f64.powf(HIST_LO + k as f64 / HIST_PER_DECADE as f64);
            let below = f64::from_bits(at.to_bits() - 1);
            assert_eq!(slot(e, at), k + 2, "edge {k}");
            assert_eq!(slot(e, below), k + 1, "below edge {k}");
        }
        assert_eq!((slot(e, 0.0), slot(e, f64::INFINITY)), (0, SLOTS - 1));
        assert_eq!(
            (slot(e, f64::MIN_POSITIVE / 8.0), slot(e, f64::MAX)),
            (1, SLOTS - 2)
        );
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
            floor: 0.0,
        };
        let c = crate::compare::compare(
            &ArrayD::from_shape_vec(IxDyn(&[12]), r.clone()).unwrap(),
            &t,
            tol,
            None,
        );
        let d = detail(&r, &t, c.spread, true);
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
