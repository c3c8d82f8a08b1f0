//! Causes about arithmetic in the target type: an epsilon it cannot hold (an attribute, or a constant added
//! upstream), catastrophic cancellation, softmax over large logits, long reductions.

use super::{cause, involving, limits, max_abs, num, spacing, Evidence, Limits, Site};
use crate::report::model::{Basis, Cause, CauseKind, Confidence, Culprit};
use crate::tensor::narrow::round_one;

/// Epsilon: an attribute, or a small constant added upstream (decomposed normalizations), and cancellation
/// upstream. A culprit wrong on its own (fed the reference's inputs) cannot owe its error to an upstream node's
/// cancellation, whose error it never received: that cause is only looked for on the other bases.
pub(super) fn epsilon(c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (i, node, op, d, l, keep) = (s.i, s.node, s.op, s.d, s.l, s.keep.as_str());
    // Epsilon: an attribute, or a small constant added upstream (decomposed normalizations).
    if let Some(eps) = ev.attr_f(i, "epsilon") {
        // Only when the epsilon matters: it flushes, or it guards a variance of its own order (BatchNorm's
        // running variance tells; other normalizations compute theirs).
        let var_min = (op == "BatchNormalization")
            .then(|| node.inputs.get(4).and_then(|v| ev.value(v)))
            .flatten()
            .map(|v| v.iter().fold(f64::INFINITY, |m, x| m.min(x.abs())));
        let stored = round_one(eps, d);
        let coarse = (stored - eps).abs() > 0.01 * eps;
        let matters = stored == 0.0 || (coarse && var_min.is_none_or(|v| v < 10.0 * eps));
        if eps > 0.0 && eps < l.min_normal && matters {
            out.push(cause(
                CauseKind::Epsilon,
                format!(
                    "epsilon {} is below {}'s smallest normal {} (stored as {})",
                    num(eps),
                    l.name,
                    num(l.min_normal),
                    num(stored)
                ),
                &[
                    ("epsilon", eps),
                    ("stored", stored),
                    ("min_normal", l.min_normal),
                ],
                Confidence::Medium,
                format!("raise epsilon to ≥ {} or {keep}", num(l.min_normal)),
            ));
        }
    }
    let mut frontier: Vec<(usize, usize)> = vec![(i, 0)];
    let mut seen = std::collections::HashSet::new();
    while let Some((n, depth)) = frontier.pop() {
        if !seen.insert(n) || depth > 4 {
            continue;
        }
        let nd = &ev.graph.nodes[n];
        if n != i && c.basis != Basis::Introduced {
            if let Some(cc) = nd.outputs.first().and_then(|o| cancellation(ev, o, l)) {
                if !out.iter().any(|c| c.kind == CauseKind::Cancellation) {
                    out.push(cc);
                }
            }
        }
        if nd.op_type == "Add" {
            for (k, inp) in nd.inputs.iter().enumerate() {
                let Some(c) = ev.value(inp).filter(|a| a.len() == 1) else {
                    continue;
                };
                let eps = c.iter().next().copied().unwrap_or(0.0).abs();
                let other = nd.inputs.get(1 - k).and_then(|o| ev.value(o));
                let var_min = other
                    .as_ref()
                    .map(|a| {
                        a.iter()
                            .filter(|v| v.is_finite())
                            .fold(f64::INFINITY, |m, v| m.min(v.abs()))
                    })
                    .unwrap_or(f64::INFINITY);
                let stored = round_one(eps, ev.dtype(inp));
                // It matters when it flushes, or when the value it guards gets down to its order and the stored
                // subnormal is off by more than 1 % (a subnormal near min_normal is stored almost exactly).
                let coarse = (stored - eps).abs() > 0.01 * eps;
                if eps > 0.0
                    && (stored == 0.0 || (eps < l.min_normal && var_min < 10.0 * eps && coarse))
                {
                    out.push(involving(cause(
                        CauseKind::Epsilon,
                        format!(
                            "`{}` adds epsilon {} which {} stores as {}; the value it guards goes down to {} in f64",
                            nd.name, num(eps), l.name, num(stored), num(var_min)
                        ),
                        &[("epsilon", eps), ("stored", stored), ("guarded_min", var_min), ("min_normal", l.min_normal)],
                        Confidence::High,
                        format!("raise the epsilon of `{}` to ≥ {}, or keep the normalization in fp32", nd.name, num(l.min_normal)),
                    ), &nd.name));
                }
            }
        }
        for inp in &nd.inputs {
            if let Some(p) = ev.producer(inp) {
                frontier.push((p, depth + 1));
            }
        }
    }
}

/// Softmax over large logits.
pub(super) fn softmax(_c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (node, op, l) = (s.node, s.op, s.l);
    // Softmax over large logits.
    if matches!(op, "Softmax" | "LogSoftmax") {
        if let Some(x) = node.inputs.first().and_then(|n| ev.value(n)) {
            let m = max_abs(&x);
            let s = spacing(m, limits(ev.dtype(&node.inputs[0])));
            if s >= 1e-2 {
                out.push(cause(
                    CauseKind::SoftmaxRange,
                    format!(
                        "logits up to {} are stored with a spacing of {} in {}; exp turns that into relative errors up to {}",
                        num(m), num(s), l.name, num(s.exp() - 1.0)
                    ),
                    &[("logit_max_abs", m), ("spacing", s)],
                    Confidence::High,
                    "keep the logits' producer and the Softmax in fp32, or scale the logits down before they are stored".into(),
                ));
            }
        }
    }
}

/// Long reductions.
pub(super) fn long_reduction(_c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (i, l, keep) = (s.i, s.l, s.keep.as_str());
    // Long reductions.
    if let Some(len) = reduction_length(ev, i) {
        let bound = len as f64 * l.u;
        if len >= 256 && !out.iter().any(|c| c.kind == CauseKind::Overflow) {
            out.push(cause(
                CauseKind::LongReduction,
                format!(
                    "each output sums {len} terms; accumulating them in {} can lose up to {len}·u = {} relative",
                    l.name, num(bound)
                ),
                &[("reduction_length", len as f64), ("bound", bound)],
                if bound > 0.1 { Confidence::Medium } else { Confidence::Low },
                match l.u > 1e-6 {
                    true => format!("{keep} so it accumulates in fp32, or split the reduction"),
                    false => "split the reduction or accumulate in f64; if the error persists, check the kernel with \
                              --ort-opt-level disable"
                        .to_string(),
                },
            ));
        }
    }
}

/// Catastrophic cancellation in the culprit itself.
pub(super) fn cancellation_here(c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (op, l) = (s.op, s.l);
    // Catastrophic cancellation.
    if matches!(op, "Sub" | "Add") {
        if let Some(cc) = cancellation(ev, &c.value, l) {
            out.push(cc);
        }
    }
}

/// Reduction length of a node (terms summed into each output element), if it reduces.
pub(super) fn reduction_length(ev: &Evidence, i: usize) -> Option<usize> {
    let n = &ev.graph.nodes[i];
    let shape = |k: usize| -> Option<Vec<usize>> {
        let name = n.inputs.get(k)?;
        ev.value(name).map(|a| a.shape().to_vec())
    };
    match n.op_type.as_str() {
        "MatMul" => shape(0)?.last().copied(),
        "Gemm" => {
            let a = shape(0)?;
            let t = ev.attr_i(i, "transA").unwrap_or(0) != 0;
            a.get(if t { 0 } else { 1 }).copied()
        }
        "Conv" => {
            let w = shape(1)?;
            Some(w.iter().skip(1).product())
        }
        "ReduceSum" | "ReduceMean" | "ReduceSumSquare" | "ReduceL2" | "GlobalAveragePool" => {
            let x = shape(0)?;
            let out: usize = ev.value(&n.outputs[0]).map(|a| a.len()).unwrap_or(1).max(1);
            Some(x.iter().product::<usize>() / out)
        }
        _ => None,
    }
}

/// Catastrophic cancellation in the Sub/Add that produces `value`: operands much larger than the result, so the
/// type's rounding of the operands becomes a large relative error of the result.
pub(super) fn cancellation(ev: &Evidence, value: &str, l: Limits) -> Option<Cause> {
    let p = ev.producer(value)?;
    let node = &ev.graph.nodes[p];
    if !matches!(node.op_type.as_str(), "Sub" | "Add") {
        return None;
    }
    let a = ev.value(node.inputs.first()?)?;
    let b = ev.value(node.inputs.get(1)?)?;
    let y = ev.value(value)?;
    // Element by element, operands broadcast to the result's shape: a large operand of one element and a small
    // result of another (a mask's −3.4e38 beside an unmasked score) are no cancellation.
    let (a, b) = (a.broadcast(y.shape())?, b.broadcast(y.shape())?);
    let f = a
        .iter()
        .zip(b.iter())
        .zip(y.iter())
        .filter(|((x, z), o)| x.is_finite() && z.is_finite() && o.is_finite())
        .map(|((x, z), o)| x.abs().max(z.abs()) / o.abs().max(l.tiny))
        .fold(0.0, f64::max);
    (f * l.u > 1e-2).then(|| {
        let c = cause(
            CauseKind::Cancellation,
            format!(
                "`{}` cancels: its operands are up to {}× larger than its result, so {}'s rounding of them (u = {}) becomes up to {} relative{}",
                node.name,
                num(f),
                l.name,
                num(l.u),
                num(f * l.u),
                if f * l.u >= 1.0 { " — the difference can round to 0" } else { "" }
            ),
            &[("cancellation_factor", f), ("unit_roundoff", l.u)],
            Confidence::Medium,
            format!("compute `{}` and what reads it in fp32 (--keep-fp32), or reformulate the difference", node.name),
        );
        involving(c, &node.name)
    })
}
