//! Why a culprit drifts, with evidence from the f64 reference values: overflow (of the output, inside the node, or
//! of an initializer), NaN/Inf, underflow, an epsilon the type cannot hold, long reductions, softmax over large
//! logits, catastrophic cancellation, index flips, quantization saturation and range use, fusion. Each cause
//! carries its numbers, a confidence and the fix to try.

use std::collections::{BTreeMap, HashMap};

use ndarray::{ArrayD, Axis};
use tract_onnx::pb::NodeProto;

use crate::model::Graph;
use crate::precision::convert::RangeIssue;
use crate::report::model::{Cause, Culprit, NodeReport, ValueStatus};
use crate::runner::reference::kernels::round_one;
use crate::runner::reference::Rounding;
use crate::tensor::{DType, Tensor};

/// Facts of one element type.
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) name: &'static str,
    max: f64,
    /// Smallest positive subnormal.
    tiny: f64,
    min_normal: f64,
    /// Unit roundoff.
    u: f64,
}

pub(crate) fn limits(d: DType) -> Limits {
    match d {
        DType::F16 => Limits {
            name: "fp16",
            max: 65504.0,
            tiny: 5.960464477539063e-8,
            min_normal: 6.103515625e-5,
            u: 4.8828125e-4,
        },
        DType::Bf16 => Limits {
            name: "bf16",
            max: 3.3895313892515355e38,
            tiny: 9.183549615799121e-41,
            min_normal: 1.1754943508222875e-38,
            u: 3.90625e-3,
        },
        _ => Limits {
            name: "fp32",
            max: f32::MAX as f64,
            tiny: 1.401298464324817e-45,
            min_normal: f32::MIN_POSITIVE as f64,
            u: 5.960464477539063e-8,
        },
    }
}

/// What cause analysis reads.
pub struct Evidence<'a> {
    pub graph: &'a Graph,
    /// Node protos by node index (for attributes).
    pub protos: Vec<NodeProto>,
    /// Reference values by name (f64), when they were kept.
    pub values: Option<&'a HashMap<String, Tensor>>,
    /// Element type the target stores each value in.
    pub round: Option<&'a Rounding>,
    pub range_issues: &'a [RangeIssue],
    pub nodes: &'a [NodeReport],
    /// Initializer values by name (decoded on demand by the caller).
    pub initializers: HashMap<String, Tensor>,
}

impl<'a> Evidence<'a> {
    /// Gathers what [`explain`] reads: node attributes and the small initializers (≤ 4096 elements) plus those
    /// the culprits read.
    pub fn new(
        graph: &'a Graph,
        values: Option<&'a HashMap<String, Tensor>>,
        round: Option<&'a Rounding>,
        range_issues: &'a [RangeIssue],
        nodes: &'a [NodeReport],
        culprits: &[Culprit],
    ) -> Evidence<'a> {
        use prost::Message;
        let proto = tract_onnx::pb::ModelProto::decode(graph.bytes.as_slice()).unwrap_or_default();
        let g = proto.graph.unwrap_or_default();
        let protos = graph
            .nodes
            .iter()
            .map(|n| g.node.get(n.source_index).cloned().unwrap_or_default())
            .collect();
        let wanted: std::collections::HashSet<&str> = culprits
            .iter()
            .flat_map(|c| graph.nodes[c.node_index].inputs.iter().map(String::as_str))
            .collect();
        let initializers = g
            .initializer
            .iter()
            .filter(|t| t.dims.iter().product::<i64>() <= 4096 || wanted.contains(t.name.as_str()))
            .filter_map(|t| {
                crate::model::proto::tensor_from_proto(t, graph.path.parent())
                    .ok()
                    .map(|v| (t.name.clone(), v))
            })
            .collect();
        Evidence {
            graph,
            protos,
            values,
            round,
            range_issues,
            nodes,
            initializers,
        }
    }
}

pub(crate) fn cause(
    kind: &str,
    summary: String,
    ev: &[(&str, f64)],
    confidence: &str,
    fix: String,
) -> Cause {
    Cause {
        kind: kind.into(),
        summary,
        evidence: ev
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<_, _>>(),
        confidence: confidence.into(),
        fix,
        nodes: vec![],
    }
}

fn involving(mut c: Cause, node: &str) -> Cause {
    c.nodes.push(node.to_string());
    c
}

pub(crate) fn num(x: f64) -> String {
    crate::report::terminal::num(x)
}

impl Evidence<'_> {
    pub(crate) fn value(&self, name: &str) -> Option<ArrayD<f64>> {
        self.values
            .and_then(|v| v.get(name))
            .or_else(|| self.initializers.get(name))
            .map(|t| t.to_f64_array())
    }

    pub(crate) fn dtype(&self, name: &str) -> DType {
        self.round
            .and_then(|r| r.get(name).copied())
            .unwrap_or(DType::F32)
    }

    fn attr_f(&self, node: usize, name: &str) -> Option<f64> {
        self.protos
            .get(node)?
            .attribute
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.f as f64)
    }

    pub(crate) fn attr_i(&self, node: usize, name: &str) -> Option<i64> {
        self.protos
            .get(node)?
            .attribute
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.i)
    }

    pub(crate) fn producer(&self, value: &str) -> Option<usize> {
        self.graph
            .nodes
            .iter()
            .find(|n| n.outputs.iter().any(|o| o == value))
            .map(|n| n.index)
    }

    fn report(&self, node: usize) -> Option<&NodeReport> {
        self.nodes.iter().find(|n| n.index == node)
    }
}

fn max_abs(a: &ArrayD<f64>) -> f64 {
    a.iter()
        .filter(|v| v.is_finite())
        .fold(0.0, |m, v| m.max(v.abs()))
}

/// Spacing of the type's representable numbers at magnitude `x`.
pub(crate) fn spacing(x: f64, l: Limits) -> f64 {
    if x < l.min_normal {
        return l.tiny;
    }
    2f64.powf(x.log2().floor()) * 2.0 * l.u
}

/// Reduction length of a node (terms summed into each output element), if it reduces.
fn reduction_length(ev: &Evidence, i: usize) -> Option<usize> {
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
fn cancellation(ev: &Evidence, value: &str, l: Limits) -> Option<Cause> {
    let p = ev.producer(value)?;
    let node = &ev.graph.nodes[p];
    if !matches!(node.op_type.as_str(), "Sub" | "Add") {
        return None;
    }
    let a = ev.value(node.inputs.first()?)?;
    let b = ev.value(node.inputs.get(1)?)?;
    let y = ev.value(value)?;
    let f = if a.shape() == y.shape() && b.shape() == y.shape() {
        a.iter()
            .zip(b.iter())
            .zip(y.iter())
            .filter(|((x, z), o)| x.is_finite() && z.is_finite() && o.is_finite())
            .map(|((x, z), o)| x.abs().max(z.abs()) / o.abs().max(l.tiny))
            .fold(0.0, f64::max)
    } else {
        max_abs(&a).max(max_abs(&b))
            / y.iter()
                .filter(|v| v.is_finite())
                .fold(f64::INFINITY, |m, v| m.min(v.abs()))
                .max(l.tiny)
    };
    (f * l.u > 1e-2).then(|| {
        let c = cause(
            "cancellation",
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
            "medium",
            format!("compute `{}` and what reads it in fp32 (--keep-fp32), or reformulate the difference", node.name),
        );
        involving(c, &node.name)
    })
}

/// The likely causes of `c`, most confident first.
pub fn explain(c: &Culprit, ev: &Evidence) -> Vec<Cause> {
    let i = c.node_index;
    let node = &ev.graph.nodes[i];
    let op = node.op_type.as_str();
    let d = ev.dtype(&c.value);
    let l = limits(d);
    let keep = if d.size() < 4 {
        format!("keep `{}` in fp32 (--keep-fp32 '{}')", node.name, node.name)
    } else {
        format!(
            "check `{}`'s kernel on this execution provider (and compare with --ort-opt-level disable)",
            node.name
        )
    };
    let mut out: Vec<Cause> = vec![];
    let report = ev.report(i);
    let vr = report.and_then(|r| r.values.iter().find(|v| v.name == c.value));
    let r_out = ev.value(&c.value);

    // Initializers the target type cannot hold.
    for ri in ev
        .range_issues
        .iter()
        .filter(|r| node.inputs.contains(&r.tensor))
    {
        let (kind, what) = if ri.kind == "overflow" {
            (
                "initializer_range",
                format!("beyond {}'s max {} and stored as ±inf", l.name, num(l.max)),
            )
        } else {
            (
                "underflow",
                format!("below {}'s smallest subnormal and stored as 0", l.name),
            )
        };
        let share = ri.count as f64 / ri.elements.max(1) as f64;
        let confidence = if ri.kind == "overflow" {
            "high"
        } else if share > 0.01 {
            "medium"
        } else {
            "low"
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
                "overflow",
                summary,
                &evid,
                "high",
                format!("{keep}, or scale its inputs down"),
            ));
        }
    }

    // Overflow inside: squares of the input (variance, Pow, sum of squares).
    if matches!(
        op,
        "LayerNormalization"
            | "InstanceNormalization"
            | "GroupNormalization"
            | "RMSNormalization"
            | "SimplifiedLayerNormalization"
            | "ReduceSumSquare"
            | "ReduceL2"
            | "Pow"
    ) {
        if let Some(x) = node.inputs.first().and_then(|n| ev.value(n)) {
            let m = max_abs(&x);
            if m * m > l.max && op != "Pow" {
                out.push(cause(
                    "overflow_inside",
                    format!(
                        "inputs up to {} square to {} inside the node, beyond {}'s max {}: a variance or sum of squares computed in {} overflows",
                        num(m), num(m * m), l.name, num(l.max), l.name
                    ),
                    &[("input_max_abs", m), ("square", m * m), ("type_max", l.max)],
                    "high",
                    format!("{keep} (compute the statistics in fp32), or scale the input down"),
                ));
            }
        }
    }

    // NaN/Inf the reference does not have.
    if let Some(v) = vr {
        if let (Some(ts), Some(rs)) = (&v.target_stats, &v.reference_stats) {
            let ideal = v.noise.as_ref().map(|n| n.nonfinite).unwrap_or(0);
            let by_target = (ts.nan + ts.inf) > (rs.nan + rs.inf);
            let overflowed = out.iter().any(|c| c.kind == "overflow");
            if !overflowed && (by_target || (c.basis == "ideal" && ideal > 0)) {
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
                    "nan_inf",
                    format!(
                        "first node where {who} makes NaN/Inf on clean inputs ({} NaN/Inf elements; f64 has none){why}",
                        nan + inf
                    ),
                    &evid,
                    "high",
                    format!("{keep}, or guard the operation (add an epsilon that {} can hold, ≥ {})", l.name, num(l.min_normal)),
                ));
            }
        }
    }

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
                "epsilon",
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
                "medium",
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
        if n != i {
            if let Some(cc) = nd.outputs.first().and_then(|o| cancellation(ev, o, l)) {
                if !out.iter().any(|c| c.kind == "cancellation") {
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
                        "epsilon",
                        format!(
                            "`{}` adds epsilon {} which {} stores as {}; the value it guards goes down to {} in f64",
                            nd.name, num(eps), l.name, num(stored), num(var_min)
                        ),
                        &[("epsilon", eps), ("stored", stored), ("guarded_min", var_min), ("min_normal", l.min_normal)],
                        "high",
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

    // Softmax over large logits.
    if matches!(op, "Softmax" | "LogSoftmax") {
        if let Some(x) = node.inputs.first().and_then(|n| ev.value(n)) {
            let m = max_abs(&x);
            let s = spacing(m, limits(ev.dtype(&node.inputs[0])));
            if s >= 1e-2 {
                out.push(cause(
                    "softmax_range",
                    format!(
                        "logits up to {} are stored with a spacing of {} in {}; exp turns that into relative errors up to {}",
                        num(m), num(s), l.name, num(s.exp() - 1.0)
                    ),
                    &[("logit_max_abs", m), ("spacing", s)],
                    "high",
                    "keep the logits' producer and the Softmax in fp32, or scale the logits down before they are stored".into(),
                ));
            }
        }
    }

    // Long reductions.
    if let Some(len) = reduction_length(ev, i) {
        let bound = len as f64 * l.u;
        if len >= 256 && !out.iter().any(|c| c.kind == "overflow") {
            out.push(cause(
                "long_reduction",
                format!(
                    "each output sums {len} terms; accumulating them in {} can lose up to {len}·u = {} relative",
                    l.name, num(bound)
                ),
                &[("reduction_length", len as f64), ("bound", bound)],
                if bound > 0.1 { "medium" } else { "low" },
                format!("accumulate in fp32 ({keep} on this execution provider), or split the reduction"),
            ));
        }
    }

    // Catastrophic cancellation.
    if matches!(op, "Sub" | "Add") {
        if let Some(cc) = cancellation(ev, &c.value, l) {
            out.push(cc);
        }
    }

    // Index flips.
    if let Some(f) = super::index_flip::rounding_to_integers(ev, i) {
        out.push(f);
    }
    if matches!(op, "ArgMax" | "ArgMin" | "TopK") {
        let li = limits(ev.dtype(&node.inputs[0]));
        if let Some(x) = node.inputs.first().and_then(|n| ev.value(n)) {
            let axis = ev
                .attr_i(i, "axis")
                .unwrap_or(if op == "TopK" { -1 } else { 0 });
            let ax = if axis < 0 {
                x.ndim() as i64 + axis
            } else {
                axis
            } as usize;
            if ax < x.ndim() {
                let margin = x
                    .lanes(Axis(ax))
                    .into_iter()
                    .map(|lane| {
                        let mut v: Vec<f64> =
                            lane.iter().copied().filter(|v| v.is_finite()).collect();
                        v.sort_by(|a, b| b.total_cmp(a));
                        if op == "ArgMin" {
                            v.reverse();
                        }
                        if v.len() < 2 {
                            f64::INFINITY
                        } else {
                            (v[0] - v[1]).abs() / spacing(v[0].abs(), li)
                        }
                    })
                    .fold(f64::INFINITY, f64::min);
                if margin < 2.0 {
                    out.push(cause(
                        "index_flip",
                        format!(
                            "the top two candidates differ by only {} {} spacing(s) in f64: rounding decides which wins",
                            num(margin), li.name
                        ),
                        &[("margin_in_spacings", margin)],
                        "high",
                        "compare the scores in fp32, or accept ties as equivalent".into(),
                    ));
                }
            }
        }
    }

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
                "underflow",
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
                    "medium"
                } else {
                    "low"
                },
                format!("{keep}, or scale the values up"),
            ));
        }
    }

    // Fails in the graph on clean inputs, passes alone: fusion, or small input errors amplified.
    if let Some(v) = vr {
        let alone = v
            .introduced
            .as_ref()
            .filter(|x| x.status == ValueStatus::Pass);
        if let (true, true, Some(alone)) = (out.is_empty(), c.basis == "cumulative", alone) {
            out.push(cause(
                "fusion",
                format!(
                    "alone (fed with reference inputs) the node is within tolerance (max |t − r| {}), in the graph it is not ({}): ONNX Runtime may have fused it with its neighbours, or it amplifies errors its inputs carry within tolerance",
                    num(alone.metrics.max_abs),
                    num(v.metrics.as_ref().map(|m| m.max_abs).unwrap_or(0.0))
                ),
                &[("alone_max_abs", alone.metrics.max_abs)],
                "low",
                "rerun with --ort-opt-level disable: if the drift goes away, a fused kernel is the cause".into(),
            ));
        }
    }

    if out.is_empty() {
        let summary = match (c.basis.as_str(), c.noise_ratio) {
            ("cumulative", None) => "fails in the graph on clean inputs; the evidence phantom has (no per-node run) names \
                 no specific cause: rerun with --attribution on to measure the node alone"
                .to_string(),
            (_, Some(r)) => format!(
                "the node's own {} computation is {}× the error of correctly rounding its f64 output",
                l.name,
                num(r)
            ),
            _ => {
                let m = r_out.as_ref().map(max_abs).unwrap_or(0.0);
                let used = vr
                    .and_then(|v| v.noise.as_ref())
                    .map(|n| n.tolerance_used)
                    .unwrap_or(f64::NAN);
                format!(
                    "stored in {} (values up to {}, resolved to {} there), this value moves by up to {} even with exact \
                     arithmetic: {}× its tolerance; the precision itself is too coarse here",
                    l.name,
                    num(m),
                    num(spacing(m, l)),
                    num(c.max_abs),
                    num(used)
                )
            }
        };
        out.push(cause(
            "precision",
            summary,
            &[("noise_ratio", c.noise_ratio.unwrap_or(f64::NAN))],
            "low",
            keep.to_string(),
        ));
    }
    let rank = |c: &Cause| match c.confidence.as_str() {
        "high" => 0,
        "medium" => 1,
        _ => 2,
    };
    out.sort_by_key(rank);
    out
}
