//! Causes about the target type's range: initializers it cannot hold, outputs beyond its max (also inside a
//! variance or a sum of squares), the first NaN/Inf, values that flush to zero.

use super::numeric::{cancellation, reduction_length};
use super::{cause, max_abs, num, Evidence, Site};
use crate::precision::convert::RangeKind;
use crate::report::model::{Basis, Cause, CauseKind, Confidence, Culprit};
use crate::tensor::narrow::round_one;

/// Initializers the target type cannot hold.
pub(super) fn initializers(_c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (node, l, keep) = (s.node, s.l, s.keep.as_str());
    // Initializers the target type cannot hold.
    for ri in ev
        .range_issues
        .iter()
        .filter(|r| node.inputs.contains(&r.tensor))
    {
        let (kind, what) = if ri.kind == RangeKind::Overflow {
            (
                CauseKind::InitializerRange,
                format!("beyond {}'s max {} and stored as ±inf", l.name, num(l.max)),
            )
        } else {
            (
                CauseKind::Underflow,
                format!("below {}'s smallest subnormal and stored as 0", l.name),
            )
        };
        let share = ri.count as f64 / ri.elements.max(1) as f64;
        let confidence = if ri.kind == RangeKind::Overflow {
            Confidence::High
        } else if share > 0.01 {
            Confidence::Medium
        } else {
            Confidence::Low
        };
        out.push(cause(
            kind,
            format!(
                "initializer `{}` holds {} of {} values up to {} {what}",
                ri.tensor,
                ri.count,
                ri.elements,
                num(ri.extreme)
            ),
            &[("count", ri.count as f64), ("extreme", ri.extreme), ("type_max", l.max)],
            confidence,
            format!("{keep}, or rescale/fold `{}` (e.g. fold BatchNormalization into the previous Conv)", ri.tensor),
        ));
    }
}

/// Overflow of the output, or inside the node (squares of its input).
pub(super) fn overflow(c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (i, node, op, l, keep, r_out) = (s.i, s.node, s.op, s.l, s.keep.as_str(), &s.r_out);
    // Overflow of the output.
    if let Some(r) = &r_out {
        let m = max_abs(r);
        if m > l.max {
            let over = r
                .iter()
                .filter(|v| v.is_finite() && v.abs() > l.max)
                .count();
            let mut evid = vec![
                ("reference_max_abs", m),
                ("type_max", l.max),
                ("elements_over", over as f64),
            ];
            let mut summary = format!(
                "the f64 output reaches {} ({} elements) beyond {}'s max {}",
                num(m),
                over,
                l.name,
                num(l.max)
            );
            if let Some(len) = reduction_length(ev, i) {
                evid.push(("reduction_length", len as f64));
                summary.push_str(&format!(": a sum of {len} terms"));
            }
            let stats = ev.graph.nodes.iter().find(|n| {
                n.inputs.contains(&c.value)
                    && matches!(
                        n.op_type.as_str(),
                        "ReduceMean" | "ReduceSum" | "ReduceSumSquare"
                    )
            });
            if let (Some(s), "Pow" | "Mul") = (stats, op) {
                summary.push_str(&format!(
                    "; these squares feed `{}` ({}): the variance of a normalization overflows inside",
                    s.name, s.op_type
                ));
            }
            out.push(cause(
                CauseKind::Overflow,
                summary,
                &evid,
                Confidence::High,
                format!("{keep}, or scale its inputs down"),
            ));
        }
    }

    // Overflow inside: a normalization's statistics, or squares of the input (Pow, sum of squares).
    if let Some(c) = norm_statistics(node, op, ev, l, keep) {
        out.push(c);
    } else if matches!(
        op,
        "LayerNormalization"
            | "InstanceNormalization"
            | "GroupNormalization"
            | "RMSNormalization"
            | "SimplifiedLayerNormalization"
            | "SkipLayerNormalization"
            | "SkipSimplifiedLayerNormalization"
            | "ReduceSumSquare"
            | "ReduceL2"
            | "Pow"
    ) {
        if let Some(x) = node.inputs.first().and_then(|n| ev.value(n)) {
            let m = max_abs(&x);
            if m * m > l.max && op != "Pow" {
                out.push(cause(
                    CauseKind::OverflowInside,
                    format!(
                        "inputs up to {} square to {} inside the node, beyond {}'s max {}: a variance or sum of squares computed in {} overflows",
                        num(m), num(m * m), l.name, num(l.max), l.name
                    ),
                    &[("input_max_abs", m), ("square", m * m), ("type_max", l.max)],
                    Confidence::High,
                    format!("{keep} (compute the statistics in fp32), or scale the input down"),
                ));
            }
        }
    }
}

/// The value a normalization normalizes, by rows of its last axis: its input, or for ONNX Runtime's fused
/// Skip(Simplified)LayerNormalization the sum input + skip (+ bias) it forms first.
fn normalized_rows(
    node: &crate::model::Node,
    op: &str,
    ev: &Evidence,
) -> Option<(Vec<f64>, usize)> {
    let x = ev.value(node.inputs.first()?)?;
    let h = *x.shape().last()?;
    let mut v: Vec<f64> = x.iter().copied().collect();
    if op.starts_with("Skip") {
        let skip: Vec<f64> = ev.value(node.inputs.get(1)?)?.iter().copied().collect();
        let bias_slot = if op == "SkipSimplifiedLayerNormalization" {
            3
        } else {
            4
        };
        let bias = node
            .inputs
            .get(bias_slot)
            .filter(|b| !b.is_empty())
            .and_then(|b| ev.value(b));
        if skip.is_empty() || !v.len().is_multiple_of(skip.len()) {
            return None;
        }
        for (i, x) in v.iter_mut().enumerate() {
            *x += skip[i % skip.len()]
                + bias
                    .as_ref()
                    .and_then(|b| b.iter().nth(i % h))
                    .copied()
                    .unwrap_or(0.0);
        }
    }
    (h > 0).then_some((v, h))
}

/// A row whose mean of squares exceeds the target type's max: statistics kept in that type overflow to inf and the
/// row normalizes to 0 (or NaN) — the silent zeros of fp16 RMS norms once |x| > √(max·H).
fn norm_statistics(
    node: &crate::model::Node,
    op: &str,
    ev: &Evidence,
    l: super::Limits,
    keep: &str,
) -> Option<Cause> {
    let norms = [
        "LayerNormalization",
        "RMSNormalization",
        "SimplifiedLayerNormalization",
        "SkipLayerNormalization",
        "SkipSimplifiedLayerNormalization",
    ];
    if !norms.contains(&op) {
        return None;
    }
    let (v, h) = normalized_rows(node, op, ev)?;
    let worst = v
        .chunks(h)
        .map(|r| r.iter().map(|x| x * x).sum::<f64>() / h as f64)
        .fold(0.0f64, f64::max);
    if worst.is_nan() || worst <= l.max {
        return None;
    }
    let what = if op.starts_with("Skip") {
        "the sum input + skip"
    } else {
        "the input"
    };
    let bound = (l.max * h as f64).sqrt();
    Some(cause(
        CauseKind::OverflowInside,
        format!(
            "a row of {what} has a mean of squares of {} over its {h} values, beyond {}'s max {}: statistics kept in {} overflow to inf and the row normalizes to 0 (one value beyond √({}·{h}) = {} is enough)",
            num(worst), l.name, num(l.max), l.name, num(l.max), num(bound)
        ),
        &[("row_mean_square", worst), ("hidden", h as f64), ("bound_abs", bound), ("type_max", l.max)],
        Confidence::High,
        format!("{keep} (compute the statistics in fp32), or scale the input down"),
    ))
}

/// NaN/Inf the reference does not have.
pub(super) fn nan_inf(c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (node, op, l, keep, vr) = (s.node, s.op, s.l, s.keep.as_str(), s.vr);
    // NaN/Inf the reference does not have.
    if let Some(v) = vr {
        if let (Some(ts), Some(rs)) = (&v.target_stats, &v.reference_stats) {
            let ideal = v.noise.as_ref().map(|n| n.nonfinite).unwrap_or(0);
            let by_target = (ts.nan + ts.inf) > (rs.nan + rs.inf);
            let overflowed = out.iter().any(|c| c.kind == CauseKind::Overflow);
            if !overflowed && (by_target || (c.basis == Basis::Ideal && ideal > 0)) {
                let (nan, inf, who) = if by_target {
                    (ts.nan, ts.inf, "the target")
                } else {
                    (ideal, 0, "the ideal low-precision run")
                };
                let mut evid = vec![("nan", nan as f64), ("inf", inf as f64)];
                let mut why = String::new();
                if matches!(op, "Div" | "Reciprocal" | "Log" | "Sqrt") {
                    let k = if op == "Div" { 1 } else { 0 };
                    if let Some(den) = node.inputs.get(k).and_then(|n| ev.value(n)) {
                        let min = den
                            .iter()
                            .filter(|v| v.is_finite())
                            .fold(f64::INFINITY, |a, v| a.min(v.abs()));
                        let rounded = round_one(min, ev.dtype(&node.inputs[k]));
                        evid.push(("input_min_abs", min));
                        evid.push(("input_min_abs_stored", rounded));
                        why = if rounded == 0.0 {
                            format!(
                                "; its input `{}` goes down to {} in f64, which {} stores as 0",
                                node.inputs[k],
                                num(min),
                                l.name
                            )
                        } else {
                            format!(
                                "; in f64 its input `{}` goes down to {}",
                                node.inputs[k],
                                num(min)
                            )
                        };
                    }
                }
                if op == "Div" {
                    if let Some(cc) = node.inputs.get(1).and_then(|den| cancellation(ev, den, l)) {
                        out.push(cc);
                    }
                }
                out.push(cause(
                    CauseKind::NanInf,
                    format!(
                        "first node where {who} makes NaN/Inf on clean inputs ({} NaN/Inf elements; f64 has none){why}",
                        nan + inf
                    ),
                    &evid,
                    Confidence::High,
                    format!("{keep}, or guard the operation (add an epsilon that {} can hold, ≥ {})", l.name, num(l.min_normal)),
                ));
            }
        }
    }
}

/// Underflow of the output.
pub(super) fn underflow(_c: &Culprit, _ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (l, keep, r_out) = (s.l, s.keep.as_str(), &s.r_out);
    // Underflow of the output.
    if let Some(r) = &r_out {
        let nz = r
            .iter()
            .filter(|v| **v != 0.0 && v.is_finite())
            .count()
            .max(1);
        let flush = r
            .iter()
            .filter(|v| **v != 0.0 && v.abs() < l.tiny / 2.0)
            .count();
        let sub = r
            .iter()
            .filter(|v| **v != 0.0 && v.abs() < l.min_normal)
            .count();
        if flush as f64 / nz as f64 > 0.01 || sub as f64 / nz as f64 > 0.1 {
            out.push(cause(
                CauseKind::Underflow,
                format!(
                    "{flush} of {nz} non-zero f64 values flush to 0 and {sub} are subnormal in {}",
                    l.name
                ),
                &[
                    ("flush", flush as f64),
                    ("subnormal", sub as f64),
                    ("nonzero", nz as f64),
                ],
                if flush as f64 / nz as f64 > 0.01 {
                    Confidence::Medium
                } else {
                    Confidence::Low
                },
                format!("{keep}, or scale the values up"),
            ));
        }
    }
}
