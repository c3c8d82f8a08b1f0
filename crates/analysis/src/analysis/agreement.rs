//! Several targets against one f64 reference: each value compared between every pair of targets as it arrives,
//! then per node which target is closer to f64, and the first node where two targets disagree beyond tolerance —
//! with f64 as the arbiter of which one is wrong.

use std::collections::HashMap;

use crate::compare::{compare, Scaling, ToleranceSpec};
use crate::report::model::multi::{AgreeStatus, Agreement, Disagreement, NodeAgreement, PairValue};
use crate::report::model::{NodeRef, NodeReport, Report, ValueReport, ValueStatus};
use crate::tensor::Tensor;

/// How much further from f64 one target must be than another before phantom calls it the wrong (or the other the
/// closer) one.
pub const CLEAR_FACTOR: f64 = 2.0;

/// Compares one value between every pair of targets that produced it: `values` holds (label, value) per target;
/// `scaling` scales the tolerance as for the comparison with f64 ([`crate::compare::scales`]).
pub fn pairs(
    name: &str,
    values: &[(String, Option<&Tensor>)],
    tol: &ToleranceSpec,
    scaling: Scaling,
) -> Vec<PairValue> {
    let mut out = vec![];
    for (i, (la, a)) in values.iter().enumerate() {
        for (lb, b) in &values[i + 1..] {
            if let (Some(a), Some(b)) = (a, b) {
                out.push(pair(name, (la, a), (lb, b), tol, scaling));
            }
        }
    }
    out
}

fn pair(
    name: &str,
    (la, a): (&str, &Tensor),
    (lb, b): (&str, &Tensor),
    tol: &ToleranceSpec,
    scaling: Scaling,
) -> PairValue {
    let mut p = PairValue {
        value: name.to_string(),
        a: la.to_string(),
        b: lb.to_string(),
        status: ValueStatus::Unchecked,
        max_abs: None,
        tolerance_used: None,
        reason: None,
    };
    if a.shape() != b.shape() {
        p.status = ValueStatus::Fail;
        p.reason = Some(format!(
            "shape mismatch: {la} {:?}, {lb} {:?}",
            a.shape(),
            b.shape()
        ));
        return p;
    }
    if let Some(d) = crate::compare::strings::pair(a, b) {
        let (fails, reason) = crate::compare::strings::outcome(d, (la, lb));
        p.status = match fails {
            true => ValueStatus::Fail,
            false => ValueStatus::Pass,
        };
        p.reason = reason;
        return p;
    }
    // Two targets' values are judged in their own type: the precision a value comes from differs between lanes.
    let rule = tol.resolve(
        b.dtype(),
        Some(Scaling {
            source: None,
            ..scaling
        }),
    );
    let m = compare(&a.as_f64(), b, rule.tolerance, rule.operands).metrics;
    p.status = match m.failed {
        0 => ValueStatus::Pass,
        _ => ValueStatus::Fail,
    };
    p.max_abs = Some(m.max_abs);
    p.tolerance_used = Some(m.tolerance_used);
    p
}

/// The agreement of the targets' reports (same graph, same reference run) given every pair comparison.
pub fn agreement(reports: &[Report], pairs: &[PairValue]) -> Agreement {
    let labels: Vec<String> = reports.iter().map(|r| r.target.label.clone()).collect();
    let mut by_value: HashMap<&str, Vec<&PairValue>> = HashMap::new();
    for p in pairs {
        by_value.entry(p.value.as_str()).or_default().push(p);
    }
    let nodes: Vec<NodeAgreement> = match reports.first() {
        Some(first) => (0..first.nodes.len())
            .map(|i| node(reports, &labels, i, &by_value))
            .collect(),
        None => vec![],
    };
    let closer_nodes = labels
        .iter()
        .map(|l| {
            nodes
                .iter()
                .filter(|n| n.closer.as_ref() == Some(l))
                .count()
        })
        .collect();
    let first_disagreement = nodes
        .iter()
        .enumerate()
        .find(|(_, n)| n.pairs.iter().any(|p| p.status == ValueStatus::Fail))
        .map(|(i, n)| disagreement(reports, i, n));
    let status = match pairs.iter().any(|p| p.status == ValueStatus::Fail) {
        true => AgreeStatus::Disagree,
        false => AgreeStatus::Agree,
    };
    let conclusion = conclusion(&labels, status, first_disagreement.as_ref(), pairs);
    Agreement {
        labels,
        status,
        first_disagreement,
        closer_nodes,
        nodes,
        conclusion,
    }
}

/// Node `i` across targets.
fn node(
    reports: &[Report],
    labels: &[String],
    i: usize,
    by_value: &HashMap<&str, Vec<&PairValue>>,
) -> NodeAgreement {
    let per: Vec<&NodeReport> = reports.iter().map(|r| &r.nodes[i]).collect();
    let worst = |n: &NodeReport, f: fn(&ValueReport) -> Option<f64>| {
        n.values.iter().filter_map(f).reduce(f64::max)
    };
    let max_abs: Vec<Option<f64>> = per
        .iter()
        .map(|n| worst(n, |v| v.metrics.as_ref().map(|m| m.max_abs)))
        .collect();
    let closer = clearly_smallest(&max_abs);
    let mut worst_pairs: Vec<PairValue> = vec![];
    for v in &per[0].values {
        for p in by_value.get(v.name.as_str()).into_iter().flatten() {
            match worst_pairs.iter_mut().find(|w| w.a == p.a && w.b == p.b) {
                Some(w) if rank(p) > rank(w) => *w = (*p).clone(),
                Some(_) => {}
                None => worst_pairs.push((*p).clone()),
            }
        }
    }
    NodeAgreement {
        index: per[0].index,
        name: per[0].name.clone(),
        op_type: per[0].op_type.clone(),
        status: per.iter().map(|n| n.status).collect(),
        tolerance_used: per
            .iter()
            .map(|n| worst(n, |v| v.metrics.as_ref().map(|m| m.tolerance_used)))
            .collect(),
        closer: closer.map(|(k, _)| labels[k].clone()),
        closer_by: closer.map(|(_, by)| by),
        max_abs,
        pairs: worst_pairs,
    }
}

/// Failing pairs outrank passing ones, then by tolerance used.
fn rank(p: &PairValue) -> (bool, f64) {
    (
        p.status == ValueStatus::Fail,
        p.tolerance_used.unwrap_or(0.0),
    )
}

/// The index of the error at most 1/[`CLEAR_FACTOR`] of every other (all known, the largest above zero), and how
/// many times smaller it is than the next smallest.
fn clearly_smallest(errors: &[Option<f64>]) -> Option<(usize, f64)> {
    let known: Vec<f64> = errors.iter().copied().collect::<Option<_>>()?;
    if known.len() < 2 {
        return None;
    }
    let (k, &min) = known.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1))?;
    let clear = known
        .iter()
        .enumerate()
        .all(|(j, &e)| j == k || e >= CLEAR_FACTOR * min && e > 0.0);
    let next = known
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != k)
        .map(|(_, &e)| e)
        .fold(f64::INFINITY, f64::min);
    clear.then_some((k, next / min))
}

/// The first disagreement at node `i`: its worst failing pair, each side's error against f64, and the wrong one.
fn disagreement(reports: &[Report], i: usize, n: &NodeAgreement) -> Disagreement {
    let p = n
        .pairs
        .iter()
        .filter(|p| p.status == ValueStatus::Fail)
        .max_by(|x, y| rank(x).1.total_cmp(&rank(y).1))
        .expect("a failing pair");
    let report_of = |label: &str| reports.iter().find(|r| r.target.label == label);
    let error = |label: &str| {
        report_of(label)
            .and_then(|r| r.find_value(&p.value))
            .and_then(|(_, v)| v.metrics.as_ref().map(|m| m.max_abs))
    };
    let (a_error, b_error) = (error(&p.a), error(&p.b));
    let wrong = match clearly_smallest(&[a_error, b_error]) {
        Some((0, _)) => Some(p.b.clone()),
        Some(_) => Some(p.a.clone()),
        None => None,
    };
    let wrong_report = wrong.as_deref().and_then(report_of);
    let node = &reports[0].nodes[i];
    let value = node
        .values
        .iter()
        .find(|v| v.name == p.value)
        .expect("the pair's value");
    Disagreement {
        at: NodeRef::of(node, value),
        a: p.a.clone(),
        b: p.b.clone(),
        max_abs: p.max_abs.unwrap_or(f64::NAN),
        tolerance_used: p.tolerance_used.unwrap_or(f64::NAN),
        a_error,
        b_error,
        wrong_first_divergence: wrong_report.and_then(|r| r.verdict.first_divergence.clone()),
        wrong_culprits: wrong_report
            .map(|r| r.verdict.culprits.iter().take(3).map(culprit_ref).collect())
            .unwrap_or_default(),
        wrong,
    }
}

fn culprit_ref(c: &crate::report::model::Culprit) -> NodeRef {
    NodeRef {
        node_index: c.node_index,
        node: c.node.clone(),
        op_type: c.op_type.clone(),
        value: c.value.clone(),
    }
}

/// The answer in words, from the numbers above.
fn conclusion(
    labels: &[String],
    status: AgreeStatus,
    first: Option<&Disagreement>,
    pairs: &[PairValue],
) -> String {
    let Some(d) = first else {
        let n = pairs
            .iter()
            .filter(|p| p.status == ValueStatus::Pass)
            .count();
        return match status {
            AgreeStatus::Agree => format!(
                "{} agree within tolerance on all {n} value comparison(s) between them",
                labels.join(" and ")
            ),
            AgreeStatus::Disagree => {
                "the targets disagree, but on no value of a top-level node".into()
            }
        };
    };
    let err = |e: Option<f64>| e.map(crate::units::num).unwrap_or_else(|| "—".into());
    let mut s = format!(
        "{} and {} first disagree at node #{} {} `{}` (value `{}`): max |a − b| = {}, {}× tolerance; against f64, \
         {} is off by {} and {} by {}",
        d.a,
        d.b,
        d.at.node_index,
        d.at.op_type,
        d.at.node,
        d.at.value,
        crate::units::num(d.max_abs),
        crate::units::num(d.tolerance_used),
        d.a,
        err(d.a_error),
        d.b,
        err(d.b_error)
    );
    match (&d.wrong, &d.wrong_first_divergence) {
        (Some(w), Some(f)) => s.push_str(&format!(
            ". f64 sides with the other target: {w} is the one that goes wrong, and it first leaves f64's tolerance at \
             node #{} {} `{}` (value `{}`)",
            f.node_index, f.op_type, f.node, f.value
        )),
        (Some(w), None) => s.push_str(&format!(
            ". {w} is further from f64, though still within its tolerance against f64"
        )),
        (None, _) => s.push_str(". Both are about as far from f64: neither is clearly the right one here"),
    }
    s
}
