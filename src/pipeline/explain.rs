//! The attribute and explain stages: the error each node introduces (the target running every node alone on
//! the reference's values), then the first divergence, the culprits and their causes — a fusion cause settled by a
//! rerun of the target with graph optimizations off.

use super::parts::{prune_heatmaps, stage};
use super::stream::Compared;
use super::{CompareSettings, Prepared};
use crate::analysis::{self, attribution, causes, culprit};
use crate::error::Result;
use crate::report::model::{NodeReport, Status, Verdict};
use crate::runner::reference::Rounding;
use crate::runner::RunOutput;
use crate::target::{self, Capture};

/// Introduced error: every node on the target with reference inputs, compared with the reference.
pub fn attribute(
    s: &CompareSettings,
    p: &mut Prepared,
    cmp: &mut Compared,
    round: &Rounding,
) -> Result<()> {
    let pb = stage(
        s.progress,
        "introduced error: every node on the target with reference inputs",
    );
    let iso = p
        .target
        .run_isolated(&p.graph, &p.inputs, &cmp.held, round)?;
    cmp.notes.extend(iso.notes);
    for (name, t_iso) in &iso.values {
        let (Some(r), Some(v)) = (cmp.held.get(name), cmp.reports.get_mut(name)) else {
            continue;
        };
        let (r, t_iso) = match &s.slice {
            Some(sp) => (sp.apply(r), sp.apply(t_iso)),
            None => (r.clone(), t_iso.clone()),
        };
        let alone = analysis::compare_pair(name, Ok(&r), Ok(&t_iso), &s.tolerance, false, false);
        v.introduced = attribution::introduced(&alone, &r, round.get(name).copied());
    }
    pb.finish_and_clear();
    Ok(())
}

/// The node reports, and the verdict with its culprits and their causes.
pub struct Found {
    pub nodes: Vec<NodeReport>,
    pub verdict: Verdict,
}

/// Assembles node reports and finds the first divergence, the culprits and their causes.
pub fn explain(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &mut Compared,
    target: &mut RunOutput,
    rounding: Option<&Rounding>,
) -> Result<Found> {
    let reports = std::mem::take(&mut cmp.reports);
    let missing = &cmp.reference.missing;
    let mut nodes = analysis::assemble(&p.graph, reports, &cmp.reference.precision, |n| {
        let why = missing.get(n).map(String::as_str).unwrap_or("not produced");
        format!("reference: {why}")
    });
    for n in nodes.iter_mut() {
        n.target_note = target.placement.remove(&n.name);
    }
    prune_heatmaps(&mut nodes);
    let mut verdict = analysis::verdict(&p.graph, &nodes);
    verdict.culprits = culprit::find(&p.graph, &nodes);
    if !verdict.culprits.is_empty() {
        let ev = causes::Evidence::new(
            &p.graph,
            rounding.map(|_| &cmp.held),
            rounding,
            p.target.range_issues(),
            &nodes,
            &verdict.culprits,
        );
        let found: Vec<_> = verdict
            .culprits
            .iter()
            .map(|c| causes::explain(c, &ev))
            .collect();
        for (c, f) in verdict.culprits.iter_mut().zip(found) {
            c.causes = f;
        }
        verdict.status = Status::Drift;
    }
    if rounding.is_some() {
        settle_fusion(s, p, cmp, &mut verdict)?;
    }
    Ok(Found { nodes, verdict })
}

/// A fusion cause is settled by rerunning the target with graph optimizations off: confirmed, or turned into
/// amplification.
fn settle_fusion(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &mut Compared,
    verdict: &mut Verdict,
) -> Result<()> {
    let fused = verdict
        .culprits
        .iter()
        .any(|c| c.causes.iter().any(|k| k.kind == "fusion"));
    let Some(unfused) = s.target.unfused().filter(|_| fused) else {
        return Ok(());
    };
    let pb = stage(
        s.progress,
        "fusion check: the target with --ort-opt-level disable",
    );
    let mut t = target::open(&unfused, &p.graph, &p.lib)?;
    let out = t.run(&p.graph, &p.inputs, Capture::All)?;
    for c in verdict.culprits.iter_mut() {
        if let (Some(r), Some(v)) = (cmp.held.get(&c.value), out.values.get(&c.value)) {
            let rep = analysis::compare_pair(&c.value, Ok(r), Ok(v), &s.tolerance, false, false);
            analysis::fusion::settle(c, &rep);
        }
    }
    cmp.notes.push(
        "a fusion cause was checked by rerunning the target with --ort-opt-level disable".into(),
    );
    pb.finish_and_clear();
    Ok(())
}
