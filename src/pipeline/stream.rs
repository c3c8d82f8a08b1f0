//! The stream-compare stage: the f64 reference runs once and hands over each value as it is computed; it is
//! compared with the target's (held from the capture, or exposed chunk by chunk in bounded mode) and dropped, so
//! only one side is ever held whole.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::parts::stage;
use super::{CompareSettings, Prepared};
use crate::analysis::{self, attribution};
use crate::bounded::{fmt_size, Chunker};
use crate::error::Result;
use crate::model::{inputs::Inputs, Graph};
use crate::report::model::ValueReport;
use crate::runner::reference::ReferenceRunner;
use crate::runner::RunOutput;
use crate::target::Target;
use crate::tensor::Tensor;

/// What the stage produced.
pub struct Compared {
    /// Value reports by name.
    pub reports: HashMap<String, ValueReport>,
    /// Reference values kept for attribution and causes (with attribution on).
    pub held: HashMap<String, Tensor>,
    /// The reference's run: precision per node, missing values, notes (values were streamed, not kept).
    pub reference: RunOutput,
    /// Time spent comparing (inside the reference's run).
    pub compare_time: Duration,
    /// The reference's time without the comparisons.
    pub reference_ms: f64,
    /// Notes for the report.
    pub notes: Vec<String>,
}

/// Compares every reference value with the target's as the reference computes it.
pub fn compare(
    s: &CompareSettings,
    p: &mut Prepared,
    target: &mut RunOutput,
    mut emulated: HashMap<String, Tensor>,
    keep: bool,
) -> Result<Compared> {
    let t = Instant::now();
    let msg = format!(
        "reference: tract f64 on {} nodes, comparing as values arrive",
        p.graph.nodes.len()
    );
    let pb = stage(s.progress, &msg);
    let outputs: HashSet<&str> = p.graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let mut reports = HashMap::new();
    let mut held: HashMap<String, Tensor> = match keep {
        true => p.inputs.tensors.iter().cloned().collect(),
        false => HashMap::new(),
    };
    let mut chunker = chunker(s, p.target.as_mut(), &p.graph, &p.inputs);
    let mut compare_time = Duration::ZERO;
    let reference =
        ReferenceRunner::default().run_streaming(&p.graph, &p.inputs, &mut |name, value| {
            let c = Instant::now();
            if let Some(ch) = chunker.as_mut() {
                ch.push(name, value);
            } else {
                let report = judge(
                    s,
                    name,
                    &value,
                    target,
                    &mut emulated,
                    outputs.contains(name),
                );
                if let (true, Ok(r)) = (keep, value) {
                    held.insert(name.to_string(), r);
                }
                reports.insert(name.to_string(), report);
            }
            compare_time += c.elapsed();
        })?;
    pb.finish_and_clear();
    let mut notes = vec![];
    if let Some(ch) = chunker {
        let (r, note) = finish_chunks(ch, s.budget().unwrap_or(0))?;
        reports = r;
        notes.push(note);
    }
    Ok(Compared {
        reports,
        held,
        reference,
        compare_time,
        reference_ms: t.elapsed().as_secs_f64() * 1e3 - compare_time.as_secs_f64() * 1e3,
        notes,
    })
}

/// Bounded memory: the chunker that exposes the target's values chunk by chunk.
fn chunker<'a>(
    s: &'a CompareSettings,
    target: &'a mut dyn Target,
    graph: &'a Graph,
    inputs: &'a Inputs,
) -> Option<Chunker<'a>> {
    let budget = s.budget()?;
    let c = Chunker::new(target, graph, inputs, &s.tolerance, budget, s.heatmaps);
    Some(c.with_slice(s.slice.clone()))
}

/// Compares the last chunk; the value reports and a note saying how many target runs it took.
fn finish_chunks(
    mut ch: Chunker<'_>,
    budget: usize,
) -> Result<(HashMap<String, ValueReport>, String)> {
    ch.flush();
    if let Some(e) = ch.error.take() {
        return Err(e);
    }
    let note = format!(
        "bounded memory ({}): the target ran {} time(s), each exposing one chunk of values; introduced error and \
         expected noise are not measured in this mode",
        fmt_size(budget),
        ch.runs
    );
    Ok((std::mem::take(&mut ch.reports), note))
}

/// One value judged: the reference's against the target's (sliced when asked), with the expected noise.
fn judge(
    s: &CompareSettings,
    name: &str,
    value: &std::result::Result<Tensor, String>,
    target: &mut RunOutput,
    emulated: &mut HashMap<String, Tensor>,
    is_output: bool,
) -> ValueReport {
    let cut = |t: Tensor| match &s.slice {
        Some(sp) => sp.apply(&t),
        None => t,
    };
    let why_not = target
        .missing
        .get(name)
        .map(String::as_str)
        .unwrap_or("not produced");
    let tgt = target.values.remove(name).map(cut);
    let sliced = s
        .slice
        .as_ref()
        .map(|sp| value.as_ref().map(|t| sp.apply(t)).map_err(Clone::clone));
    let r = sliced.as_ref().unwrap_or(value);
    let mut report = analysis::compare_pair(
        name,
        r.as_ref().map_err(String::as_str),
        tgt.as_ref().ok_or(why_not),
        &s.tolerance,
        is_output,
        s.heatmaps,
    );
    if let (Ok(r), Some(e), Some(tol), Some(m)) = (
        r,
        emulated.remove(name).map(cut),
        report.tolerance,
        report.metrics.as_ref(),
    ) {
        if let Some(n) = attribution::noise(r, &e, tol, m.scale) {
            attribution::apply_noise(&mut report, n, &s.tolerance);
        }
    }
    report
}
