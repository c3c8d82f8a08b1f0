//! The verdict in one sentence: the headline of every rendering, with and without its class word.

use crate::report::model::{Coverage, Report, Status, Verdict};
use crate::units::num;

/// The verdict without its class word (for headlines that show the class as a badge).
pub fn verdict_sentence(r: &Report) -> String {
    let line = verdict_line(r);
    match line.split_once(": ") {
        Some((_, rest)) => rest.to_string(),
        None => line,
    }
}

/// The verdict in one sentence: the headline of every rendering (and the line `--quiet` prints).
pub fn verdict_line(r: &Report) -> String {
    let v = &r.verdict;
    let first = v
        .first_divergence
        .as_ref()
        .map(|f| {
            format!(
                "; first at {} (value `{}`)",
                at(f.node_index, &f.op_type, &f.node),
                f.value
            )
        })
        .unwrap_or_default();
    let culprit = v
        .culprits
        .first()
        .map(|c| {
            let kind = c
                .causes
                .first()
                .map(|x| x.kind.name())
                .unwrap_or("precision");
            format!("; culprit `{}` ({kind})", c.node)
        })
        .unwrap_or_default();
    let compared = r.coverage.compared;
    let sentence = match v.status {
        Status::Incomplete => format!(
            "incomplete: {} of {} values the outputs depend on were not compared ({}); the {compared} compared \
             values pass, but the run cannot vouch for the rest (--accept-incomplete to pass it)",
            r.coverage.unchecked_hiding,
            r.coverage.values,
            top_reason(&r.coverage)
        ),
        Status::Clean => format!("clean: all {compared} compared values within tolerance"),
        Status::Drift => format!(
            "drift: {} of {compared} values out of tolerance (final outputs {}){first}{culprit}",
            v.failing_values,
            if v.outputs_pass { "pass" } else { "fail" }
        ),
        Status::PrecisionLimited if v.failing_values == 0 => {
            let c = v.culprits.first().map(|c| at(c.node_index, &c.op_type, &c.node)).unwrap_or_default();
            format!(
                "precision-limited: all {compared} values within tolerance in this run, but {c} computed alone in \
                 the target's precision is out of tolerance, and so is the correctly rounded run"
            )
        }
        Status::PrecisionLimited => format!(
            "precision-limited: {} of {compared} values out of tolerance only where the target's precision cannot \
             meet it (the correctly rounded run fails there too){first}",
            v.failing_values
        ),
        Status::PrecisionInsufficient => format!(
            "precision-insufficient: {} of {compared} values out of tolerance, the final outputs among them, only \
             where the target's precision cannot meet it (the correctly rounded run fails there too){first}; the \
             runtime is faithful, the model does not survive this precision{}",
            v.failing_values,
            precision_hint(r)
        ),
        Status::Anomalous => anomalous_sentence(v, compared),
    };
    let sentence = match (v.status, r.coverage.unchecked_hiding) {
        (Status::Incomplete, _) | (_, 0) => sentence,
        (_, n) => format!(
            "{sentence}; {n} value(s) the outputs depend on not compared ({})",
            top_reason(&r.coverage)
        ),
    };
    format!("{sentence}{}", unchecked_outputs(r))
}

/// "; graph outputs not checked: `a`, `b`" where any is (never left to a percentage).
fn unchecked_outputs(r: &Report) -> String {
    let names: Vec<String> = (r.nodes.iter().flat_map(|n| n.values.iter()))
        .filter(|v| v.is_output && v.status == crate::report::model::ValueStatus::Unchecked)
        .map(|v| format!("`{}`", v.name))
        .collect();
    match names.is_empty() {
        true => String::new(),
        false => format!("; graph outputs not checked: {}", names.join(", ")),
    }
}

/// A node as the verdict names it: index, op type and name.
fn at(i: usize, op: &str, node: &str) -> String {
    format!("node #{i} {op} `{node}`")
}

/// The anomalous verdict: the first node adding error far beyond rounding, else the culprit failing alone.
fn anomalous_sentence(v: &Verdict, compared: usize) -> String {
    match (v.anomalies.first(), v.culprits.first()) {
        (Some(a), _) => {
            let within = match v.failing_values {
                0 => format!("all {compared} values within tolerance"),
                k => format!(
                    "{k} of {compared} values out of tolerance only where the target's precision cannot meet it"
                ),
            };
            let by = match a.noise_ratio {
                Some(k) => format!("{}× the correctly rounded run's RMS error", num(k)),
                None => format!("{}× correct rounding", num(a.rounding_ratio)),
            };
            format!(
                "anomalous: {within}, but {} node(s) introduce error far beyond rounding; first: {} ({by})",
                v.anomalies.len(),
                at(a.node_index, &a.op_type, &a.node),
            )
        }
        (None, Some(c)) => format!(
            "anomalous: all {compared} values within tolerance in the graph, but {} alone is out of tolerance",
            at(c.node_index, &c.op_type, &c.node)
        ),
        (None, None) => "anomalous".into(),
    }
}

/// The commonest reason values went unchecked, with its count when there are others.
fn top_reason(c: &Coverage) -> String {
    let hiding = c
        .unchecked_by_reason
        .iter()
        .filter(|(why, _)| crate::analysis::hides(why))
        .max_by_key(|(_, n)| **n);
    match hiding {
        Some((why, &n)) if n < c.unchecked_hiding => format!("{n} with {why}, and others"),
        Some((why, _)) => why.clone(),
        None => "reasons in the report".into(),
    }
}

/// `: keep `a`, `b` in float32 (--keep-fp32 a,b)` for the culprits of a precision-insufficient verdict.
fn keep_fp32_hint(v: &Verdict) -> String {
    let nodes: Vec<&str> = v.culprits.iter().map(|c| c.node.as_str()).take(5).collect();
    match nodes.is_empty() {
        true => String::new(),
        false => format!(
            "; keep the culprits in float32: --keep-fp32 {}",
            nodes.join(",")
        ),
    }
}

/// What to change where the precision falls short: `--keep-fp32` where phantom converted the model; where the
/// model's own `accuracy_level` is the cause, that attribute; otherwise the culprits' causes say.
fn precision_hint(r: &Report) -> String {
    let chosen = (r.verdict.culprits.iter().flat_map(|c| &c.causes))
        .any(|k| k.kind == crate::report::model::CauseKind::AccuracyLevel);
    match (r.conversion.is_some(), chosen) {
        (true, _) => keep_fp32_hint(&r.verdict),
        (false, true) => "; the model asks for int8 activations (accuracy_level 4): set accuracy_level to 0 or 1 \
                          where this error matters"
            .into(),
        (false, false) => String::new(),
    }
}
