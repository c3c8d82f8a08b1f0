//! The scan in the terminal: the nodes at risk with their causes, the values closest to the low precision's
//! limits (with a text histogram of their magnitudes, for headless machines), and the initializers to look at.

use std::fmt::Write as _;

use super::stats::{HIST_HIGH, HIST_LOW};
use super::{Scan, ValueScan};
use crate::report::explorer::{kind_name, Datum, Overlay};
use crate::report::model::Confidence;
use crate::units::num;
use std::collections::BTreeMap;

/// The scan as text; `top` bounds each list.
pub fn terminal(s: &Scan, top: usize) -> String {
    let mut o = String::new();
    let name = precision_name(s);
    let _ = writeln!(
        o,
        "phantom scan {} for {name}: {} values, {} float initializers",
        s.model,
        s.values.len(),
        s.initializers.len()
    );
    for i in &s.inputs {
        let shape: Vec<String> = i.shape.iter().map(|d| d.to_string()).collect();
        let _ = writeln!(
            o,
            "input {} {} {} · {}",
            i.name,
            i.dtype,
            shape.join("x"),
            i.origin
        );
    }
    let _ = writeln!(o);
    match s.risks.len() {
        0 => {
            let _ = writeln!(o, "no node at risk in {name} from the reference's values");
        }
        n => {
            let count = |c: Confidence| {
                s.risks
                    .iter()
                    .filter(|r| r.causes[0].confidence == c)
                    .count()
            };
            let _ = writeln!(
                o,
                "{n} node(s) at risk in {name} ({} high, {} medium, {} low confidence), most at risk first:",
                count(Confidence::High),
                count(Confidence::Medium),
                count(Confidence::Low)
            );
        }
    }
    for (k, r) in s.risks.iter().take(top).enumerate() {
        let _ = writeln!(
            o,
            "  #{} {} `{}` → `{}`",
            r.node_index, r.op_type, r.node, r.value
        );
        for c in &r.causes {
            let _ = writeln!(
                o,
                "    {} ({}): {}",
                c.kind.name(),
                c.confidence.name(),
                c.summary
            );
        }
        // Magnitudes of the three most at risk, where a terminal is all there is.
        if let Some(v) = s
            .values
            .iter()
            .find(|v| v.value == r.value)
            .filter(|_| k < 3)
        {
            o.push_str(&histogram(v));
        }
    }
    o.push_str(&closest(s, top));
    o.push_str(&weights(s, top));
    for n in &s.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}

fn precision_name(s: &Scan) -> &'static str {
    match s.precision {
        crate::precision::LowPrecision::F16 => "fp16",
        crate::precision::LowPrecision::Bf16 => "bf16",
    }
}

/// The values with the least fp16 headroom, and NaN/Inf or dead channels wherever they are.
fn closest(s: &Scan, top: usize) -> String {
    let mut o = String::new();
    let mut by_headroom: Vec<&ValueScan> = s
        .values
        .iter()
        .filter(|v| v.fp16_headroom.is_some())
        .collect();
    by_headroom.sort_by(|a, b| {
        a.fp16_headroom
            .unwrap_or(0.0)
            .total_cmp(&b.fp16_headroom.unwrap_or(0.0))
    });
    let _ = writeln!(o, "\nleast fp16 headroom (65504 / max |x|):");
    for v in by_headroom.iter().take(top) {
        let _ = writeln!(
            o,
            "  #{} {} `{}`: max |x| {}, headroom {}×, {}% of non-zeros below fp16's smallest normal",
            v.node_index,
            v.op_type,
            v.node,
            num(v.max_abs),
            num(v.fp16_headroom.unwrap_or(0.0)),
            num(100.0 * v.fp16_subnormal)
        );
    }
    for v in s.values.iter().filter(|v| v.nan + v.inf > 0) {
        let _ = writeln!(
            o,
            "  NaN/Inf in f64 already: `{}` ({} NaN, {} Inf)",
            v.value, v.nan, v.inf
        );
    }
    for v in &s.values {
        if let Some((dead, c)) = v.dead_channels.filter(|(d, _)| *d > 0) {
            let _ = writeln!(
                o,
                "  dead channels: `{}` has {dead} of {c} channels all zero",
                v.value
            );
        }
    }
    o
}

/// Initializers the precision cannot hold, then the largest outlier ratios.
fn weights(s: &Scan, top: usize) -> String {
    let mut o = String::new();
    for i in s.initializers.iter().filter(|i| !i.issues.is_empty()) {
        for r in &i.issues {
            let _ = writeln!(
                o,
                "  initializer `{}`: {} of {} values {:?} (extreme {})",
                i.name,
                r.count,
                r.elements,
                r.kind,
                num(r.extreme)
            );
        }
    }
    let mut by_outliers: Vec<_> = s.initializers.iter().filter(|i| i.elements > 16).collect();
    by_outliers.sort_by(|a, b| b.outlier_ratio.total_cmp(&a.outlier_ratio));
    let _ = writeln!(o, "\nweights with the largest outliers (max |w| / RMS):");
    for i in by_outliers.iter().take(top.min(5)) {
        let spread = i
            .channel_spread
            .map(|c| format!(", one output channel {}× the median channel", num(c)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  `{}` ({} values): max |w| {}, RMS {}, ratio {}{spread}",
            i.name,
            i.elements,
            num(i.max_abs),
            num(i.rms),
            num(i.outlier_ratio)
        );
    }
    o
}

/// A text histogram of |x| by power of two (non-empty buckets only).
fn histogram(v: &ValueScan) -> String {
    let mut o = String::new();
    let peak = v.histogram.iter().copied().max().unwrap_or(0).max(1);
    for (k, &count) in v.histogram.iter().enumerate().filter(|(_, c)| **c > 0) {
        let label = match k {
            0 => "0".to_string(),
            k if k == v.histogram.len() - 1 => format!("≥2^{HIST_HIGH}"),
            k => format!("2^{}", k as i32 - HIST_LOW - 1),
        };
        let bar = "█".repeat(((count as f64 / peak as f64) * 30.0).ceil() as usize);
        let _ = writeln!(o, "      {label:>7} {bar} {count}");
    }
    o
}

/// A scan's overlays: fp16 headroom (65504 / max |x|, smallest over a node's values) and the nodes at risk with
/// their causes and rank.
pub fn overlays(s: &Scan) -> Vec<Overlay> {
    // Per node (by name): the value it is found by, and its smallest headroom.
    let mut headroom: BTreeMap<&str, (&str, f64)> = BTreeMap::new();
    for v in &s.values {
        if let Some(h) = v.fp16_headroom {
            let e = headroom
                .entry(v.node.as_str())
                .or_insert((v.value.as_str(), h));
            e.1 = e.1.min(h);
        }
    }
    let risks = s
        .risks
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let kinds: Vec<String> = r.causes.iter().map(|c| kind_name(&c.kind)).collect();
            let colour = if i < 3 { "#e53935" } else { "#ffab91" };
            (
                r.value.clone(),
                Datum::Text(format!("#{} {}", i + 1, kinds.join(", "))),
                Some(colour),
            )
        })
        .collect();
    vec![
        Overlay {
            file: "phantom_fp16_headroom.json".into(),
            values: headroom
                .into_values()
                .map(|(v, h)| (v.to_string(), Datum::Number(h), None))
                .collect(),
            thresholds: vec![
                (1.0, "#e53935"),
                (10.0, "#ffab91"),
                (100.0, "#fff59d"),
                (f64::MAX, "#c8e6c9"),
            ],
            gradient: vec![],
        },
        Overlay {
            file: "phantom_risk.json".into(),
            values: risks,
            thresholds: vec![],
            gradient: vec![],
        },
    ]
}
