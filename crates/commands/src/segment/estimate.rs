//! What a segment job will hold at its peak, from the plan alone: the memory a scheduler should ask for.

use super::plan::Sizes;
use super::{BoundaryValue, Estimate, Weight};
use crate::model;
use crate::pipeline::CompareSettings;

/// Peak memory of a segment job. The cut model carries the segment's weights inline; the reference keeps the large
/// float ones as stored (a copy) and widens each as it is used, and holds the small ones and, with attribution,
/// about three copies of its values in f64 (as `phantom onnx` sizes a run); ONNX Runtime holds its weights (float16
/// computed in float32) and its values in f32. Measured on the 1.26B decoder cut in four (fp32, 1.2 GiB of weights
/// a segment): 4.0–4.5 GiB per job, where this gives 5.0 GiB.
pub(super) fn estimate(
    nodes: &[model::Node],
    reads: &[BoundaryValue],
    weights: &[Weight],
    sizes: &Sizes,
    s: &CompareSettings,
) -> Estimate {
    let min = crate::model::budget::STORED_MIN_BYTES as u64;
    let large = |w: &&Weight| w.dtype.is_float() && w.dtype.size() <= 4 && w.bytes >= min;
    let elems = |w: &Weight| w.bytes / w.dtype.size().max(1) as u64;
    // Large float weights, counted in float32: the cut model, the reference's stored copy, ONNX Runtime's.
    let large_f32: u64 = weights.iter().filter(large).map(|w| elems(w) * 4).sum();
    let widest: u64 = weights
        .iter()
        .filter(large)
        .map(|w| elems(w) * 8)
        .max()
        .unwrap_or(0);
    let large_stored: u64 = weights.iter().filter(large).map(|w| w.bytes).sum();
    let f64_weights: u64 = (weights.iter().filter(|w| !large(w)))
        .map(|w| match w.dtype.is_float() {
            true => elems(w) * 8,
            false => w.bytes,
        })
        .sum();
    let stored: u64 = weights.iter().map(|w| w.bytes).sum();
    let names: Vec<&str> = nodes
        .iter()
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .filter(|o| !o.is_empty())
        .chain(reads.iter().map(|r| r.name.as_str()))
        .collect();
    let sized: Vec<u64> = names
        .iter()
        .filter_map(|v| sizes.value_f64.get(*v).copied())
        .collect();
    let values_f64: u64 = sized.iter().sum();
    let copies = if s.attribution { 3 } else { 1 };
    let converted = s.targets.iter().any(|t| t.precision.is_some()) as u64;
    Estimate {
        job_bytes: large_f32 / 2 * 5 + f64_weights / 4 * 11 + copies * values_f64 + (64 << 20),
        reference_bytes: large_stored + widest + f64_weights + copies * values_f64,
        target_bytes: stored + converted * stored / 2 + values_f64 / 2,
        sized_values: sized.len(),
        values: names.len(),
    }
}
