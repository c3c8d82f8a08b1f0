//! The numbers of a scan: per value (magnitude, headroom, subnormal shares, NaN/Inf, dead channels, histogram) and
//! per initializer (range, RMS, outliers, per-channel spread, values the low precision cannot hold).

use serde::Serialize;

use crate::model::{Graph, Node};
use crate::precision::convert::{range_issues, RangeIssue};
use crate::precision::LowPrecision;
use crate::tensor::Tensor;

/// fp16's largest finite value and smallest normal; bf16's smallest normal.
const F16_MAX: f64 = 65504.0;
const F16_MIN_NORMAL: f64 = 6.103515625e-5;
const BF16_MIN_NORMAL: f64 = 1.1754943508222875e-38;

/// Histogram buckets: |x| in [2^k, 2^(k+1)) for k in -HIST_LOW..HIST_HIGH, plus zeros (first) and beyond (last).
pub const HIST_LOW: i32 = 24;
pub const HIST_HIGH: i32 = 17;

/// One computed value.
#[derive(Clone, Debug, Serialize)]
pub struct ValueScan {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
    pub shape: Vec<usize>,
    pub max_abs: f64,
    pub rms: f64,
    /// 65504 / max |x| (below 1: overflows in fp16); null for an all-zero value.
    pub fp16_headroom: Option<f64>,
    /// Share of the non-zero values below fp16's smallest normal (they lose precision or flush to 0).
    pub fp16_subnormal: f64,
    /// The same for bf16.
    pub bf16_subnormal: f64,
    pub nan: u64,
    pub inf: u64,
    /// Channels (axis 1 of a 4-D value) that are zero everywhere, and the channel count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_channels: Option<(usize, usize)>,
    /// Counts of |x|: zeros, then one bucket per power of two from 2^-24 to 2^16, then larger.
    pub histogram: Vec<u64>,
}

/// One initializer.
#[derive(Clone, Debug, Serialize)]
pub struct InitScan {
    pub name: String,
    pub elements: usize,
    pub max_abs: f64,
    pub rms: f64,
    /// max |w| / RMS: large when a few weights dwarf the rest.
    pub outlier_ratio: f64,
    /// For weights of rank ≥ 2: the largest ratio of one output channel's max |w| to the median channel's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel_spread: Option<f64>,
    /// Values the scanned precision cannot hold.
    pub issues: Vec<RangeIssue>,
}

fn bucket(x: f64) -> usize {
    if x == 0.0 {
        return 0;
    }
    let k = x.log2().floor() as i32;
    (k.clamp(-HIST_LOW, HIST_HIGH) + HIST_LOW + 1) as usize
}

/// The scan of value `name` computed by `node`.
pub fn value(node: &Node, name: &str, t: &Tensor) -> ValueScan {
    let a = t.as_f64();
    let mut hist = vec![0u64; (HIST_LOW + HIST_HIGH + 2) as usize];
    let (mut max_abs, mut sq, mut n, mut nonzero) = (0f64, 0f64, 0u64, 0u64);
    let (mut nan, mut inf, mut sub16, mut sub_bf) = (0u64, 0u64, 0u64, 0u64);
    for &v in a.iter() {
        if v.is_nan() {
            nan += 1;
            continue;
        }
        if v.is_infinite() {
            inf += 1;
            continue;
        }
        let x = v.abs();
        max_abs = max_abs.max(x);
        sq += x * x;
        n += 1;
        hist[bucket(x)] += 1;
        if x > 0.0 {
            nonzero += 1;
            sub16 += u64::from(x < F16_MIN_NORMAL);
            sub_bf += u64::from(x < BF16_MIN_NORMAL);
        }
    }
    let share = |k: u64| {
        if nonzero == 0 {
            0.0
        } else {
            k as f64 / nonzero as f64
        }
    };
    ValueScan {
        node_index: node.index,
        node: node.name.clone(),
        op_type: node.op_type.clone(),
        value: name.to_string(),
        shape: t.shape().to_vec(),
        max_abs,
        rms: if n == 0 { 0.0 } else { (sq / n as f64).sqrt() },
        fp16_headroom: (max_abs > 0.0).then(|| F16_MAX / max_abs),
        fp16_subnormal: share(sub16),
        bf16_subnormal: share(sub_bf),
        nan,
        inf,
        dead_channels: dead_channels(&a),
        histogram: hist,
    }
}

/// Zero channels (axis 1) of a 4-D value with more than one channel.
fn dead_channels(a: &ndarray::ArrayD<f64>) -> Option<(usize, usize)> {
    if a.ndim() != 4 || a.shape()[1] < 2 {
        return None;
    }
    let c = a.shape()[1];
    let dead = (0..c)
        .filter(|&k| a.index_axis(ndarray::Axis(1), k).iter().all(|v| *v == 0.0))
        .count();
    Some((dead, c))
}

/// Every float initializer's scan, and the values `precision` cannot hold (for the cause analysis).
pub fn initializers(graph: &Graph, precision: LowPrecision) -> (Vec<InitScan>, Vec<RangeIssue>) {
    let proto = crate::model::import::decode(graph.bytes.as_slice()).unwrap_or_default();
    let mut out = vec![];
    let mut all = vec![];
    for t in proto.graph.unwrap_or_default().initializer {
        let Ok(v) = crate::model::proto::tensor_from_proto(&t, graph.path.parent()) else {
            continue;
        };
        if !v.dtype().is_float() || v.is_empty() {
            continue;
        }
        let a = v.as_f64();
        let max_abs = a.iter().fold(0f64, |m, x| m.max(x.abs()));
        let rms = (a.iter().map(|x| x * x).sum::<f64>() / a.len() as f64).sqrt();
        let issues = range_issues(&t.name, a.iter().copied(), precision);
        all.extend(issues.iter().cloned());
        out.push(InitScan {
            name: t.name.clone(),
            elements: a.len(),
            max_abs,
            rms,
            outlier_ratio: if rms > 0.0 { max_abs / rms } else { 0.0 },
            channel_spread: channel_spread(&a),
            issues,
        });
    }
    (out, all)
}

/// The largest ratio of an output channel's (axis 0) max |w| to the median channel's.
fn channel_spread(a: &ndarray::ArrayD<f64>) -> Option<f64> {
    if a.ndim() < 2 || a.shape()[0] < 2 {
        return None;
    }
    let mut maxes: Vec<f64> = a
        .axis_iter(ndarray::Axis(0))
        .map(|c| c.iter().fold(0f64, |m, x| m.max(x.abs())))
        .collect();
    maxes.sort_by(f64::total_cmp);
    let median = maxes[maxes.len() / 2];
    (median > 0.0).then(|| maxes[maxes.len() - 1] / median)
}
