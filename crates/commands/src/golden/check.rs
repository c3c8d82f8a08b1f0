//! Comparing a run against a golden record, value by value, with drift budgets (default, per op type, per node).

use std::collections::HashMap;

use serde::Serialize;

use super::{fingerprint, Golden, Provenance, ValueRecord};
use crate::tensor::Tensor;

/// Relative drift allowed per value: by node name, else by op type, else the default.
#[derive(Clone, Debug, Serialize)]
pub struct Budgets {
    pub default: f64,
    pub by_op: HashMap<String, f64>,
    pub by_node: HashMap<String, f64>,
}

impl Budgets {
    pub fn for_value(&self, node: &str, op: &str) -> f64 {
        self.by_node
            .get(node)
            .or_else(|| self.by_op.get(op))
            .copied()
            .unwrap_or(self.default)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Same bytes as recorded.
    Identical,
    /// Changed, within its budget.
    Within,
    /// Changed beyond its budget.
    Regressed,
    /// Recorded but not produced now.
    Missing,
}

#[derive(Clone, Debug, Serialize)]
pub struct ValueCheck {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
    pub status: CheckStatus,
    /// Largest change over the sampled elements and statistics, relative to max(|recorded|, recorded RMS).
    pub drift: f64,
    pub budget: f64,
    pub detail: Option<String>,
}

/// One environment fact that differs between the record and now.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    pub what: String,
    pub recorded: String,
    pub now: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    pub values: Vec<ValueCheck>,
    pub first_regressed: Option<ValueCheck>,
    pub identical: usize,
    pub within: usize,
    pub regressed: usize,
    pub missing: usize,
    pub environment_changes: Vec<Change>,
}

fn drift(old: &ValueRecord, now: &ValueRecord) -> (f64, Option<String>) {
    if old.dtype != now.dtype || old.shape != now.shape {
        let why = format!(
            "was {} {:?}, now {} {:?}",
            old.dtype, old.shape, now.dtype, now.shape
        );
        return (f64::INFINITY, Some(why));
    }
    let rms = (old.std * old.std + old.mean * old.mean).sqrt();
    let rel = |a: f64, b: f64| {
        if a == b || (a.is_nan() && b.is_nan()) {
            0.0
        } else {
            (a - b).abs() / a.abs().max(rms).max(f64::MIN_POSITIVE)
        }
    };
    let mut d = 0.0f64;
    for ((_, a), (_, b)) in old.sample.iter().zip(&now.sample) {
        d = d.max(rel(*a, *b));
    }
    for (a, b) in [
        (old.mean, now.mean),
        (old.std, now.std),
        (old.min, now.min),
        (old.max, now.max),
    ] {
        d = d.max(rel(a, b));
    }
    for (a, b) in old.quantiles.iter().zip(&now.quantiles) {
        d = d.max(rel(*a, *b));
    }
    if d.is_nan() {
        d = f64::INFINITY;
    }
    (d, None)
}

/// Environment facts that changed.
pub fn environment_changes(old: &Provenance, now: &Provenance) -> Vec<Change> {
    let o = serde_json::to_value(old).expect("serializes");
    let n = serde_json::to_value(now).expect("serializes");
    let (o, n) = (
        o.as_object().expect("object"),
        n.as_object().expect("object"),
    );
    o.iter()
        .filter(|(k, v)| n.get(*k) != Some(*v))
        .map(|(k, v)| Change {
            what: k.clone(),
            recorded: v.as_str().unwrap_or_default().to_string(),
            now: n
                .get(k)
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_string(),
        })
        .collect()
}

/// Checks the current values (by ONNX name) against the record.
pub fn check(
    golden: &Golden,
    current: &HashMap<String, Tensor>,
    now: &Provenance,
    budgets: &Budgets,
) -> CheckReport {
    let mut values = Vec::with_capacity(golden.values.len());
    for rec in &golden.values {
        let budget = budgets.for_value(&rec.node, &rec.op_type);
        let mut v = ValueCheck {
            node_index: rec.node_index,
            node: rec.node.clone(),
            op_type: rec.op_type.clone(),
            value: rec.value.clone(),
            status: CheckStatus::Missing,
            drift: 0.0,
            budget,
            detail: None,
        };
        if let Some(t) = current.get(&rec.value) {
            let fp = fingerprint(rec.node_index, &rec.node, &rec.op_type, &rec.value, t);
            if fp.hash == rec.hash {
                v.status = CheckStatus::Identical;
            } else {
                let (d, detail) = drift(rec, &fp);
                v.drift = d;
                v.detail = detail;
                v.status = if d <= budget {
                    CheckStatus::Within
                } else {
                    CheckStatus::Regressed
                };
            }
        } else {
            v.detail = Some("the current run does not produce this value".into());
        }
        values.push(v);
    }
    values.sort_by_key(|v| v.node_index);
    let count = |s: CheckStatus| values.iter().filter(|v| v.status == s).count();
    CheckReport {
        first_regressed: values
            .iter()
            .find(|v| v.status == CheckStatus::Regressed)
            .cloned(),
        identical: count(CheckStatus::Identical),
        within: count(CheckStatus::Within),
        regressed: count(CheckStatus::Regressed),
        missing: count(CheckStatus::Missing),
        environment_changes: environment_changes(&golden.provenance, now),
        values,
    }
}
