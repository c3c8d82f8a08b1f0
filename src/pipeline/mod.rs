//! The `phantom onnx` pipeline: import, inputs, reference run, target run, comparison, report.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::analysis::{self, attribution, causes, culprit, isolate};
use crate::cli::args::{Ep, OptLevel};
use crate::compare::ToleranceSpec;
use crate::error::Result;
use crate::model::{self, inputs::InputSpec};
use crate::precision::LowPrecision;
use crate::report::model::{
    ModelRef, ModelSummary, Report, RunnerInfo, Timings, ToleranceReport, ValueReport,
    SCHEMA_VERSION,
};
use crate::runner::{
    ort::OrtRunner, ort_lib, reference::ReferenceRunner, wgpu::WgpuRunner, Runner,
};
use crate::tensor::{DType, Tensor};

mod parts;

pub use parts::{environment, make_target};
use parts::{ms, prune_heatmaps, stage};

/// Everything `phantom onnx` needs, resolved from the command line.
#[derive(Clone, Debug)]
pub struct CompareSettings {
    pub model: PathBuf,
    pub target_model: Option<PathBuf>,
    pub ep: Ep,
    pub opt_level: OptLevel,
    pub tolerance: ToleranceSpec,
    pub inputs: InputSpec,
    pub ort_lib: Option<PathBuf>,
    pub no_install: bool,
    /// The command line, recorded in the report.
    pub command: Vec<String>,
    /// Show spinners on stderr.
    pub progress: bool,
    /// Draw |t − r| heatmaps (for the HTML report).
    pub heatmaps: bool,
    /// Run phantom's fp16/bf16 conversion of the model on the target.
    pub precision: Option<LowPrecision>,
    /// Introduced-vs-inherited error and expected noise.
    pub attribution: bool,
    /// Compare only this slice of each tensor (`--slice`).
    pub slice: Option<crate::compare::slice::SliceSpec>,
    /// Bound peak memory to about this many bytes (`--max-memory`): the target exposes values chunk by chunk.
    pub max_memory: Option<usize>,
    /// Nodes the conversion keeps in float32.
    pub keep_fp32: Vec<String>,
    /// Where to write the converted model.
    pub save_target_model: Option<PathBuf>,
    /// The wgpu target's options (`--ep wgpu`).
    pub wgpu: crate::runner::wgpu::WgpuOptions,
}

/// Heatmaps kept per report: those of the values using most of their tolerance (a few kilobytes each).
pub const MAX_HEATMAPS: usize = 200;

/// Runs the whole comparison and builds the report.
pub fn run_compare(s: &CompareSettings) -> Result<(Report, model::inputs::Inputs)> {
    let t_all = Instant::now();
    let t = Instant::now();
    let graph = model::load(&s.model)?;
    let target_graph = s.target_model.as_deref().map(model::load).transpose()?;
    let inputs = model::inputs::prepare(&graph, &s.inputs)?;
    let lib = ort_lib::locate(s.ort_lib.as_deref(), s.no_install)?;
    let import_ms = ms(t);

    // Target first: its values (in the target's own dtype) wait while the reference streams its f64 values,
    // each compared and dropped as soon as it is computed, so only one side is ever held whole.
    let t = Instant::now();
    let pb = stage(s.progress, "target: onnxruntime (plain and instrumented)");
    let (mut target, conversion) = make_target(s, &graph, &lib, target_graph.clone())?;
    let mut wg = match s.ep {
        Ep::Wgpu => {
            if s.max_memory.is_some() || target_graph.is_some() {
                return Err(crate::error::Error::Usage(
                    "--ep wgpu runs MODEL itself and holds its values on the device: --max-memory and \
                     --target-model are for ONNX Runtime targets"
                        .into(),
                ));
            }
            Some(WgpuRunner::new(&s.wgpu, &lib)?)
        }
        _ => None,
    };
    let bounded = s.max_memory;
    let attribution = s.attribution && bounded.is_none();
    let mut tgt_out = match (wg.as_mut(), bounded) {
        (Some(w), _) => w.run(&graph, &inputs)?,
        (None, None) => target.run(&graph, &inputs)?,
        (None, Some(_)) => {
            let used = target.target_model.as_ref().unwrap_or(&graph);
            crate::runner::RunOutput {
                details: target.details(used, "not logged in bounded mode"),
                ..Default::default()
            }
        }
    };
    let mut tgt_notes: Vec<String> = vec![];
    pb.finish_and_clear();
    let target_ms = ms(t);

    // Expected noise: the reference rerun with every value rounded to the element type the target stores it in.
    let t = Instant::now();
    let target_graph_used = target.target_model.clone().unwrap_or_else(|| graph.clone());
    let rounding = match (attribution, &wg) {
        (false, _) => None,
        (true, Some(w)) => Some(w.rounding(&graph)?),
        (true, None) => Some(isolate::rounding(&graph, &target_graph_used)?),
    };
    let mut emulated: HashMap<String, Tensor> = HashMap::new();
    if let Some(round) = &rounding {
        let pb = stage(s.progress, "expected noise: reference with target rounding");
        let mut ideal = ReferenceRunner {
            round: Some(round.clone()),
        };
        ideal.run_streaming(&graph, &inputs, &mut |name, value| {
            if let (Ok(v), Some(&d)) = (value, round.get(name)) {
                emulated.insert(name.to_string(), v.cast(d).unwrap_or(v));
            }
        })?;
        pb.finish_and_clear();
    }

    let pb = stage(
        s.progress,
        &format!(
            "reference: tract f64 on {} nodes, comparing as values arrive",
            graph.nodes.len()
        ),
    );
    let outputs: HashSet<&str> = graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let mut reports: HashMap<String, ValueReport> = HashMap::new();
    let mut compare_time = Duration::ZERO;
    let mut held: HashMap<String, Tensor> = HashMap::new();
    if attribution {
        held.extend(inputs.tensors.iter().cloned());
    }
    let mut reference = ReferenceRunner::default();
    let mut chunker = bounded.map(|b| {
        crate::bounded::Chunker::new(
            &target,
            &target_graph_used,
            &inputs,
            &s.tolerance,
            b,
            s.heatmaps,
        )
        .with_slice(s.slice.clone())
    });
    let ref_out = reference.run_streaming(&graph, &inputs, &mut |name, value| {
        let c = Instant::now();
        if let Some(ch) = chunker.as_mut() {
            ch.push(name, value);
            compare_time += c.elapsed();
            return;
        }
        let cut = |t: Tensor| match &s.slice {
            Some(sp) => sp.apply(&t),
            None => t,
        };
        let tgt = tgt_out.values.remove(name).map(cut);
        let why_not = tgt_out
            .missing
            .get(name)
            .map(String::as_str)
            .unwrap_or("not produced");
        let sliced: Option<std::result::Result<Tensor, String>> = s
            .slice
            .as_ref()
            .map(|sp| value.as_ref().map(|t| sp.apply(t)).map_err(Clone::clone));
        let r_cmp = sliced.as_ref().unwrap_or(&value);
        let mut report = analysis::compare_pair(
            name,
            r_cmp.as_ref().map_err(String::as_str),
            tgt.as_ref().ok_or(why_not),
            &s.tolerance,
            outputs.contains(name),
            s.heatmaps,
        );
        if let (Ok(r), Some(e), Some(tol), Some(m)) = (
            r_cmp,
            emulated.remove(name).map(cut),
            report.tolerance,
            report.metrics.as_ref(),
        ) {
            if let Some(n) = attribution::noise(r, &e, tol, m.scale) {
                attribution::apply_noise(&mut report, n, &s.tolerance);
            }
        }
        if let (true, Ok(r)) = (attribution, value) {
            held.insert(name.to_string(), r);
        }
        reports.insert(name.to_string(), report);
        compare_time += c.elapsed();
    })?;
    pb.finish_and_clear();
    if let Some(mut ch) = chunker {
        ch.flush();
        if let Some(e) = ch.error.take() {
            return Err(e);
        }
        tgt_notes.push(format!(
            "bounded memory ({}): the target ran {} time(s), each exposing one chunk of values; introduced error \
             and expected noise are not measured in this mode",
            crate::bounded::fmt_size(bounded.unwrap_or(0)),
            ch.runs
        ));
        reports = ch.reports;
    }
    if let Some(round) = &rounding {
        let pb = stage(
            s.progress,
            "introduced error: every node on the target with reference inputs",
        );
        let outs = match wg.as_mut() {
            Some(w) => w.run_isolated(&graph, &inputs, &held)?,
            None => {
                let available: HashSet<String> = held.keys().cloned().collect();
                let iso = isolate::build(&graph, &target_graph_used, &available)?;
                if !iso.excluded.is_empty() {
                    tgt_notes.push(format!(
                        "introduced error not measured for {} node(s) (control-flow bodies, or inputs the reference \
                         lacks)",
                        iso.excluded.len()
                    ));
                }
                isolate::run(&iso, &target, &held, round)?
            }
        };
        for (name, t_iso) in &outs {
            let (Some(r), Some(v)) = (held.get(name), reports.get_mut(name)) else {
                continue;
            };
            let (r, t_iso) = match &s.slice {
                Some(sp) => (sp.apply(r), sp.apply(t_iso)),
                None => (r.clone(), t_iso.clone()),
            };
            let alone =
                analysis::compare_pair(name, Ok(&r), Ok(&t_iso), &s.tolerance, false, false);
            v.introduced = attribution::introduced(&alone, &r, round.get(name).copied());
        }
        pb.finish_and_clear();
    }
    let reference_ms = ms(t) - compare_time.as_secs_f64() * 1e3;

    let t = Instant::now();
    let nodes = analysis::assemble(&graph, reports, &ref_out.precision, |n| {
        format!(
            "reference: {}",
            ref_out
                .missing
                .get(n)
                .map(String::as_str)
                .unwrap_or("not produced")
        )
    });
    let mut nodes = nodes;
    for n in nodes.iter_mut() {
        n.target_note = tgt_out.placement.remove(&n.name);
    }
    prune_heatmaps(&mut nodes);
    let mut verdict = analysis::verdict(&graph, &nodes);
    verdict.culprits = culprit::find(&graph, &nodes);
    if !verdict.culprits.is_empty() {
        let no_issues = vec![];
        let range_issues = match (&conversion, &wg) {
            (Some(c), _) => &c.range_issues,
            (None, Some(w)) => &w.range_issues,
            (None, None) => &no_issues,
        };
        let ev = causes::Evidence::new(
            &graph,
            attribution.then_some(&held),
            rounding.as_ref(),
            range_issues,
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
        verdict.status = crate::report::model::Status::Drift;
    }
    // A fusion cause is settled by rerunning the target with graph optimizations off.
    let fused = verdict
        .culprits
        .iter()
        .any(|c| c.causes.iter().any(|k| k.kind == "fusion"));
    if fused && attribution && wg.is_none() && s.opt_level != OptLevel::Disable {
        let pb = stage(
            s.progress,
            "fusion check: the target with --ort-opt-level disable",
        );
        let mut unfused =
            OrtRunner::new(&lib, s.ep, OptLevel::Disable, target.target_model.clone())?;
        let out = unfused.run(&graph, &inputs)?;
        for c in verdict.culprits.iter_mut() {
            if let (Some(r), Some(t)) = (held.get(&c.value), out.values.get(&c.value)) {
                let rep =
                    analysis::compare_pair(&c.value, Ok(r), Ok(t), &s.tolerance, false, false);
                analysis::fusion::settle(c, &rep);
            }
        }
        tgt_notes.push(
            "a fusion cause was checked by rerunning the target with --ort-opt-level disable"
                .into(),
        );
        pb.finish_and_clear();
    }
    drop(held);
    let coverage = analysis::coverage(&graph, &nodes);
    let compare_ms = ms(t) + compare_time.as_secs_f64() * 1e3;

    let mut notes = inputs.notes.clone();
    if s.precision.is_some() && s.ep == Ep::Cpu && wg.is_none() {
        notes.push(
            "ONNX Runtime's CPU EP runs most fp16/bf16 nodes in fp32 behind casts it inserts (and drops fp32→fp16→fp32 \
             cast pairs), so the graph run keeps fp32 precision between many nodes; a GPU computing in fp16 drifts more. \
             Per-node (introduced) errors and the ideal run store every value in the low precision, as such a device would."
                .into(),
        );
    }
    notes.extend(ref_out.notes.iter().cloned());
    notes.extend(tgt_out.notes.iter().cloned());
    notes.extend(tgt_notes);
    if graph.was_unsorted {
        notes.push("the model's node list is not topologically sorted; phantom sorted it".into());
    }
    let by_dtype: BTreeMap<String, _> = [DType::F32, DType::F16, DType::Bf16, DType::F64]
        .iter()
        .map(|d| (d.name().to_string(), s.tolerance.for_dtype(*d)))
        .collect();
    let report = Report {
        schema: SCHEMA_VERSION.into(),
        phantom_version: env!("CARGO_PKG_VERSION").into(),
        command: s.command.clone(),
        model: ModelSummary {
            path: graph.path.display().to_string(),
            sha256: graph.sha256.clone(),
            ir_version: graph.ir_version,
            opsets: graph
                .opsets
                .iter()
                .map(|(d, v)| {
                    (
                        if d.is_empty() {
                            "ai.onnx".to_string()
                        } else {
                            d.clone()
                        },
                        *v,
                    )
                })
                .collect(),
            producer: graph.producer.clone(),
            nodes: graph.nodes.len(),
            was_unsorted: graph.was_unsorted,
            hidden_values: graph.hidden.clone(),
        },
        conversion,
        target_model: target_graph.map(|g| ModelRef {
            path: g.path.display().to_string(),
            sha256: g.sha256,
        }),
        environment: environment(),
        reference: RunnerInfo {
            name: reference.name(),
            version: reference.version(),
            details: ref_out.details.clone(),
        },
        target: RunnerInfo {
            name: wg
                .as_ref()
                .map(|w| w.name())
                .unwrap_or_else(|| target.name()),
            version: wg
                .as_ref()
                .map(|w| w.version())
                .unwrap_or_else(|| target.version()),
            details: tgt_out.details.clone(),
        },
        tolerance: ToleranceReport {
            atol: s.tolerance.atol,
            rtol: s.tolerance.rtol,
            by_dtype,
        },
        inputs: inputs.summaries.clone(),
        verdict,
        coverage,
        instrumentation: target.instrumentation.clone(),
        nodes,
        timings: Timings {
            import_ms,
            reference_ms,
            target_ms,
            compare_ms,
            total_ms: ms(t_all),
        },
        notes,
    };
    Ok((report, inputs))
}
