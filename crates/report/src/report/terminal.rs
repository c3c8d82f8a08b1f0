//! Terminal summary: verdict, first divergent node with its metrics and activation statistics, worst nodes,
//! coverage. Colour only on a terminal and never with `NO_COLOR`.

use std::fmt::Write as _;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use owo_colors::{OwoColorize, Stream::Stdout};

use super::model::{Coverage, RefPrecision, Report, Status, TargetFacts, Timings};
use crate::units::num;

mod tables;
mod verdict;
use tables::{metrics_table, precision_tag, stats_table, ulp};
pub use verdict::{verdict_line, verdict_sentence};

/// The full terminal summary.
pub fn render(r: &Report, top: usize) -> String {
    let mut s = header_lines(r);
    s.push_str(&input_lines(r));
    let _ = writeln!(s);
    let _ = writeln!(s, "{}  {}", badge(r.verdict.status), verdict_sentence(r));
    s.push_str(&sample_lines(r));
    s.push_str(&first_divergence_lines(r));
    s.push_str(&super::culprits::render(r));
    if let Some(t) = worst_table(r, top) {
        let _ = writeln!(s, "worst values:\n{t}");
    }
    s.push_str(&coverage_lines(&r.coverage));
    s.push_str(&own_kernel_line(r));
    s.push_str(&reduced_lines(r, top));
    s.push_str(&instrumentation_line(r));
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s.push_str(&timing_line(&r.timings));
    s
}

/// What was compared: the model, the target's own model if any, the reference and the target.
fn header_lines(r: &Report) -> String {
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
    s
}

/// One line per model input: name, dtype, shape and origin, then where its dimensions came from.
fn input_lines(r: &Report) -> String {
    let mut s = String::new();
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
    s
}

/// The verdict class as a coloured badge.
fn badge(status: Status) -> String {
    match status {
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
    }
}

/// The first divergent value: where it is, its sample, reference precision, reason, worst element, metrics and
/// statistics.
fn first_divergence_lines(r: &Report) -> String {
    let mut s = String::new();
    let Some(f) = &r.verdict.first_divergence else {
        return s;
    };
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
    s
}

/// The `top` worst values with their metrics, or nothing when no value failed.
fn worst_table(r: &Report, top: usize) -> Option<Table> {
    if r.verdict.worst.is_empty() {
        return None;
    }
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
    for w in r.verdict.worst.iter().take(top) {
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
    Some(t)
}

/// How many values were compared and why the others were not.
fn coverage_lines(c: &Coverage) -> String {
    let mut s = String::new();
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
    if let Some(i) = c.introduced.filter(|i| !i.all) {
        let _ = writeln!(
            s,
            "introduced error: {} of {} values run alone; the others' error in the graph is under 1/8 of an \
             anomaly's (--attribute-all runs every node)",
            i.measured, i.compared
        );
    }
    if let Some(why) = &c.noise_skipped {
        let _ = writeln!(s, "expected noise: not run: {why}");
    }
    s
}

/// How many nodes ran on phantom's own f64 kernels, and which op types, when any did.
fn own_kernel_line(r: &Report) -> String {
    let mut s = String::new();
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
    s
}

/// The nodes whose reference was not computed in f64, the first `top` of them listed with the reason.
fn reduced_lines(r: &Report, top: usize) -> String {
    let mut s = String::new();
    let reduced: Vec<_> = r
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.reference,
                RefPrecision::Reduced { .. }
                    | RefPrecision::Seeded { .. }
                    | RefPrecision::Unavailable { .. }
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
    s
}

/// Whether exposing intermediates changed ORT's final outputs, when the run was instrumented.
fn instrumentation_line(r: &Report) -> String {
    let mut s = String::new();
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
    s
}

/// The time each stage took.
fn timing_line(t: &Timings) -> String {
    format!(
        "time: {:.0} ms (import {:.0}, reference {:.0}{}, target {:.0}, expected noise {:.0}{}, compare {:.0}, \
         attribution {:.0}, explain {:.0})\n",
        t.total_ms,
        t.import_ms,
        t.reference_ms,
        if t.reference_ahead { " alongside the comparison" } else { "" },
        t.target_ms,
        t.noise_ms,
        if t.noise_beside { " beside the reference" } else { "" },
        t.compare_ms,
        t.attribution_ms,
        t.explain_ms
    )
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
                    crate::units::fmt_size(w.max_binding_bytes as usize)
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
            // Where the requested provider did not run every node: which provider ran what.
            if o.placement.iter().any(|p| p.provider != o.ep_requested)
                && o.ep_requested != "CPUExecutionProvider"
            {
                let _ = writeln!(s, "placement     {}", o.ep_used);
            }
            for lib in &o.custom_op_libraries {
                let _ = writeln!(s, "custom ops    {lib}");
            }
        }
    }
    s
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
