//! ONNX Runtime as a [`Target`]: the provider and options of the spec, `--target-model` or phantom's fp16/bf16
//! conversion of the model, introduced error from one session of disconnected nodes.

pub mod chunks;
pub mod lowp;
use super::{Capture, Chunks, Engine, Isolated, Reruns, Target, TargetSpec};
use crate::error::{Error, Result};
use crate::facts::{Instrumentation, TargetFacts};
use crate::model::inputs::Inputs;
use crate::model::{self, Graph};
use crate::ort::OrtRunner;
use crate::ort_lib::Located;
use crate::precision::conversion::ConversionReport;
use crate::precision::convert::{ConvertOptions, RangeIssue};
use crate::precision::LowPrecision;
use crate::reference::Rounding;
use crate::spill::Values;
use crate::trace::Run;
use crate::{isolate, RunOutput};
use chunks::CutRuns;

/// The nodes run alone (introduced error) in groups whose values take at most 1/`ISOLATED_SHARE` of
/// [`crate::fsutil::memory_budget`]: the feeds and outputs of one isolated run, beside the reference values held.
const ISOLATED_SHARE: usize = 16;

/// Outputs of nodes run alone, and the nodes left out with the reason.
type IsolatedRun = (
    std::collections::HashMap<String, crate::tensor::Tensor>,
    std::collections::BTreeMap<String, String>,
);

/// ONNX Runtime on one execution provider.
pub struct OrtTarget {
    spec: TargetSpec,
    runner: OrtRunner,
    conversion: Option<ConversionReport>,
    /// A chunked run's state, for the next chunked run to go on from ([`Target::keep_chunks`]).
    cuts: Option<chunks::CutState>,
    /// Whether the next chunked run keeps its state for the one after it.
    keep_next: bool,
    /// The directory holding a converted model's external data, for as long as the target runs it.
    _converted_data: Option<tempfile::TempDir>,
}

impl OrtTarget {
    /// Runs `part`'s nodes alone into `all`. When the group's model fails (a type ONNX Runtime refuses, a kernel
    /// error), its halves are tried, down to single nodes, so a failure leaves only its own node not measured,
    /// with the reason.
    fn isolate_part(
        &self,
        part: &Graph,
        target: &Graph,
        reference: &dyn Values,
        rounding: &Rounding,
        all: &mut Isolated,
    ) {
        match self.isolate_once(part, target, reference, rounding) {
            Ok((values, excluded)) => {
                all.values.extend(values);
                all.excluded.extend(excluded);
            }
            Err(e) if part.nodes.len() == 1 => {
                let why = e.to_string();
                let why = why
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect::<String>();
                all.excluded.insert(
                    part.nodes[0].name.clone(),
                    format!("its run alone failed: {why}"),
                );
            }
            Err(_) => {
                let (a, b) = part.nodes.split_at(part.nodes.len() / 2);
                for half in [a, b] {
                    let g = Graph {
                        nodes: half.to_vec(),
                        ..part.clone()
                    };
                    self.isolate_part(&g, target, reference, rounding, all);
                }
            }
        }
    }

    /// One isolated run of `part`'s nodes: their outputs, and the nodes left out with the reason.
    fn isolate_once(
        &self,
        part: &Graph,
        target: &Graph,
        reference: &dyn Values,
        rounding: &Rounding,
    ) -> Result<IsolatedRun> {
        crate::error::injected("attribution-node")?;
        let iso = isolate::build(part, target, reference)?;
        let values = match iso.graph.nodes.is_empty() {
            true => Default::default(),
            false => isolate::run(&iso, &self.runner, reference, rounding)?,
        };
        Ok((values, iso.excluded.into_iter().collect()))
    }

    /// Opens ONNX Runtime as `spec` says; converts `graph` to fp16/bf16 when it asks.
    pub fn open(spec: &TargetSpec, graph: &Graph, lib: &Located) -> Result<OrtTarget> {
        let Engine::Ort(o) = &spec.engine else {
            return Err(Error::Usage("not an ONNX Runtime target".into()));
        };
        let own = spec.model.as_deref().map(model::load).transpose()?;
        // Random ops draw what the reference's draw: the same hash noise, seeded alike.
        let own = match (own, graph.random_seed) {
            (Some(g), Some(seed)) => Some(model::random::seeded(g, seed, None)?),
            (own, _) => own,
        };
        let own = own.map(|mut g| {
            g.handed_on = graph.handed_on.clone();
            g
        });
        let options = o.options.clone().into_iter().collect();
        let mut runner = OrtRunner::new(lib, crate::spec::provider(o)?, options, o.opt_level, own)?;
        runner.deterministic = o.deterministic;
        let mut t = OrtTarget {
            spec: spec.clone(),
            runner,
            conversion: None,
            cuts: None,
            keep_next: false,
            _converted_data: None,
        };
        if let Some(to) = spec.precision {
            t.convert(graph, to, &o.keep_fp32)?;
        }
        Ok(t)
    }

    /// Runs phantom's conversion of `graph` and makes it the model this target runs.
    fn convert(&mut self, graph: &Graph, to: LowPrecision, keep: &[String]) -> Result<()> {
        if let Some(k) = keep
            .iter()
            .find(|k| !graph.nodes.iter().any(|n| &n.name == *k))
        {
            return Err(Error::Input {
                name: format!("--keep-fp32 {k}"),
                reason: format!(
                    "{} has no node of that name (see `phantom info`)",
                    graph.path.display()
                ),
            });
        }
        let opts = ConvertOptions {
            to,
            keep_nodes: keep.iter().cloned().collect(),
            keep_ops: Default::default(),
        };
        let low = lowp::build(graph, opts, &self.runner)?;
        self.conversion = Some(low.report());
        self._converted_data = low.data_dir;
        self.runner.target_model = Some(low.graph);
        Ok(())
    }
}

impl Target for OrtTarget {
    fn spec(&self) -> &TargetSpec {
        &self.spec
    }

    fn name(&self) -> String {
        self.runner.name()
    }

    fn version(&self) -> String {
        self.runner.version()
    }

    fn own_model(&self) -> Option<&Graph> {
        self.runner.target_model.as_ref()
    }

    fn adopt_model(&mut self, model: Graph) -> Result<()> {
        self.runner.target_model = Some(model);
        Ok(())
    }

    fn run(&mut self, graph: &Graph, inputs: &Inputs, capture: Capture) -> Result<RunOutput> {
        crate::watchdog::engine("ONNX Runtime");
        match capture {
            Capture::Outputs => self.runner.run_plain(graph, inputs),
            Capture::All => self.runner.run(graph, inputs),
            Capture::Names(n) => self.runner.run_names(graph, inputs, n),
        }
    }

    fn run_model(&mut self, model: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        crate::watchdog::engine("ONNX Runtime");
        let own = self.runner.target_model.take();
        let r = self.runner.run_plain(model, inputs);
        self.runner.target_model = own;
        r
    }

    fn profiled(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        runs: usize,
    ) -> Result<(Vec<Run>, String)> {
        crate::watchdog::engine("ONNX Runtime");
        let text = self.runner.profiled(graph, inputs, runs)?;
        let f = self.facts(graph);
        let ran = format!(
            "onnxruntime {} · {} · opt {} · ONNX Runtime's profiler",
            self.version(),
            f.used(),
            f.opt_level()
        );
        Ok((crate::trace::runs(&text)?, ran))
    }

    fn run_isolated(
        &mut self,
        graph: &Graph,
        _inputs: &Inputs,
        reference: &dyn Values,
        rounding: &Rounding,
    ) -> Result<Isolated> {
        let target = self.runner.target_model.as_ref().unwrap_or(graph);
        let limit = crate::fsutil::memory_budget() / ISOLATED_SHARE;
        let parts = isolate::parts(graph, reference, limit);
        let mut all = Isolated {
            group_bytes: limit,
            ..Default::default()
        };
        for part in &parts {
            all.groups += 1;
            self.isolate_part(part, target, reference, rounding, &mut all);
        }
        Ok(all)
    }

    fn chunks<'a>(
        &'a mut self,
        graph: &'a Graph,
        inputs: &'a Inputs,
    ) -> Result<Box<dyn Chunks + 'a>> {
        crate::watchdog::engine("ONNX Runtime");
        let model = self.runner.target_model.as_ref().unwrap_or(graph);
        let keep = std::mem::take(&mut self.keep_next);
        if CutRuns::applies(model) {
            let runner = &mut self.runner;
            let cuts = CutRuns::new(runner, (graph, inputs), &mut self.cuts, keep)?;
            return Ok(Box::new(cuts));
        }
        Ok(Box::new(Reruns {
            target: self,
            graph,
            inputs,
        }))
    }

    fn rounding(&self, graph: &Graph) -> Result<Rounding> {
        isolate::rounding(graph, self.runner.target_model.as_ref().unwrap_or(graph))
    }

    fn facts(&self, graph: &Graph) -> TargetFacts {
        let g = self.runner.target_model.as_ref().unwrap_or(graph);
        self.runner.facts(g, self.runner.placed())
    }

    fn conversion(&self) -> Option<&ConversionReport> {
        self.conversion.as_ref()
    }

    fn range_issues(&self) -> &[RangeIssue] {
        self.conversion
            .as_ref()
            .map(|c| c.range_issues.as_slice())
            .unwrap_or(&[])
    }

    fn instrumentation(&self) -> Option<Instrumentation> {
        self.runner.instrumentation.clone()
    }

    fn reuse_sessions(&mut self) {
        self.runner.reuse = true;
    }

    fn keep_chunks(&mut self) {
        self.keep_next = true;
    }

    fn notes(&self) -> Vec<String> {
        if self.spec.precision.is_none() || self.runner.provider.cli != "cpu" {
            return vec![];
        }
        vec![
            "ONNX Runtime's CPU EP runs most fp16/bf16 nodes in fp32 behind casts it inserts (and drops \
             fp32→fp16→fp32 cast pairs), so the graph run keeps fp32 precision between many nodes; a GPU computing \
             in fp16 drifts more. Per-node (introduced) errors and the ideal run store every value in the low \
             precision, as such a device would."
                .into(),
        ]
    }
}
