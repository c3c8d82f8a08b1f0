//! Why a culprit drifts, with evidence from the f64 reference values: overflow (of the output, inside the node, or
//! of an initializer), NaN/Inf, underflow, an epsilon the type cannot hold, long reductions, softmax over large
//! logits, catastrophic cancellation, index flips, quantization saturation and range use, fusion. Each cause
//! carries its numbers, a confidence and the fix to try. One file per family: `range` (overflow, underflow,
//! initializers, NaN/Inf), `numeric` (epsilon, cancellation, softmax, long reductions), `quant`, and the index
//! flips in `super::index_flip`.

mod accuracy;
mod conv_pairs;
pub mod differ;
pub mod fused_pairs;
mod numeric;
mod quant;
mod range;
mod weights;

use std::collections::{BTreeMap, HashMap};

use ndarray::ArrayD;
use tract_onnx::pb::NodeProto;

use crate::model::Graph;
use crate::precision::convert::RangeIssue;
use crate::report::model::{Basis, Cause, CauseKind, Confidence, Culprit, NodeReport, ValueStatus};
use crate::spill::Values;
use crate::tensor::{DType, Tensor};
use phantom_engine::computed::Rounding;

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
    /// Reference values by name (f64), when they were kept (in memory or spilled to disk).
    pub values: Option<&'a dyn Values>,
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
        values: Option<&'a dyn Values>,
        round: Option<&'a Rounding>,
        range_issues: &'a [RangeIssue],
        nodes: &'a [NodeReport],
        culprits: &[Culprit],
    ) -> Evidence<'a> {
        // Only the weights read are decoded: the model without them, and those it hands out one by one.
        let mut skeleton = crate::model::skeleton::Skeleton::of(graph).ok();
        let g = (skeleton.as_ref())
            .and_then(|s| s.proto.graph.clone())
            .unwrap_or_default();
        let protos = graph
            .nodes
            .iter()
            .map(|n| g.node.get(n.source_index).cloned().unwrap_or_default())
            .collect();
        let wanted: std::collections::HashSet<&str> = culprits
            .iter()
            .flat_map(|c| graph.nodes[c.node_index].inputs.iter().map(String::as_str))
            .collect();
        let small = |dims: &[i64]| crate::tensor::onnx_elements(dims).is_some_and(|n| n <= 4096);
        let initializers = (graph.initializers.iter())
            .filter(|(name, info)| small(&info.dims) || wanted.contains(name.as_str()))
            .filter_map(|(name, _)| {
                let t = skeleton.as_mut()?.take(graph, name)?.ok()?;
                let v = crate::model::proto::tensor_from_proto(&t, graph.path.parent()).ok()?;
                Some((name.clone(), v))
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
    kind: CauseKind,
    summary: String,
    ev: &[(&str, f64)],
    confidence: Confidence,
    fix: String,
) -> Cause {
    Cause {
        kind,
        summary,
        evidence: ev
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<_, _>>(),
        confidence,
        fix,
        nodes: vec![],
    }
}

fn involving(mut c: Cause, node: &str) -> Cause {
    c.nodes.push(node.to_string());
    c
}

pub(crate) use crate::units::num;

impl Evidence<'_> {
    pub(crate) fn value(&self, name: &str) -> Option<ArrayD<f64>> {
        if let Some(t) = self.values.and_then(|v| v.tensor(name)) {
            return Some(match t {
                std::borrow::Cow::Owned(Tensor::F64(a)) => a,
                t => t.to_f64_array(),
            });
        }
        self.initializers.get(name).map(|t| t.to_f64_array())
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

    pub(crate) fn attr_s(&self, node: usize, name: &str) -> Option<String> {
        self.protos
            .get(node)?
            .attribute
            .iter()
            .find(|a| a.name == name)
            .map(|a| String::from_utf8_lossy(&a.s).into_owned())
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

/// The culprit's node and value as the cause families read them.
pub(super) struct Site<'e> {
    pub i: usize,
    pub node: &'e crate::model::Node,
    pub op: &'e str,
    pub d: DType,
    pub l: Limits,
    /// The fix that keeps this node out of the low precision.
    pub keep: String,
    pub vr: Option<&'e crate::report::model::ValueReport>,
    pub r_out: Option<ArrayD<f64>>,
}

/// The culprit's node and value as the cause families read them.
fn site<'e>(c: &Culprit, ev: &'e Evidence) -> Site<'e> {
    let i = c.node_index;
    let node = &ev.graph.nodes[i];
    let op = node.op_type.as_str();
    let d = ev.dtype(&c.value);
    let l = limits(d);
    let keep = if d.size() < 4 && native_low(ev.graph) {
        format!(
            "the model itself computes `{}` in {}: compute it (and what feeds it) in float32 in the model, as its \
             exporter can (--keep-fp32 applies to phantom's own conversion)",
            node.name,
            d.name()
        )
    } else if d.size() < 4 {
        format!("keep `{}` in fp32 (--keep-fp32 '{}')", node.name, node.name)
    } else {
        format!(
            "check `{}`'s kernel on this execution provider (and compare with --ort-opt-level disable)",
            node.name
        )
    };
    let report = ev.report(i);
    let vr = report.and_then(|r| r.values.iter().find(|v| v.name == c.value));
    let r_out = ev.value(&c.value);
    Site {
        i,
        node,
        op,
        d,
        l,
        keep,
        vr,
        r_out,
    }
}

/// Whether the model holds float16 or bfloat16 data itself (a native low-precision model, not phantom's conversion
/// of a float32 one): its inputs or weights are of those types.
fn native_low(graph: &Graph) -> bool {
    let low = |d: DType| matches!(d, DType::F16 | DType::Bf16);
    graph.inputs.iter().any(|i| i.dtype.is_some_and(low))
        || graph.initializers.values().any(|w| low(w.dtype))
}

/// Whether the provider holding `c`'s weights in a narrower type explains its error ([`weights`]): for the
/// origins of amplified errors, whose causes are not sought otherwise.
pub fn weights_narrowed(c: &Culprit, ev: &Evidence) -> Option<Cause> {
    let mut out = vec![];
    weights::explain(c, ev, &site(c, ev), &mut out);
    out.pop()
}

/// The likely causes of `c`, most confident first.
pub fn explain(c: &Culprit, ev: &Evidence) -> Vec<Cause> {
    let s = site(c, ev);
    let mut out: Vec<Cause> = vec![];
    for family in [
        range::initializers,
        range::overflow,
        range::nan_inf,
        numeric::epsilon,
        numeric::softmax,
        numeric::long_reduction,
        numeric::cancellation_here,
        super::index_flip::explain,
        quant::explain,
        fused_pairs::explain,
        accuracy::explain,
        weights::explain,
        range::underflow,
    ] {
        family(c, ev, &s, &mut out);
    }
    let Site {
        l, keep, vr, r_out, ..
    } = s;
    // Fails in the graph on clean inputs, passes alone: fusion, or small input errors amplified. A fused
    // kernel's saturation is fusion too, and the unfused rerun settles both.
    if let Some(v) = vr {
        let alone = v
            .introduced
            .as_ref()
            .filter(|x| x.status == ValueStatus::Pass);
        let fused = v.variation.as_ref().is_some_and(|x| x.saturation.is_some());
        let open = out.is_empty()
            || fused
                && out
                    .iter()
                    .all(|k| k.kind == CauseKind::QuantizationSaturation);
        if let (true, true, Some(alone)) = (open, c.basis == Basis::Cumulative, alone) {
            out.push(cause(
                CauseKind::Fusion,
                format!(
                    "alone (fed with reference inputs) the node is within tolerance (max |t − r| {}), in the graph it is not ({}): ONNX Runtime may have fused it with its neighbours, or it amplifies errors its inputs carry within tolerance",
                    num(alone.metrics.max_abs),
                    num(v.metrics.as_ref().map(|m| m.max_abs).unwrap_or(0.0))
                ),
                &[("alone_max_abs", alone.metrics.max_abs)],
                Confidence::Low,
                "rerun with --ort-opt-level disable: if the drift goes away, a fused kernel is the cause".into(),
            ));
        }
    }

    let observed = r_out
        .as_ref()
        .map(max_abs)
        .filter(|m| *m > 0.0)
        .map(|m| c.max_abs / m);
    let unexplained = drop_unexplained(&mut out, observed);
    if out.is_empty() {
        out.push(fallback(
            c,
            &l,
            &keep,
            vr,
            r_out.as_ref(),
            (observed, unexplained),
        ));
    }
    out.sort_by_key(|c| c.confidence);
    out
}

/// Removes causes whose own bound (evidence `bound`, a relative error) is far below the `observed` relative error:
/// a cause must explain the magnitude it is blamed for. Returns what was removed, in words.
fn drop_unexplained(out: &mut Vec<Cause>, observed: Option<f64>) -> Vec<String> {
    let Some(obs) = observed else {
        return vec![];
    };
    let mut dropped = vec![];
    out.retain(|k| match k.evidence.get("bound") {
        Some(&b) if obs > 10.0 * b => {
            dropped.push(format!(
                "{} can lose at most {} relative, {}× less than observed",
                k.kind.name(),
                num(b),
                num(obs / b)
            ));
            false
        }
        _ => true,
    });
    dropped
}

/// The cause when no specific one explains the error: beyond rounding (a huge ratio), or the precision itself.
fn fallback(
    c: &Culprit,
    l: &Limits,
    keep: &str,
    vr: Option<&crate::report::model::ValueReport>,
    r_out: Option<&ArrayD<f64>>,
    (observed, unexplained): (Option<f64>, Vec<String>),
) -> Cause {
    // Alone out of tolerance where correctly rounding the f64 output is exact (no ratio): beyond rounding outright.
    let exact = c.basis == Basis::Introduced && c.noise_ratio.is_none();
    if let Some(r) = (c.noise_ratio)
        .or(exact.then_some(f64::INFINITY))
        .filter(|r| *r > crate::analysis::anomaly::ROUNDING_FACTOR)
    {
        let why = match unexplained.is_empty() {
            true => String::new(),
            false => format!(" ({})", unexplained.join("; ")),
        };
        let relative = observed.map(num).unwrap_or_else(|| "?".into());
        let summary = match r.is_finite() {
            true => format!(
                "the node's own error is {}× the error of correctly rounding its f64 output to {} ({relative} \
                 relative), far beyond what rounding explains",
                num(r),
                l.name
            ),
            false => format!(
                "the node's own error ({relative} relative) is all beyond rounding, its f64 output being exact in {}",
                l.name
            ),
        };
        return cause(
            CauseKind::BeyondRounding,
            format!("{summary}{why}: the kernel or the data differ"),
            &[("noise_ratio", r), ("observed_relative", observed.unwrap_or(f64::NAN))],
            Confidence::Medium,
            format!(
                "compare the node's weights and attributes in both models, and run `{}` alone on the execution \
                 provider to report its kernel",
                c.node
            ),
        );
    }
    let summary = match (c.basis, c.noise_ratio) {
        (Basis::Cumulative, None) => {
            "fails in the graph on clean inputs; the evidence phantom has (no per-node run) \
             names no specific cause: rerun with --attribution on to measure the node alone"
                .to_string()
        }
        (_, Some(r)) => format!(
            "the node's own {} computation is {}× the error of correctly rounding its f64 output",
            l.name,
            num(r)
        ),
        _ => {
            let m = r_out.map(max_abs).unwrap_or(0.0);
            let used = vr
                .and_then(|v| v.noise.as_ref())
                .map(|n| n.tolerance_used)
                .unwrap_or(f64::NAN);
            let beyond = match used.is_finite() {
                true => format!("{}× its tolerance", num(used)),
                false => "beyond its tolerance (none: integers must match exactly)".to_string(),
            };
            format!(
                "stored in {} (values up to {}, resolved to {} there), this value moves by up to {} even with exact \
                 arithmetic: {beyond}; the precision itself is too coarse here",
                l.name,
                num(m),
                num(spacing(m, *l)),
                num(c.max_abs),
            )
        }
    };
    cause(
        CauseKind::Precision,
        summary,
        &[("noise_ratio", c.noise_ratio.unwrap_or(f64::NAN))],
        Confidence::Low,
        keep.to_string(),
    )
}

#[cfg(test)]
mod bound_tests {
    #[test]
    fn a_cause_whose_bound_cannot_explain_the_error_is_dropped_and_said() {
        use crate::report::model::{CauseKind, Confidence};
        let mut out = vec![super::cause(
            CauseKind::LongReduction,
            "2304 terms".into(),
            &[("bound", 1.373e-4)],
            Confidence::Low,
            String::new(),
        )];
        let dropped = super::drop_unexplained(&mut out, Some(3.2e-2));
        assert!(out.is_empty());
        assert!(
            dropped[0].contains("long_reduction can lose at most 1.373e-4 relative, 233.1× less"),
            "{dropped:?}"
        );
        let mut kept = vec![super::cause(
            CauseKind::LongReduction,
            "2304 terms".into(),
            &[("bound", 1e-2)],
            Confidence::Low,
            String::new(),
        )];
        assert!(super::drop_unexplained(&mut kept, Some(3.2e-2)).is_empty());
        assert_eq!(kept.len(), 1);
    }
}
