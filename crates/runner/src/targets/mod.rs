//! Targets: what phantom compares with the f64 reference. A [`TargetSpec`] is resolved once from the command
//! line; [`open`] turns it into a [`Target`], the one interface every command uses, so no command can run a target
//! other than the one asked for.
//!
//! - [`spec`]: the serde settings of a target and the combinations refused;
//! - [`ort`]: ONNX Runtime on an execution provider (with phantom's fp16/bf16 conversion, `--target-model`);
//! - [`wgpu`]: phantom's WGSL shaders.

pub mod ort;

pub mod wgpu;

use std::collections::HashMap;

use crate::error::Result;
use crate::facts::{Instrumentation, TargetFacts};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::ort_lib::Located;
use crate::precision::conversion::ConversionReport;
use crate::precision::convert::RangeIssue;
use crate::reference::Rounding;
pub use crate::spec::{Engine, OrtSpec, TargetSpec, WgpuSpec};
use crate::spill::Values;
use crate::tensor::Tensor;
use crate::trace::Run;
use crate::RunOutput;

/// Which values a run hands back.
#[derive(Clone, Copy, Debug)]
pub enum Capture<'a> {
    /// The model as it is: its declared outputs only.
    Outputs,
    /// Every value (ONNX Runtime also runs the unmodified model, so the outputs are the uninstrumented ones).
    All,
    /// Only these values (bounded memory, bisection).
    Names(&'a [&'a str]),
}

/// The outputs of every node run alone on the reference's values (introduced error).
#[derive(Debug, Default)]
pub struct Isolated {
    pub values: HashMap<String, Tensor>,
    /// Nodes whose introduced error could not be measured, with the reason (control-flow bodies, inputs the
    /// reference lacks, a run alone that failed).
    pub excluded: std::collections::BTreeMap<String, String>,
    /// Runs the nodes were split into to bound memory, and the bytes of values each was held to (0: not split).
    pub groups: usize,
    pub group_bytes: usize,
}

impl Isolated {
    /// Adds the nodes of another run alone (a later group).
    pub fn absorb(&mut self, other: Isolated) {
        self.values.extend(other.values);
        self.excluded.extend(other.excluded);
        self.groups += other.groups;
        self.group_bytes = self.group_bytes.max(other.group_bytes);
    }

    /// What the report should say: nodes not measured, and groups when the nodes ran in more than one.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = vec![];
        if !self.excluded.is_empty() {
            notes.push(format!(
                "introduced error not measured for {} node(s): {}",
                self.excluded.len(),
                excluded_by_reason(&self.excluded)
            ));
        }
        if self.groups > 1 {
            notes.push(format!(
                "introduced error: the nodes ran alone in {} groups of about {} of values each, not all at once",
                self.groups,
                crate::units::fmt_size(self.group_bytes)
            ));
        }
        notes
    }
}

/// `reason (n node(s): a, b, c…)` per reason, commonest first.
fn excluded_by_reason(excluded: &std::collections::BTreeMap<String, String>) -> String {
    let mut by: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (node, why) in excluded {
        by.entry(why).or_default().push(node);
    }
    let mut groups: Vec<(&str, Vec<&str>)> = by.into_iter().collect();
    groups.sort_by_key(|(_, nodes)| std::cmp::Reverse(nodes.len()));
    groups
        .iter()
        .map(|(why, nodes)| {
            let more = if nodes.len() > 3 { "…" } else { "" };
            let named: Vec<String> = nodes.iter().take(3).map(|n| format!("`{n}`")).collect();
            format!("{why} ({}: {}{more})", nodes.len(), named.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Values asked for chunk by chunk, in the order the reference computes them (bounded memory).
pub trait Chunks {
    /// The target's values of `names`, by name (a value the target did not produce is absent).
    fn next(&mut self, names: &[&str]) -> Result<HashMap<String, Tensor>>;
    /// What the report should say about how the chunks ran (a fallback taken).
    fn notes(&self) -> Vec<String> {
        vec![]
    }
    /// How the target ran to give the chunks so far, for the bounded run's note.
    fn ran(&self) -> String {
        "the target ran the whole model once per chunk, exposing that chunk's values".into()
    }
}

/// Each chunk a run of the whole model exposing only that chunk's values.
pub struct Reruns<'a> {
    pub target: &'a mut dyn Target,
    pub graph: &'a Graph,
    pub inputs: &'a Inputs,
}

impl Chunks for Reruns<'_> {
    fn next(&mut self, names: &[&str]) -> Result<HashMap<String, Tensor>> {
        Ok(self
            .target
            .run(self.graph, self.inputs, Capture::Names(names))?
            .values)
    }
}

/// One target: an engine that computes the model's values in its own precision.
pub trait Target {
    /// What was asked for.
    fn spec(&self) -> &TargetSpec;
    /// `onnxruntime` or `wgpu`.
    fn name(&self) -> String;
    /// The engine's version (`1.31.1`; `wgpu 30.0.1 on llvmpipe`).
    fn version(&self) -> String;
    /// The model the target runs when it is not the reference's (`--target-model`, the fp16/bf16 conversion).
    fn own_model(&self) -> Option<&Graph>;
    /// Runs `model` from now on in place of its own (`--target-model` with its values renamed to the reference
    /// values they equal, `phantom_pipeline::equiv::renamed`); an engine that runs no model of its own refuses.
    fn adopt_model(&mut self, model: Graph) -> Result<()> {
        Err(crate::error::Error::Usage(format!(
            "{} runs no model of its own, so it cannot run {}",
            self.name(),
            model.path.display()
        )))
    }
    /// Runs the model on `inputs`, handing back what `capture` asks for, and what ran.
    fn run(&mut self, graph: &Graph, inputs: &Inputs, capture: Capture) -> Result<RunOutput>;
    /// Runs `model` exactly as given (not converted, not the target's own model); its declared outputs. How
    /// `phantom reduce` runs a subgraph cut out of the model the target runs.
    fn run_model(&mut self, model: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        self.run(model, inputs, Capture::Outputs)
    }
    /// Runs the model `runs` times with each node timed: the runs, and what ran.
    fn profiled(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        runs: usize,
    ) -> Result<(Vec<Run>, String)>;
    /// Every node once on its own, fed with `reference` values stored as the target stores them.
    fn run_isolated(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        reference: &dyn Values,
        rounding: &Rounding,
    ) -> Result<Isolated>;
    /// Its values chunk by chunk (bounded memory).
    fn chunks<'a>(
        &'a mut self,
        graph: &'a Graph,
        inputs: &'a Inputs,
    ) -> Result<Box<dyn Chunks + 'a>>;
    /// The element type the target stores each float value in (the expected-noise run rounds to it).
    fn rounding(&self, graph: &Graph) -> Result<Rounding>;
    /// What ran, for runs that did not go through [`Target::run`] with [`Capture::All`].
    fn facts(&self, graph: &Graph) -> TargetFacts;
    /// phantom's fp16/bf16 conversion, when the target runs one.
    fn conversion(&self) -> Option<&ConversionReport> {
        None
    }
    /// Values the target's precision cannot hold (initializers stored as ±inf or 0).
    fn range_issues(&self) -> &[RangeIssue] {
        &[]
    }
    /// Whether exposing every value moved the outputs (ONNX Runtime), after a [`Capture::All`] run.
    fn instrumentation(&self) -> Option<Instrumentation> {
        None
    }
    /// Keep sessions between runs (repeated runs in one session); by default each run builds its own.
    fn reuse_sessions(&mut self) {}
    /// The next chunked run ([`Target::chunks`]) keeps what it computed for the one after it, on the same model
    /// and inputs, to go on from instead of running those nodes again (by default each starts afresh).
    fn keep_chunks(&mut self) {}
    /// Notes the report should carry about how this target computes.
    fn notes(&self) -> Vec<String> {
        vec![]
    }
}

/// One engine phantom compares with the reference: which specs it runs, the checks of a spec that need no
/// runtime, and how it opens one. Adding an engine is a module behind [`Target`] and a row of [`ENGINES`].
pub struct EngineRow {
    /// The engine's name (`onnxruntime`, `wgpu`).
    pub name: &'static str,
    /// Whether a spec's engine is this one.
    pub runs: fn(&Engine) -> bool,
    /// Refuses a spec this engine cannot honour anywhere (an unknown provider, options it refuses).
    pub check: fn(&TargetSpec) -> Result<()>,
    /// Opens the engine for `graph` (the reference's model), failing, with what to install or change, where it
    /// cannot run here.
    pub open: fn(&TargetSpec, &Graph, &Located) -> Result<Box<dyn Target>>,
}

/// The engines, one row each.
pub const ENGINES: &[EngineRow] = &[
    EngineRow {
        name: "onnxruntime",
        runs: |e| matches!(e, Engine::Ort(_)),
        check: crate::spec::check,
        open: |spec, graph, lib| Ok(Box::new(ort::OrtTarget::open(spec, graph, lib)?)),
    },
    EngineRow {
        name: "wgpu",
        runs: |e| matches!(e, Engine::Wgpu(_)),
        check: crate::spec::check,
        open: |spec, _, lib| Ok(Box::new(wgpu::WgpuTarget::open(spec, lib)?)),
    },
];

/// Opens the target `spec` describes for `graph` (the reference's model): loads `--target-model`, converts to
/// fp16/bf16 where asked, opens the adapter. Fails, naming what to install or change, when it cannot be honoured.
pub fn open(spec: &TargetSpec, graph: &Graph, lib: &Located) -> Result<Box<dyn Target>> {
    let row = (ENGINES.iter())
        .find(|r| (r.runs)(&spec.engine))
        .expect("every engine of a spec has a row");
    (row.check)(spec)?;
    (row.open)(spec, graph, lib)
}

#[cfg(test)]
mod tests {
    /// Each engine of a spec has exactly one row.
    #[test]
    fn each_engine_has_one_row() {
        use super::{Engine, OrtSpec, WgpuSpec, ENGINES};
        let engines = [
            Engine::Ort(OrtSpec::new("cpu")),
            Engine::Wgpu(WgpuSpec::default()),
        ];
        for e in &engines {
            let rows = ENGINES.iter().filter(|r| (r.runs)(e)).count();
            assert_eq!(rows, 1, "{e:?}");
        }
        assert_eq!(ENGINES.len(), engines.len());
    }
}
