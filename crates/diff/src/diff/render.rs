//! Terminal summary, Markdown and JUnit of a [`DiffReport`].

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use super::report::{DiffReport, PairReport, PairStatus};
use crate::report::junit::{self, Case};

fn g(x: f64) -> String {
    format!("{x:.3e}")
}

fn status(p: &PairReport) -> &'static str {
    match p.status {
        PairStatus::Pass => "ok",
        PairStatus::Fail => "FAIL",
        PairStatus::Mismatch => "MISMATCH",
    }
}

/// One line on why a pair failed or what its worst element is.
fn detail(p: &PairReport) -> String {
    if let Some(r) = &p.reason {
        return r.clone();
    }
    match (&p.metrics, &p.worst) {
        (Some(m), Some(w)) => format!(
            "{} of {} elements out of tolerance; worst at {:?}: A {} B {}",
            m.failed, m.elements, w.index, w.reference, w.target
        ),
        _ => String::new(),
    }
}

/// The terminal summary: verdict, a table of the pairs (failing first when there are many), unmatched names.
pub fn terminal(r: &DiffReport, limit: usize) -> String {
    let mut out = header(r);
    let first = r.verdict.first_divergent.as_deref();
    let shown = shown_pairs(r, limit);
    out += &format!("{}\n", pairs_table(&shown, first));
    if shown.len() < r.pairs.len() {
        out += &format!(
            "({} of {} pairs shown; all are in the JSON report)\n",
            shown.len(),
            r.pairs.len()
        );
    }
    if let Some(p) = r.pairs.iter().find(|p| Some(p.name.as_str()) == first) {
        out += &format!("first divergent `{}`: {}\n", p.name, detail(p));
    }
    out += &unmatched(r);
    out
}

/// The two sides with their naming notes, then the verdict line.
fn header(r: &DiffReport) -> String {
    let v = &r.verdict;
    let mut out = format!(
        "phantom diff\nA  {} ({} tensors)\nB  {} ({} tensors)\n",
        r.a.path, r.a.tensors, r.b.path, r.b.tensors
    );
    for note in [&r.a.naming, &r.b.naming].into_iter().flatten() {
        out += &format!("   {note}\n");
    }
    out += "\n";
    out += &match &v.first_divergent {
        Some(f) => format!(
            "✗ DRIFT  {} of {} pairs fail, {} mismatch; first divergent: `{f}`\n",
            v.failed,
            r.pairs.len(),
            v.mismatched
        ),
        None => format!("✓ CLEAN  all {} pairs within tolerance\n", r.pairs.len()),
    };
    out
}

/// The pairs to list with their indices: all of them up to `limit`, else the first `limit` that do not pass.
fn shown_pairs(r: &DiffReport, limit: usize) -> Vec<(usize, &PairReport)> {
    if r.pairs.len() <= limit {
        return r.pairs.iter().enumerate().collect();
    }
    let mut s: Vec<(usize, &PairReport)> = r
        .pairs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.status != PairStatus::Pass)
        .take(limit)
        .collect();
    s.sort_by_key(|(i, _)| *i);
    s
}

/// The table of the shown pairs, the first divergent one marked.
fn pairs_table(shown: &[(usize, &PairReport)], first: Option<&str>) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "#",
        "name",
        "shape",
        "A/B",
        "max |Δ|",
        "max rel",
        "cosine",
        "status",
        "transforms",
    ]);
    for (i, p) in shown {
        let m = p.metrics.as_ref();
        let mark = if Some(p.name.as_str()) == first {
            "▶ "
        } else {
            ""
        };
        t.add_row(vec![
            i.to_string(),
            format!("{mark}{}", p.name),
            format!("{:?}", p.a_shape),
            format!("{}/{}", p.a_dtype, p.b_dtype),
            m.map(|m| g(m.max_abs)).unwrap_or("-".into()),
            m.map(|m| g(m.max_rel)).unwrap_or("-".into()),
            m.map(|m| format!("{:.6}", m.cosine)).unwrap_or("-".into()),
            status(p).into(),
            p.transforms.join("; "),
        ]);
    }
    t
}

/// Names found on one side only, and files of each side that hold nothing phantom reads.
fn unmatched(r: &DiffReport) -> String {
    let mut out = String::new();
    for (side, names) in [("A", &r.only_a), ("B", &r.only_b)] {
        if !names.is_empty() {
            let list: Vec<&str> = names.iter().take(8).map(|s| s.as_str()).collect();
            let more = if names.len() > 8 {
                format!(" … {} more", names.len() - 8)
            } else {
                String::new()
            };
            out += &format!(
                "only in {side} ({}): {}{more}\n",
                names.len(),
                list.join(", ")
            );
        }
    }
    for (side, files) in [("A", &r.a.ignored_files), ("B", &r.b.ignored_files)] {
        if !files.is_empty() {
            out += &format!(
                "{side}: {} file(s) hold no tensors phantom reads (e.g. {})\n",
                files.len(),
                files[0]
            );
        }
    }
    out
}

/// Markdown: verdict, pairs table, unmatched names.
pub fn markdown(r: &DiffReport) -> String {
    let v = &r.verdict;
    let mut s = format!(
        "## phantom diff: {}\n\nA: `{}` · B: `{}` · {} pairs, {} fail, {} mismatch{}\n\n",
        v.status,
        r.a.path,
        r.b.path,
        r.pairs.len(),
        v.failed,
        v.mismatched,
        v.first_divergent
            .as_ref()
            .map(|f| format!(" · first divergent: `{f}`"))
            .unwrap_or_default()
    );
    s += "| # | name | shape | max abs | max rel | MSE | status | transforms |\n|---|---|---|---|---|---|---|---|\n";
    for (i, p) in r.pairs.iter().enumerate() {
        let m = p.metrics.as_ref();
        s += &format!(
            "| {i} | `{}` | {:?} | {} | {} | {} | {} | {} |\n",
            p.name,
            p.a_shape,
            m.map(|m| g(m.max_abs)).unwrap_or("-".into()),
            m.map(|m| g(m.max_rel)).unwrap_or("-".into()),
            p.mse.map(g).unwrap_or("-".into()),
            status(p),
            p.transforms.join("; ")
        );
    }
    for (side, names) in [("A", &r.only_a), ("B", &r.only_b)] {
        if !names.is_empty() {
            s += &format!(
                "\nOnly in {side}: {}\n",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    s
}

/// JUnit: one case per pair, one per unmatched name (skipped).
pub fn junit(r: &DiffReport) -> String {
    let mut cases: Vec<Case> = r
        .pairs
        .iter()
        .map(|p| Case {
            name: p.name.clone(),
            class: "phantom.diff".into(),
            failure: (p.status != PairStatus::Pass).then(|| detail(p)),
            skipped: None,
        })
        .collect();
    for (side, names) in [("A", &r.only_a), ("B", &r.only_b)] {
        cases.extend(names.iter().map(|n| Case {
            name: n.clone(),
            class: "phantom.diff".into(),
            failure: None,
            skipped: Some(format!("only in {side}")),
        }));
    }
    junit::render("phantom diff", &cases)
}

impl crate::report::emit::Formats for DiffReport {
    fn json(&self) -> anyhow::Result<Vec<u8>> {
        Ok((serde_json::to_string_pretty(self)? + "\n").into_bytes())
    }
    fn junit(&self) -> String {
        junit(self)
    }
    fn markdown(&self) -> String {
        markdown(self)
    }
    fn html(&self) -> String {
        super::inspect::html(self)
    }
}
