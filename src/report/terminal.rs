//! Terminal summary: verdict, first divergent node with its metrics and activation statistics, worst nodes,
//! coverage. Colour only on a terminal and never with `NO_COLOR`.

use std::fmt::Write as _;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use owo_colors::{OwoColorize, Stream::Stdout};

use super::model::{RefPrecision, Report, Status, TargetFacts, ValueReport};

/// Error figures with the four significant digits that carry meaning: `1173`, `9.847`, `0.001235`, `3.142e-7`.
pub fn num(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else if x.is_nan() {
        "nan".into()
    } else if (1e-3..1e4).contains(&x.abs()) {
        let decimals = (3 - x.abs().log10().floor() as i32).max(0) as usize;
        let s = format!("{x:.decimals$}");
        match s.contains('.') {
            true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
            false => s,
        }
    } else {
        format!("{x:.3e}")
    }
}

fn ulp(u: u64) -> String {
    if u == u64::MAX {
        "nan/inf".into()
    } else {
        u.to_string()
    }
}

fn precision_tag(p: &RefPrecision) -> Option<String> {
    match p {
        RefPrecision::F64 => None,
        RefPrecision::F64Phantom => Some("ref: phantom f64 kernel".into()),
        RefPrecision::Reduced { reason } => Some(format!("reduced-precision reference: {reason}")),
        RefPrecision::Unavailable { reason } => Some(format!("reference unavailable: {reason}")),
    }
}

fn metrics_table(v: &ValueReport) -> Option<Table> {
    let m = v.metrics.as_ref()?;
    let tol = v.tolerance?;
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["metric", "value", "tolerance"]);
    let rows: Vec<(&str, String, String)> = vec![
        (
            "max abs",
            num(m.max_abs),
            format!(
                "atol {} + rtol {}·max(|ref|, rms {})",
                num(tol.atol),
                num(tol.rtol),
                num(m.scale)
            ),
        ),
        ("mean abs", num(m.mean_abs), String::new()),
        (
            "max rel",
            num(m.max_rel),
            format!("floor |ref| ≥ {}", num(tol.atol)),
        ),
        ("rmse", num(m.rmse), String::new()),
        ("cosine", format!("{:.9}", m.cosine), String::new()),
        (
            "snr dB",
            m.snr_db
                .map(|s| format!("{s:.1}"))
                .unwrap_or_else(|| "∞ (identical)".into()),
            String::new(),
        ),
        (
            "max ulp",
            ulp(m.max_ulp),
            format!("in {}", v.target_dtype.map(|d| d.name()).unwrap_or("?")),
        ),
        (
            "out of tol",
            format!(
                "{} of {} ({:.3}%)",
                m.failed,
                m.elements,
                100.0 * m.fail_fraction
            ),
            "0".into(),
        ),
        (
            "nan/inf mismatch",
            m.nonfinite_mismatch.to_string(),
            "0".into(),
        ),
    ];
    for (k, v, tol) in rows {
        t.add_row(vec![
            Cell::new(k),
            Cell::new(v).set_alignment(CellAlignment::Right),
            Cell::new(tol),
        ]);
    }
    Some(t)
}

fn stats_table(v: &ValueReport) -> Option<Table> {
    let (r, g) = (v.reference_stats.as_ref()?, v.target_stats.as_ref()?);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "", "min", "max", "mean", "std", "% zero", "% inf", "% nan",
    ]);
    for (label, s) in [("reference f64", r), ("target", g)] {
        t.add_row(vec![
            label.to_string(),
            num(s.min),
            num(s.max),
            num(s.mean),
            num(s.std),
            format!("{:.2}", s.pct_zero),
            format!("{:.2}", s.pct_inf),
            format!("{:.2}", s.pct_nan),
        ]);
    }
    Some(t)
}

/// The full terminal summary.
pub fn render(r: &Report, top: usize) -> String {
    let mut s = String::new();
    let opset = r
        .model
        .opsets
        .get("ai.onnx")
        .map(|v| format!(", opset {v}"))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "{} {} (sha256 {}…, {} nodes{opset})",
        "phantom".if_supports_color(Stdout, |t| t.bold()),
        r.model.path,
        &r.model.sha256[..12.min(r.model.sha256.len())],
        r.model.nodes
    );
    if let Some(t) = &r.target_model {
        let _ = writeln!(
            s,
            "target model  {} (sha256 {}…)",
            t.path,
            &t.sha256[..12.min(t.sha256.len())]
        );
    }
    let _ = writeln!(
        s,
        "reference     {} {}",
        r.reference.name, r.reference.version
    );
    s.push_str(&target_lines(r));
    for i in &r.inputs {
        let shape = i
            .shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("x");
        let _ = writeln!(
            s,
            "input         {} {} {} · {}",
            i.name, i.dtype, shape, i.origin
        );
        for d in &i.dims_from {
            let _ = writeln!(s, "                dim {d}");
        }
    }
    let _ = writeln!(s);
    let v = &r.verdict;
    let badge = match v.status {
        Status::Clean => "✓ CLEAN"
            .if_supports_color(Stdout, |t| t.green().bold().to_string())
            .to_string(),
        Status::PrecisionLimited => "~ PRECISION-LIMITED"
            .if_supports_color(Stdout, |t| t.yellow().bold().to_string())
            .to_string(),
        Status::PrecisionInsufficient => "✗ PRECISION-INSUFFICIENT"
            .if_supports_color(Stdout, |t| t.red().bold().to_string())
            .to_string(),
        Status::Anomalous => "✗ ANOMALOUS"
            .if_supports_color(Stdout, |t| t.magenta().bold().to_string())
            .to_string(),
        Status::Drift => "✗ DRIFT"
            .if_supports_color(Stdout, |t| t.red().bold().to_string())
            .to_string(),
        Status::Incomplete => "✗ INCOMPLETE"
            .if_supports_color(Stdout, |t| t.yellow().bold().to_string())
            .to_string(),
    };
    let _ = writeln!(s, "{badge}  {}", verdict_sentence(r));
    s.push_str(&sample_lines(r));
    if let Some(f) = &v.first_divergence {
        let _ = writeln!(
            s,
            "first divergence: node #{} {} `{}` → value `{}`",
            f.node_index, f.op_type, f.node, f.value
        );
        if let Some(k) = r.find_value(&f.value).and_then(|(_, v)| v.sample) {
            let _ = writeln!(s, "  (figures from input sample {k}, the worst here)");
        }
        if let Some((n, val)) = r.find_value(&f.value) {
            if let Some(tag) = precision_tag(&n.reference) {
                let _ = writeln!(s, "  ({tag})");
            }
            if let Some(reason) = &val.reason {
                let _ = writeln!(s, "  {reason}");
            }
            if let Some(w) = &val.worst {
                let _ = writeln!(
                    s,
                    "  worst element {:?}: reference {} target {}",
                    w.index,
                    num(w.reference),
                    num(w.target)
                );
            }
            if let Some(t) = metrics_table(val) {
                let _ = writeln!(s, "{t}");
            }
            if let Some(t) = stats_table(val) {
                let _ = writeln!(s, "{t}");
            }
        }
    }
    s.push_str(&super::culprits::render(r));
    if !v.worst.is_empty() {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(vec![
            "#",
            "op",
            "node",
            "value",
            "max abs",
            "max rel",
            "out of tol",
            "max ulp",
        ]);
        for w in v.worst.iter().take(top) {
            let m = r.find_value(&w.value).and_then(|(_, v)| v.metrics.clone());
            let (a, rel, frac, u) = match m {
                Some(m) => (
                    num(m.max_abs),
                    num(m.max_rel),
                    format!("{:.2}%", 100.0 * m.fail_fraction),
                    ulp(m.max_ulp),
                ),
                None => ("-".into(), "-".into(), "shape".into(), "-".into()),
            };
            t.add_row(vec![
                w.node_index.to_string(),
                w.op_type.clone(),
                w.node.clone(),
                w.value.clone(),
                a,
                rel,
                frac,
                u,
            ]);
        }
        let _ = writeln!(s, "worst values:\n{t}");
    }
    let c = &r.coverage;
    let _ = write!(
        s,
        "coverage: {} of {} values compared, {} unchecked",
        c.compared, c.values, c.unchecked
    );
    if c.hidden > 0 {
        let _ = write!(s, ", {} inside If/Loop/Scan bodies not reachable", c.hidden);
    }
    let _ = writeln!(s);
    for (why, n) in &c.unchecked_by_reason {
        let _ = writeln!(s, "  {n} × {why}");
    }
    let own: Vec<&str> = r
        .nodes
        .iter()
        .filter(|n| n.reference == RefPrecision::F64Phantom)
        .map(|n| n.op_type.as_str())
        .collect();
    if !own.is_empty() {
        let mut ops: Vec<&str> = own.clone();
        ops.sort_unstable();
        ops.dedup();
        let _ = writeln!(
            s,
            "reference: {} node(s) on phantom's own f64 kernels ({})",
            own.len(),
            ops.join(", ")
        );
    }
    let reduced: Vec<_> = r
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.reference,
                RefPrecision::Reduced { .. } | RefPrecision::Unavailable { .. }
            )
        })
        .filter_map(|n| precision_tag(&n.reference).map(|t| (n, t)))
        .collect();
    if !reduced.is_empty() {
        let _ = writeln!(
            s,
            "reference: {} node(s) not computed in f64:",
            reduced.len()
        );
        for (n, tag) in reduced.iter().take(top) {
            let _ = writeln!(s, "  #{} {} `{}`: {tag}", n.index, n.op_type, n.name);
        }
        if reduced.len() > top {
            let _ = writeln!(s, "  … {} more in the JSON report", reduced.len() - top);
        }
    }
    if let Some(i) = &r.instrumentation {
        if i.outputs_moved {
            let _ = writeln!(
                s,
                "instrumentation: exposing intermediates moved ORT's final outputs by up to {} (verdict uses the plain run's outputs)",
                num(i.max_abs_change)
            );
        } else {
            let _ = writeln!(
                s,
                "instrumentation: exposing intermediates left ORT's final outputs bit-identical"
            );
        }
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    let t = &r.timings;
    let _ = writeln!(
        s,
        "time: {:.0} ms (import {:.0}, reference {:.0}, target {:.0}, expected noise {:.0}, compare {:.0}, \
         attribution {:.0}, explain {:.0})",
        t.total_ms,
        t.import_ms,
        t.reference_ms,
        t.target_ms,
        t.noise_ms,
        t.compare_ms,
        t.attribution_ms,
        t.explain_ms
    );
    s
}

/// What ran as the target: provider and optimization level, or adapter, precision and placement.
pub fn target_lines(r: &Report) -> String {
    let mut s = String::new();
    match &r.target.details {
        TargetFacts::Wgpu(w) => {
            let _ = writeln!(
                s,
                "target        {} · {} · {} · accumulate {} · {} nodes on device, {} on host",
                r.target.version,
                w.backend,
                w.compute,
                w.accumulate,
                w.nodes_on_device,
                w.nodes_on_host
            );
            if w.nodes_cut_into_slabs > 0 {
                let _ = writeln!(
                    s,
                    "              nodes cut into slabs: {} (values beyond the {} storage-binding limit; values \
                     identical to an unsplit run)",
                    w.nodes_cut_into_slabs,
                    crate::fsutil::fmt_size(w.max_binding_bytes as usize)
                );
            }
        }
        TargetFacts::Ort(o) => {
            let _ = writeln!(
                s,
                "target        {} {} · {} · opt {}",
                r.target.name,
                r.target.version,
                o.ep_requested,
                o.opt_level.name()
            );
        }
    }
    s
}

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
    let at = |i: usize, op: &str, node: &str| format!("node #{i} {op} `{node}`");
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
            keep_fp32_hint(v)
        ),
        Status::Anomalous => match (v.anomalies.first(), v.culprits.first()) {
            (Some(a), _) => format!(
                "anomalous: all {compared} values within tolerance, but {} node(s) introduce error far beyond \
                 rounding; first: {} ({}× correct rounding)",
                v.anomalies.len(),
                at(a.node_index, &a.op_type, &a.node),
                num(a.rounding_ratio)
            ),
            (None, Some(c)) => format!(
                "anomalous: all {compared} values within tolerance in the graph, but {} alone is out of tolerance",
                at(c.node_index, &c.op_type, &c.node)
            ),
            (None, None) => "anomalous".into(),
        },
    };
    match (v.status, r.coverage.unchecked_hiding) {
        (Status::Incomplete, _) | (_, 0) => sentence,
        (_, n) => format!(
            "{sentence}; {n} value(s) the outputs depend on not compared ({})",
            top_reason(&r.coverage)
        ),
    }
}

/// The commonest reason values went unchecked, with its count when there are others.
fn top_reason(c: &super::model::Coverage) -> String {
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

/// One line per input sample when there were several: its own verdict, the one that decides marked.
fn sample_lines(r: &Report) -> String {
    let mut s = String::new();
    for k in &r.samples {
        let first = k
            .first_divergence
            .as_ref()
            .map(|f| format!(", first at #{} `{}`", f.node_index, f.node))
            .unwrap_or_default();
        let culprits = match k.culprits.as_slice() {
            [] => String::new(),
            c => format!(", culprits {}", c.join(", ")),
        };
        let anomalies = match k.anomalies.as_slice() {
            [] => String::new(),
            a => format!(", anomalies {}", a.join(", ")),
        };
        let _ = writeln!(
            s,
            "  sample {} ({}): {}, {} values out of tolerance{first}{culprits}{anomalies}{}",
            k.index,
            k.label,
            k.status.name(),
            k.failing_values,
            if k.decides { "  ← decides" } else { "" }
        );
    }
    s
}

/// `: keep `a`, `b` in float32 (--keep-fp32 a,b)` for the culprits of a precision-insufficient verdict.
fn keep_fp32_hint(v: &super::model::Verdict) -> String {
    let nodes: Vec<&str> = v.culprits.iter().map(|c| c.node.as_str()).take(5).collect();
    match nodes.is_empty() {
        true => String::new(),
        false => format!(
            "; keep the culprits in float32: --keep-fp32 {}",
            nodes.join(",")
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(super::num(1173.0299), "1173");
        assert_eq!(super::num(9.84690), "9.847");
        assert_eq!(super::num(0.0012346), "0.001235");
        assert_eq!(super::num(2.0), "2");
        assert_eq!(super::num(3.14159e-7), "3.142e-7");
        assert_eq!(super::num(-52.25), "-52.25");
    }
}
