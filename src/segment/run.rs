//! `phantom segment`: one segment of a plan, in either phase. The boundary pass runs the segment's cut on each
//! side fed with that side's stored boundary values and stores the values later segments read; the comparison runs
//! the cut through `phantom onnx`'s stages and writes a partial report.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::store::{self, Side};
use super::{load_graph, peak_rss, Plan, Segment};
use crate::error::{Error, Result};
use crate::model::inputs::{InputSummary, Inputs};
use crate::model::Graph;
use crate::pipeline::{compare_prepared, Prepared, Strategy};
use crate::reduce::extract::{cut, Boundary, Cut};
use crate::report::model::Report;
use crate::runner::ort_lib;
use crate::runner::reference::ReferenceRunner;
use crate::target::{self, Capture};
use crate::tensor::Tensor;

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

/// The cut of a segment and each side's inputs for it.
struct Fed {
    cut: Cut,
    reference: Inputs,
    noise: Option<Inputs>,
    target: Inputs,
}

/// Which side's stored values feed which run.
struct Sides {
    reference: HashMap<String, Tensor>,
    noise: Option<HashMap<String, Tensor>>,
    target: HashMap<String, Tensor>,
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
    let (graph, fed) = prepare(dir, plan, seg)?;
    let g = &fed.cut.graph;
    let wanted: HashSet<&str> = seg.hands_on.iter().map(String::as_str).collect();
    stream_side(dir, seg, g, &fed.reference, None, Side::Reference, &wanted)?;
    let lib = ort_lib::locate(
        plan.settings.runtime.ort_lib.as_deref(),
        plan.settings.runtime.no_install,
    )?;
    let mut tgt = target::open(&plan.settings.targets[0], g, &lib)?;
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
    if let Some(noise) = &fed.noise {
        let round = tgt.rounding(g)?;
        stream_side(dir, seg, g, noise, Some(round), Side::Noise, &wanted)?;
    }
    drop(graph);
    Ok(Stored {
        values: names.len(),
        wall_ms: t.elapsed().as_secs_f64() * 1e3,
        peak_rss_bytes: peak_rss(),
    })
}

/// Runs the reference (with `round`: the expected-noise run) on the cut and stores the wanted values.
fn stream_side(
    dir: &Path,
    seg: &Segment,
    g: &Graph,
    inputs: &Inputs,
    round: Option<crate::runner::reference::Rounding>,
    side: Side,
    wanted: &HashSet<&str>,
) -> Result<()> {
    let mut failed: Vec<String> = vec![];
    let mut stored = 0;
    let mut runner = ReferenceRunner { round };
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
/// PLAN/reports/segment-I.json.
pub fn compare(dir: &Path, plan: &Plan, index: usize, progress: bool) -> Result<PartialReport> {
    let t = Instant::now();
    let seg = plan.segment(index)?;
    let (_, fed) = prepare(dir, plan, seg)?;
    let mut s = plan.settings.clone();
    s.strategy = Strategy::Whole;
    s.progress = progress;
    s.command = std::env::args().collect();
    let lib = ort_lib::locate(s.runtime.ort_lib.as_deref(), s.runtime.no_install)?;
    let targets = vec![target::open(&s.targets[0], &fed.cut.graph, &lib)?];
    let mut p = Prepared {
        graph: fed.cut.graph,
        inputs: fed.reference,
        target_inputs: Some(fed.target),
        noise_inputs: fed.noise,
        lib,
        targets,
        import_ms: t.elapsed().as_secs_f64() * 1e3,
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

/// The model, and the segment's cut with each side's inputs.
fn prepare(dir: &Path, plan: &Plan, seg: &Segment) -> Result<(Graph, Fed)> {
    let stored = store::read_inputs(dir, plan)?;
    let graph = load_graph(plan, &stored)?;
    if graph.nodes.len() != plan.nodes {
        return Err(Error::Usage(format!(
            "{} has {} nodes as prepared now, the plan {}: run `phantom plan` again",
            plan.model.display(),
            graph.nodes.len(),
            plan.nodes
        )));
    }
    let sides = read_sides(dir, plan, seg, &stored)?;
    let fed = cut_segment(dir, &graph, seg, &sides)?;
    Ok((graph, fed))
}

/// Each side's values of everything the segment reads: boundary values from the store, graph inputs as stored.
fn read_sides(dir: &Path, plan: &Plan, seg: &Segment, stored: &Inputs) -> Result<Sides> {
    let attribution = plan.settings.attribution;
    let mut sides = Sides {
        reference: HashMap::new(),
        noise: attribution.then(HashMap::new),
        target: HashMap::new(),
    };
    for (name, t) in stored
        .tensors
        .iter()
        .filter(|(n, _)| seg.graph_inputs.contains(n))
    {
        sides.reference.insert(name.clone(), t.clone());
        sides.target.insert(name.clone(), t.clone());
        if let Some(n) = sides.noise.as_mut() {
            n.insert(name.clone(), t.clone());
        }
    }
    for r in &seg.reads {
        let read = |side| store::read_boundary(dir, plan, side, &r.name, r.from);
        sides
            .reference
            .insert(r.name.clone(), read(Side::Reference)?);
        sides.target.insert(r.name.clone(), read(Side::Target)?);
        if let Some(n) = sides.noise.as_mut() {
            n.insert(r.name.clone(), read(Side::Noise)?);
        }
    }
    Ok(sides)
}

/// The segment cut out of the model. Integer boundary values both sides agree on (shape arithmetic) are embedded
/// as constants, which the reference needs to type the cut; every other value is a graph input of the cut.
fn cut_segment(dir: &Path, graph: &Graph, seg: &Segment, sides: &Sides) -> Result<Fed> {
    let keep: HashSet<usize> = (seg.first..=seg.last).collect();
    let hands_on: HashSet<&str> = seg.hands_on.iter().map(String::as_str).collect();
    let outputs: HashSet<&str> = graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let mut expose: HashSet<usize> = graph.nodes[seg.first..=seg.last]
        .iter()
        .filter(|n| {
            n.outputs
                .iter()
                .any(|o| hands_on.contains(o.as_str()) || outputs.contains(o.as_str()))
        })
        .map(|n| n.index)
        .collect();
    if expose.is_empty() {
        expose = keep.clone();
    }
    let shape_of = |base: &str| sides.reference.get(base).map(|t| t.shape().to_vec());
    let embed = |f: &crate::reduce::extract::Feed| {
        let (Some(r), Some(t)) = (sides.reference.get(&f.name), sides.target.get(&f.name)) else {
            return Ok(None);
        };
        let integer = !f.dtype.is_float() && !r.dtype().is_float();
        let same = r.shape() == t.shape() && r.to_f64_array() == t.to_f64_array();
        Ok((integer && same).then(|| r.clone()))
    };
    let path = dir.join(format!("segment-{}.onnx", seg.index));
    let mut c = cut(
        graph,
        &keep,
        &expose,
        &Boundary {
            shape_of: &shape_of,
            embed: &embed,
        },
        &path,
    )?;
    c.graph.handed_on = c
        .graph
        .outputs
        .iter()
        .map(|o| o.name.clone())
        .filter(|o| !outputs.contains(o.as_str()))
        .collect();
    let side_inputs =
        |values: &HashMap<String, Tensor>, what: &str, cast: bool| -> Result<Inputs> {
            let mut out = Inputs::default();
            for f in &c.feeds {
                let t = values.get(&f.base).ok_or_else(|| {
                    Error::Usage(format!(
                        "segment {}: no {what} value for `{}`",
                        seg.index, f.base
                    ))
                })?;
                let t = match cast {
                    true => t.cast(f.dtype).unwrap_or_else(|| t.clone()),
                    false => t.clone(),
                };
                out.summaries.push(InputSummary {
                    name: f.name.clone(),
                    dtype: f.dtype,
                    shape: t.shape().to_vec(),
                    origin: format!("the {what}'s value, stored by the boundary pass"),
                    dims_from: vec![],
                });
                out.tensors.push((f.name.clone(), t));
            }
            Ok(out)
        };
    let reference = side_inputs(&sides.reference, "reference", false)?;
    let target = side_inputs(&sides.target, "target", true)?;
    let noise = match &sides.noise {
        Some(n) => Some(side_inputs(n, "expected-noise run", false)?),
        None => None,
    };
    Ok(Fed {
        cut: c,
        reference,
        noise,
        target,
    })
}
