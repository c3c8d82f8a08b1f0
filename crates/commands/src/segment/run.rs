//! `phantom segment`: one segment of a plan, in either phase. The boundary pass runs the segment's cut on each
//! side fed with that side's stored boundary values and stores the values later segments read; the comparison runs
//! the cut through `phantom onnx`'s stages and writes a partial report.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::feed::prepare;
use super::store::{self, Side};
use super::{peak_rss, Plan, Segment};
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::pipeline::{compare_prepared, Prepared, Strategy};
use crate::report::model::Report;
use crate::runner::ort_lib;
use crate::runner::reference::contrib::standin::Known;
use crate::runner::reference::ReferenceRunner;
use crate::targets::{self, Capture};

/// A segment's partial report, as `phantom merge` reads it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PartialReport {
    pub segment: usize,
    pub plan_sha256: String,
    /// Peak resident memory of the job (Linux), in bytes.
    pub peak_rss_bytes: Option<u64>,
    pub wall_ms: f64,
    pub report: Report,
}

/// What the boundary pass stored for one segment.
pub struct Stored {
    pub values: usize,
    pub wall_ms: f64,
    pub peak_rss_bytes: Option<u64>,
}

/// The boundary pass for segment `index`: its boundary outputs on each side, stored under PLAN/boundary/.
pub fn boundary(dir: &Path, plan: &Plan, index: usize) -> Result<Stored> {
    let t = Instant::now();
    let seg = plan.segment(index)?;
    if seg.hands_on.is_empty() {
        return Ok(Stored {
            values: 0,
            wall_ms: 0.0,
            peak_rss_bytes: peak_rss(),
        });
    }
    let fed = prepare(dir, plan, seg)?;
    let g = &fed.cut.graph;
    let wanted: HashSet<&str> = seg.hands_on.iter().map(String::as_str).collect();
    let lib = ort_lib::locate(
        plan.settings.runtime.ort_lib.as_deref(),
        plan.settings.runtime.no_install,
    )?;
    let mut tgt = targets::open(&fed.spec, g, &lib)?;
    // Every value exposed, as in the comparison and in a whole-model run: exposing only the boundary would let ONNX
    // Runtime fuse across values the other runs materialize, and round them differently.
    let names: Vec<&str> = seg.hands_on.iter().map(String::as_str).collect();
    let out = tgt.run(g, &fed.target, Capture::All)?;
    for name in &names {
        let v = out.values.get(*name).ok_or_else(|| {
            let why = out.missing.get(*name).map(String::as_str).unwrap_or("not produced");
            Error::Usage(format!(
                "segment {index}: the target gave no value for boundary `{name}` ({why}); later segments need it"
            ))
        })?;
        store::write_boundary(dir, Side::Target, seg, name, v)?;
    }
    // What the reference takes from the target, as in a whole run: the values of nodes it stands in for (custom
    // ops) and the discrete decisions within their noise (so the boundary holds the levels the comparison adopts).
    let taken = Taken {
        known: crate::pipeline::noise::known_from(g, &out.values),
        decisions: crate::pipeline::decisions::from_values(&plan.settings, g, &out.values),
    };
    drop(out);
    let side = (None, &taken);
    stream_side(dir, seg, g, &fed.reference, side, Side::Reference, &wanted)?;
    if let Some(noise) = &fed.noise {
        let side = (Some(tgt.rounding(g)?), &taken);
        stream_side(dir, seg, g, noise, side, Side::Noise, &wanted)?;
    }
    Ok(Stored {
        values: names.len(),
        wall_ms: t.elapsed().as_secs_f64() * 1e3,
        peak_rss_bytes: peak_rss(),
    })
}

/// What the reference runs of a boundary pass take from the target's run of the cut.
struct Taken {
    known: Arc<Known>,
    decisions: Option<crate::pipeline::decisions::Gathered>,
}

/// Runs the reference (with `round`: the expected-noise run) on the cut, with what it takes from the target, and
/// stores the wanted values.
fn stream_side(
    dir: &Path,
    seg: &Segment,
    g: &Graph,
    inputs: &Inputs,
    (round, taken): (Option<crate::runner::reference::Rounding>, &Taken),
    side: Side,
    wanted: &HashSet<&str>,
) -> Result<()> {
    let mut failed: Vec<String> = vec![];
    let mut stored = 0;
    // The expected-noise run follows the decisions with their fixed windows, the reference with the widened ones.
    let decisions = (taken.decisions.as_ref()).map(|d| match round.is_some() {
        true => d.fixed.clone(),
        false => d.measured.clone(),
    });
    let mut runner = ReferenceRunner {
        round,
        known: Some(taken.known.clone()),
        decisions,
        ..Default::default()
    };
    runner.run_streaming(g, inputs, &mut |name, value| {
        if !wanted.contains(name) {
            return;
        }
        match value.map(|v| store::write_boundary(dir, side, seg, name, &v)) {
            Ok(Ok(())) => stored += 1,
            Ok(Err(e)) => failed.push(format!("`{name}`: {e}")),
            Err(e) => failed.push(format!("`{name}`: {e}")),
        }
    })?;
    if !failed.is_empty() || stored < wanted.len() {
        return Err(Error::Usage(format!(
            "segment {}: the {} run stored {stored} of {} boundary value(s){}{}",
            seg.index,
            side.name(),
            wanted.len(),
            if failed.is_empty() { "" } else { ": " },
            failed.join("; ")
        )));
    }
    Ok(())
}

/// The comparison of segment `index`: `phantom onnx`'s stages on its cut; the partial report is written to
/// PLAN/reports/segment-I.cbor.
pub fn compare(dir: &Path, plan: &Plan, index: usize, progress: bool) -> Result<PartialReport> {
    let t = Instant::now();
    let seg = plan.segment(index)?;
    let fed = prepare(dir, plan, seg)?;
    let mut s = plan.settings.clone();
    s.strategy = Strategy::Whole;
    s.progress = progress;
    s.command = std::env::args().collect();
    let lib = ort_lib::locate(s.runtime.ort_lib.as_deref(), s.runtime.no_install)?;
    let targets = vec![targets::open(&fed.spec, &fed.cut.graph, &lib)?];
    let mut p = Prepared {
        graph: fed.cut.graph,
        inputs: fed.reference,
        target_inputs: Some(fed.target),
        noise_inputs: fed.noise,
        upstream: fed.upstream,
        lib,
        targets,
        paired: vec![],
        import_ms: t.elapsed().as_secs_f64() * 1e3,
        sizes: None,
    };
    let report = compare_prepared(&s, &mut p)?;
    let partial = PartialReport {
        segment: index,
        plan_sha256: plan.model_sha256.clone(),
        peak_rss_bytes: peak_rss(),
        wall_ms: t.elapsed().as_secs_f64() * 1e3,
        report,
    };
    let path = store::report_path(dir, index);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| crate::fsutil::write_error(parent, e))?;
    }
    // CBOR, not JSON: it keeps the non-finite figures (an infinite SNR, a NaN error) that JSON writes as null.
    let mut bytes = vec![];
    ciborium::into_writer(&partial, &mut bytes)
        .map_err(|e| Error::Usage(format!("serializing segment {index}'s report: {e}")))?;
    crate::report::json::write_atomic(&path, &bytes)?;
    Ok(partial)
}
