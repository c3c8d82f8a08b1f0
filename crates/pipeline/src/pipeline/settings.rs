//! Everything a comparison needs, resolved from the command line before any model is touched. A serde type:
//! `--save-run` stores it whole, so `phantom replay` reruns every option.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::compare::slice::SliceSpec;
use crate::compare::ToleranceSpec;
use crate::model::inputs::InputSpec;
use crate::targets::TargetSpec;

/// Where ONNX Runtime comes from (every target needs it: the wgpu target runs nodes without a shader on it).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RuntimeSpec {
    /// `--ort-lib`.
    pub ort_lib: Option<PathBuf>,
    /// `--no-install`.
    pub no_install: bool,
    /// `--ep-library NAME=PATH`: plugin execution providers.
    #[serde(default)]
    pub ep_library: Vec<String>,
}

/// How the target's values are captured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Strategy {
    /// Every value in one run.
    #[default]
    Whole,
    /// `--max-memory`: values exposed chunk by chunk as the reference streams, peak near `budget` bytes.
    Bounded { budget: usize },
    /// `phantom onnx` without `--max-memory`: whole, unless the run's values would exceed phantom's default budget
    /// ([`crate::fsutil::memory_budget`]); then bounded to it ([`super::memory::resolve`]).
    Auto,
}

/// The settings of `phantom onnx` (and of the commands built on it: `precision`, `replay`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompareSettings {
    pub model: PathBuf,
    /// What the reference is compared with: one target, or several compared with it and with each other.
    pub targets: Vec<TargetSpec>,
    pub tolerance: ToleranceSpec,
    pub inputs: InputSpec,
    #[serde(skip)]
    pub runtime: RuntimeSpec,
    pub strategy: Strategy,
    /// Introduced-vs-inherited error and expected noise.
    pub attribution: bool,
    /// Run every node alone (`--attribute-all`), not only those whose values fail or may be anomalous.
    #[serde(default)]
    pub attribute_all: bool,
    /// Run the expected-noise run on every run (`--expected-noise always`), not only where the verdict may need it.
    #[serde(default)]
    pub noise_always: bool,
    /// A whole run whose first pass goes without the expected noise, though holding everything that needs would
    /// exceed this budget: should a value fail, the comparison runs again bounded to it ([`super::memory::resolve`]).
    #[serde(skip)]
    pub bounded_after_failure: Option<usize>,
    /// Compare only this slice of each tensor (`--slice`).
    pub slice: Option<SliceSpec>,
    /// Draw |t − r| heatmaps (for the HTML report).
    pub heatmaps: bool,
    /// `--dump DIR` (and whether `--force` replaces it): every compared value of both sides as `.npy`.
    #[serde(skip)]
    pub dump: Option<(PathBuf, bool)>,
    /// Where to write the model the target runs (`--save-target-model`).
    #[serde(skip)]
    pub save_target_model: Option<PathBuf>,
    /// `--steps N`: decoding steps, each side fed its own KV cache (1: one forward pass).
    #[serde(default)]
    pub steps: usize,
    /// `--keep-control-flow`: If/Loop nodes run as the file has them (no inlining or unrolling).
    #[serde(default)]
    pub keep_control_flow: bool,
    /// `--pair-by-name`: a `--target-model`'s values paired by name only, not by value ([`super::paired`]).
    #[serde(default)]
    pub pair_by_name: bool,
    /// Keep the reference's own discrete decisions instead of adopting the target's within the noise.
    #[serde(default)]
    pub own_decisions: bool,
    /// The command line, recorded in the report.
    #[serde(skip)]
    pub command: Vec<String>,
    /// Show spinners on stderr.
    #[serde(skip)]
    pub progress: bool,
    /// `--accept-incomplete`: a passing run that could not compare many values is not [`Status::Incomplete`].
    ///
    /// [`Status::Incomplete`]: crate::report::model::Status::Incomplete
    #[serde(default)]
    pub accept_incomplete: bool,
}

impl CompareSettings {
    /// Settings with defaults for everything but the model and the target.
    pub fn new(model: PathBuf, target: TargetSpec) -> CompareSettings {
        CompareSettings {
            model,
            tolerance: ToleranceSpec {
                computed_in: target.precision.map(|p| p.dtype()),
                ..Default::default()
            },
            targets: vec![target],
            inputs: InputSpec::default(),
            runtime: RuntimeSpec::default(),
            strategy: Strategy::Whole,
            attribution: false,
            attribute_all: false,
            noise_always: false,
            bounded_after_failure: None,
            slice: None,
            heatmaps: false,
            save_target_model: None,
            keep_control_flow: false,
            pair_by_name: false,
            own_decisions: false,
            steps: 1,
            dump: None,
            command: std::env::args().collect(),
            progress: false,
            accept_incomplete: false,
        }
    }

    /// The first target (the only one, for every command but `phantom onnx` with several `--ep`).
    pub fn target(&self) -> &TargetSpec {
        &self.targets[0]
    }

    /// The first target, to change.
    pub fn target_mut(&mut self) -> &mut TargetSpec {
        &mut self.targets[0]
    }

    /// The memory budget of `--max-memory`, when bounded.
    pub fn budget(&self) -> Option<usize> {
        match self.strategy {
            Strategy::Bounded { budget } => Some(budget),
            Strategy::Whole | Strategy::Auto => None,
        }
    }
}
