//! Quantization: saturation and range use at QuantizeLinear.

use super::{cause, num, Evidence, Site};
use crate::report::model::{Cause, Culprit};
use crate::tensor::DType;

/// Quantization saturation and range use.
pub(super) fn explain(_c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (node, op) = (s.node, s.op);
    // Quantization.
    if op == "QuantizeLinear" {
        if let (Some(x), Some(scale)) = (
            node.inputs.first().and_then(|n| ev.value(n)),
            node.inputs.get(1).and_then(|n| ev.value(n)),
        ) {
            let zp = node.inputs.get(2).and_then(|n| ev.value(n));
            let signed = node
                .inputs
                .get(2)
                .and_then(|n| {
                    ev.initializers
                        .get(n)
                        .or_else(|| ev.values.and_then(|v| v.get(n)))
                })
                .is_some_and(|t| t.dtype() == DType::I8);
            let (qmin, qmax) = if signed {
                (-128.0, 127.0)
            } else {
                (0.0, 255.0)
            };
            let s = scale.iter().next().copied().unwrap_or(1.0);
            let z = zp.and_then(|z| z.iter().next().copied()).unwrap_or(0.0);
            let q: Vec<f64> = x
                .iter()
                .filter(|v| v.is_finite())
                .map(|v| (v / s).round() + z)
                .collect();
            let sat = q.iter().filter(|&&v| v < qmin || v > qmax).count();
            let (lo, hi) = q
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                    (a.min(v), b.max(v))
                });
            let used = ((hi.min(qmax) - lo.max(qmin)) / (qmax - qmin)).max(0.0);
            if sat > 0 {
                out.push(cause(
                    "quantization_saturation",
                    format!(
                        "{sat} of {} values fall outside [{qmin}, {qmax}] at scale {} and saturate",
                        q.len(),
                        num(s)
                    ),
                    &[("saturated", sat as f64), ("scale", s), ("zero_point", z)],
                    "high",
                    "recalibrate the scale on data like this input, or keep this tensor in float"
                        .into(),
                ));
            }
            if used < 0.1 {
                out.push(cause(
                    "quantization_range",
                    format!(
                        "the values use {:.1}% of the quantized range at scale {}",
                        100.0 * used,
                        num(s)
                    ),
                    &[("range_used", used), ("scale", s)],
                    "medium",
                    "recalibrate: a smaller scale would resolve these values better".into(),
                ));
            }
        }
    }
}
