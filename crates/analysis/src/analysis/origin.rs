//! Where an amplified error starts. A culprit that fails in the graph while it passes alone (fed with reference
//! inputs) amplifies an error its inputs carry within tolerance: a cancellation, a recurrent cell, a normalization
//! over a tiny variance. That error was born upstream. Walking back from the culprit through the input that uses
//! the most of its tolerance, to the first node whose own error (alone) is at least half the error its value
//! carries in the graph, finds where: its **origin**.
//!
//! Every amplifier with an origin gets an `inherited` cause naming it, with its numbers. The origin itself is
//! blamed (a culprit of basis `origin`) only when the numbers say the failure needs it: the ideal run (every value
//! correctly rounded) keeps the amplifier within tolerance, and the origin's own error is beyond [`NOISE_FACTOR`]×
//! correct rounding and [`NOISE_FACTOR`]× what the ideal run carries at its value (which saw its inputs rounded),
//! so with its kernel rounding correctly the amplifier would receive a fraction of what it fails on. An origin within
//! those factors is the target's precision itself, and the cause says so.

use std::collections::HashMap;

use super::attribution::NOISE_FACTOR;
use crate::model::Graph;
use crate::report::model::{
    Basis, Cause, CauseKind, Confidence, Culprit, NodeReport, ValueReport, ValueStatus,
};
use crate::units::num;

/// The node where the error an amplifier fails on starts.
#[derive(Clone, Debug)]
pub struct Origin {
    pub node_index: usize,
    /// Its value the error leaves by.
    pub value: String,
    /// Its own error (alone, fed with reference inputs).
    pub own: f64,
    /// The error its value carries in the graph.
    pub carried: f64,
    /// Its own error over that of correct rounding.
    pub ratio: Option<f64>,
    /// Its own error was not measured (the node did not run alone): the error only jumps there, its inputs
    /// carrying less than half of the share of their tolerance its value uses.
    pub unmeasured: bool,
    /// Node names from the origin to the amplifier.
    pub path: Vec<String>,
}

type Values<'n> = HashMap<&'n str, (&'n NodeReport, &'n ValueReport)>;

/// The origin of the error culprit `c` amplifies, when `c` fails in the graph while passing alone and each step
/// back was measured (a node that did not run alone ends the walk where the error jumps at its value). A node whose
/// own error reaches half of what its value carries at its largest but not in RMS (rounding at a few elements, while
/// a shift everywhere comes from further up) is taken only when no node further up reaches half of both and half of
/// the RMS error that node carries.
pub fn trace(nodes: &[NodeReport], values: &Values, c: &Culprit) -> Option<Origin> {
    let at = |i: usize| nodes.iter().find(|n| n.index == i);
    let amplifier = at(c.node_index)?;
    let alone = amplifier.values.iter().find(|v| v.name == c.value)?;
    if c.basis != Basis::Cumulative || alone.introduced.as_ref()?.status != ValueStatus::Pass {
        return None;
    }
    let mut path = vec![amplifier.name.clone()];
    let mut n = amplifier;
    let mut largest_only: Option<Origin> = None;
    // The RMS error the node that reaches half only at its largest carries: one further up must explain half of it.
    let mut shift = 0.0;
    for _ in 0..nodes.len() {
        let Some((producer, v)) = most_used_input(n, values) else {
            return largest_only;
        };
        path.push(producer.name.clone());
        let Some(m) = v.metrics.as_ref() else {
            return largest_only;
        };
        let carried = m.max_abs;
        let (own, own_rms, ratio, unmeasured) = match &v.introduced {
            Some(own) => (own.metrics.max_abs, own.metrics.rmse, own.ratio, false),
            // Past a node that reaches half at its largest, only a measured node may take its place.
            None if largest_only.is_none() && jumps(producer, v, values) => {
                (f64::NAN, f64::NAN, None, true)
            }
            None => return largest_only,
        };
        let origin = |path: &[String]| Origin {
            node_index: producer.index,
            value: v.name.clone(),
            own,
            carried,
            ratio,
            unmeasured,
            path: path.iter().rev().cloned().collect(),
        };
        let rms = own_rms >= m.rmse.max(shift) / 2.0;
        if unmeasured || (own >= carried / 2.0 && rms) {
            return Some(origin(&path));
        }
        if own >= carried / 2.0 && largest_only.is_none() {
            largest_only = Some(origin(&path));
            shift = m.rmse;
        }
        n = producer;
    }
    largest_only
}

/// Whether value `v` of node `n` uses more than twice the share of its tolerance any of its inputs does: the error
/// is born (or amplified) there, which only its own run could tell apart.
fn jumps(n: &NodeReport, v: &ValueReport, values: &Values) -> bool {
    let used = |v: &ValueReport| v.metrics.as_ref().map_or(0.0, |m| m.tolerance_used);
    let inputs = (n.inputs.iter())
        .filter_map(|i| values.get(i.as_str()))
        .map(|(_, v)| used(v))
        .fold(0.0, f64::max);
    used(v) > 2.0 * inputs
}

/// The input of `n` that uses the most of its tolerance in the graph (a compared value that carries some error;
/// one out of tolerance too, whose error may also have been born further up), and its producer.
fn most_used_input<'n>(
    n: &NodeReport,
    values: &Values<'n>,
) -> Option<(&'n NodeReport, &'n ValueReport)> {
    (n.inputs.iter())
        .filter_map(|i| values.get(i.as_str()).copied())
        .filter_map(|(p, v)| Some((p, v, v.metrics.as_ref()?.tolerance_used)))
        .filter(|(_, _, used)| *used > 0.0)
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(p, v, _)| (p, v))
}

/// Adds an `inherited` cause to each culprit that amplifies an error born upstream, and the origins the numbers
/// blame as culprits of basis `origin` (each once, in topological order among the others). `differs` tells whether
/// the target's own model (`--target-model`) computes a value otherwise than the reference's: an origin whose own
/// error was not measured is blamed on that evidence only.
pub fn blame(
    graph: &Graph,
    nodes: &[NodeReport],
    culprits: &mut Vec<Culprit>,
    differs: &dyn Fn(&str) -> bool,
) {
    let values: Values = (nodes.iter())
        .flat_map(|n| n.values.iter().map(move |v| (v.name.as_str(), (n, v))))
        .collect();
    let mut blamed: Vec<Culprit> = vec![];
    for c in culprits.iter_mut() {
        let Some(o) = trace(nodes, &values, c) else {
            continue;
        };
        let ideal = (values.get(c.value.as_str()))
            .and_then(|(_, v)| v.noise.as_ref())
            .map(|n| n.tolerance_used)
            .filter(|u| *u <= 1.0);
        let beyond = match o.unmeasured {
            false => {
                o.ratio.is_some_and(|r| r > NOISE_FACTOR)
                    && values
                        .get(o.value.as_str())
                        .is_none_or(|(_, v)| beyond_ideal(v))
            }
            true => differs(&o.value),
        };
        let needed = ideal.filter(|_| beyond);
        let origin = &graph.nodes[o.node_index];
        c.causes.push(inherited(&o, origin, needed));
        c.causes.sort_by_key(|k| k.confidence);
        let known = |k: &Culprit| k.node_index == o.node_index;
        if let (Some(ideal), false) = (needed, blamed.iter().any(known)) {
            blamed.push(culprit(graph, nodes, &o, c, ideal));
        }
    }
    blamed.retain(|b| !culprits.iter().any(|c| c.node_index == b.node_index));
    culprits.extend(blamed);
    culprits.sort_by_key(|c| c.node_index);
}

/// Whether a node's own error (alone) exceeds [`NOISE_FACTOR`]× what the correctly rounded run carries at its value,
/// at the largest or in RMS. That run rounds the node's inputs as the node alone receives them, so an error within
/// it may be its inputs' rounding, not its kernel (fp16's `Cos` of an angle rounded to fp16 is far from the correctly
/// rounded cosine of the exact angle). Without that run's figures, correct rounding alone decides.
fn beyond_ideal(v: &ValueReport) -> bool {
    match (&v.introduced, &v.noise) {
        (Some(i), Some(n)) => {
            i.metrics.max_abs > NOISE_FACTOR * n.max_abs || i.metrics.rmse > NOISE_FACTOR * n.rms
        }
        _ => true,
    }
}

/// What the origin's own error is, in words: measured alone, or only seen as a jump in the graph.
fn own_error(o: &Origin) -> String {
    match o.unmeasured {
        false => format!(
            "alone, fed with reference inputs, that node is off by {} ({}× correct rounding), {:.0}% of the {} its \
             value `{}` carries in the graph",
            num(o.own),
            num(o.ratio.unwrap_or(f64::NAN)),
            100.0 * (o.own / o.carried).min(1.0),
            num(o.carried),
            o.value
        ),
        true => format!(
            "its value `{}` carries {} in the graph, more than twice the share of their tolerance its inputs use \
             (it did not run alone: its own error is not measured)",
            o.value,
            num(o.carried)
        ),
    }
}

/// The amplifier's cause: where what it amplifies starts, and whether that is beyond rounding (`needed`: the
/// share of its tolerance the ideal run uses, when the origin is blamed).
fn inherited(o: &Origin, origin: &crate::model::Node, needed: Option<f64>) -> Cause {
    let verdict = match (needed, o.unmeasured) {
        (Some(ideal), false) => format!(
            "beyond rounding; the ideal run (every value correctly rounded) keeps this node at {}× its tolerance",
            num(ideal)
        ),
        (Some(ideal), true) => format!(
            "the target's model computes that value otherwise than the reference's; the ideal run (every value \
             correctly rounded) keeps this node at {}× its tolerance",
            num(ideal)
        ),
        (None, false) => {
            "within what rounding to the target's precision makes: the precision itself".into()
        }
        (None, true) => "nothing more is known of it".into(),
    };
    Cause {
        kind: CauseKind::Inherited,
        summary: format!(
            "the error it amplifies starts at {} `{}` (node #{}): {} — {verdict}; path {}",
            origin.op_type,
            origin.name,
            o.node_index,
            own_error(o),
            short(&o.path)
        ),
        evidence: [
            ("origin_max_abs".to_string(), o.own),
            ("origin_noise_ratio".to_string(), o.ratio.unwrap_or(f64::NAN)),
            ("origin_carried_max_abs".to_string(), o.carried),
            ("ideal_tolerance_used".to_string(), needed.unwrap_or(f64::NAN)),
        ]
        .into(),
        confidence: match (needed, o.unmeasured) {
            (Some(_), _) => Confidence::High,
            (None, false) => Confidence::Medium,
            (None, true) => Confidence::Low,
        },
        fix: match needed {
            Some(_) => format!(
                "check `{}`'s kernel and data on the target (weights, attributes, its execution provider): its \
                 own error is what this node amplifies",
                origin.name
            ),
            None => "raise the precision of the path from the origin to this node (--keep-fp32 on its nodes)"
                .into(),
        },
        nodes: vec![origin.name.clone()],
    }
}

/// A path of nodes, its middle elided past eight.
fn short(path: &[String]) -> String {
    match path.len() {
        0..=8 => path.join(" → "),
        n => format!(
            "{} → … ({} more) … → {}",
            path[..3].join(" → "),
            n - 6,
            path[n - 3..].join(" → ")
        ),
    }
}

/// The origin as a culprit of basis `origin`, for amplifier `c`, whose ideal run uses `ideal` of its tolerance.
fn culprit(graph: &Graph, nodes: &[NodeReport], o: &Origin, c: &Culprit, ideal: f64) -> Culprit {
    let n = &graph.nodes[o.node_index];
    let (spoils, path) = super::culprit::downstream(graph, nodes, o.node_index);
    let (kind, what) = match o.unmeasured {
        false => (CauseKind::BeyondRounding, "the kernel or the data differ"),
        true => (
            CauseKind::NodeDiffers,
            "the target's model computes this value otherwise than the reference's",
        ),
    };
    Culprit {
        node_index: o.node_index,
        node: n.name.clone(),
        op_type: n.op_type.clone(),
        value: o.value.clone(),
        basis: Basis::Origin,
        max_abs: if o.unmeasured { o.carried } else { o.own },
        noise_ratio: o.ratio,
        causes: vec![Cause {
            kind,
            summary: format!(
                "within tolerance itself, but {} `{}` (node #{}) amplifies the error that starts here past its \
                 tolerance (max |t − r| {}), where the ideal run (every value correctly rounded) stays at {}× its \
                 tolerance; {}: {what}",
                c.op_type,
                c.node,
                c.node_index,
                num(c.max_abs),
                num(ideal),
                own_error(o).replacen("that node is", "it is", 1)
            ),
            evidence: [
                ("noise_ratio".to_string(), o.ratio.unwrap_or(f64::NAN)),
                ("amplified_max_abs".to_string(), c.max_abs),
                ("ideal_tolerance_used".to_string(), ideal),
            ]
            .into(),
            confidence: Confidence::Medium,
            fix: format!(
                "compare `{}`'s weights and attributes in both models, and run it alone on the execution provider \
                 to report its kernel",
                n.name
            ),
            nodes: vec![c.node.clone()],
        }],
        spoils,
        path,
    }
}

#[cfg(test)]
mod tests {
    use crate::analysis::attribution::tests::{failing, noise};
    use crate::compare::Metrics;
    use crate::report::model::{Introduced, ValueStatus};

    /// fp16's `Cos` of an angle rounded to fp16, alone, is far from the correctly rounded cosine of the exact angle;
    /// the correctly rounded run rounds that angle too and carries the same error there. A bias fault carries 21×
    /// that run's RMS error.
    #[test]
    fn an_origin_within_what_the_correctly_rounded_run_carries_is_the_precision() {
        let alone = |max_abs: f64, rmse: f64| Introduced {
            status: ValueStatus::Pass,
            metrics: Metrics {
                max_abs,
                rmse,
                ..Default::default()
            },
            expected: max_abs / 60.0,
            ratio: Some(60.0),
        };
        let mut cos = failing(0.0146);
        cos.introduced = Some(alone(0.0146, 0.004));
        cos.noise = Some(noise(0.0146, 0.5));
        assert!(!super::beyond_ideal(&cos));
        let mut conv = failing(0.0068);
        conv.introduced = Some(alone(0.0070, 0.00638));
        conv.noise = Some(crate::report::model::Noise {
            rms: 0.000305,
            ..noise(0.00198, 0.27)
        });
        assert!(super::beyond_ideal(&conv));
        // Without the correctly rounded run's figures, correct rounding alone decides.
        conv.noise = None;
        assert!(super::beyond_ideal(&conv));
    }
}
