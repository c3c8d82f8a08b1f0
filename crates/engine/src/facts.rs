//! Typed facts about what a target actually ran: the runtime and its library, the provider asked for and the one
//! that ran the nodes, the adapter and driver, the compute mode. Reports, golden records and replays read these
//! fields, never keys of a string map.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a node ran when not on the target's device, and why (wgpu target).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct HostPlacement {
    pub kind: HostKind,
    /// The reason in words ("not checked on GPU: no shader for Celu; ran on the CPU ...").
    pub reason: String,
}

/// Why a node ran on the host.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HostKind {
    /// A constant: nothing to compute.
    Constant,
    /// Shape arithmetic or integer values: exact wherever it runs.
    ShapeArithmetic,
    /// Float compute without a shader (for the op or its form): it ran on the CPU through ONNX Runtime in f32, so
    /// its numbers were not checked on the GPU.
    NotCheckedOnGpu,
}

/// What ran, by engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetFacts {
    Ort(OrtFacts),
    Wgpu(WgpuFacts),
}

/// ONNX Runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrtFacts {
    /// `1.31.1`, read from the library.
    pub version: String,
    pub library: String,
    /// `--ort-lib`, `ORT_DYLIB_PATH`, `python onnxruntime-gpu`, `cache (pip)`...
    pub library_source: String,
    /// ONNX Runtime's build string.
    pub build_info: String,
    /// The execution provider asked for (ONNX Runtime's name).
    pub ep_requested: String,
    /// Its `--ep-option` settings.
    pub ep_options: BTreeMap<String, String>,
    /// Where ONNX Runtime placed the nodes (from its session log), or the provider registered with
    /// `error_on_failure` when the log says nothing.
    pub ep_used: String,
    /// Which provider ran which nodes, per provider, from ONNX Runtime's session log (empty when it logged none).
    #[serde(default)]
    pub placement: Vec<Placed>,
    pub opt_level: OptLevel,
    /// Deterministic compute was asked for.
    pub deterministic: bool,
    /// The model ONNX Runtime ran.
    pub model: String,
    /// The custom-op libraries registered with its sessions, each `PATH (where it was found)`.
    #[serde(default)]
    pub custom_op_libraries: Vec<String>,
}

/// The nodes one ONNX Runtime provider ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Placed {
    /// ONNX Runtime's name of the provider (`CPUExecutionProvider`, `ggml`...).
    pub provider: String,
    /// How many nodes of the session's graph (after ONNX Runtime's own fusions) it ran.
    pub count: usize,
    /// `OpType (name)` of each, where ONNX Runtime listed them (it does not when one provider ran every node).
    pub nodes: Vec<String>,
}

/// phantom's wgpu shaders.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WgpuFacts {
    pub adapter: String,
    /// Vulkan, Metal, Dx12.
    pub backend: String,
    /// DiscreteGpu, Cpu (lavapipe)...
    pub device_type: String,
    pub driver: String,
    /// `f32`, `f16 (native)`, `f16 (emulated in f32)`.
    pub compute: String,
    /// `f32` or `f16`.
    pub accumulate: String,
    pub shader_f16: bool,
    pub nodes_on_device: usize,
    pub nodes_on_host: usize,
    pub dispatches: usize,
    /// Nodes whose values exceed the storage-binding limit, computed in slabs (values identical to unsplit runs).
    pub nodes_cut_into_slabs: usize,
    /// The adapter's storage-binding limit in bytes.
    pub max_binding_bytes: u64,
    /// Dispatch, wait-and-read-back and host-node milliseconds.
    pub time_ms: String,
}

impl TargetFacts {
    /// What stands for the runtime's build: ONNX Runtime's build string, or the wgpu driver.
    pub fn build(&self) -> String {
        match self {
            TargetFacts::Ort(o) => o.build_info.clone(),
            TargetFacts::Wgpu(w) => w.driver.clone(),
        }
    }

    /// What was asked for: the provider, or the wgpu compute mode.
    pub fn requested(&self) -> String {
        match self {
            TargetFacts::Ort(o) => o.ep_requested.clone(),
            TargetFacts::Wgpu(w) => format!("wgpu {} · accumulate {}", w.compute, w.accumulate),
        }
    }

    /// What ran: ONNX Runtime's placement, or the adapter.
    pub fn used(&self) -> String {
        match self {
            TargetFacts::Ort(o) => o.ep_used.clone(),
            TargetFacts::Wgpu(w) => format!("{} ({})", w.adapter, w.backend),
        }
    }

    /// ONNX Runtime's optimization level (empty for wgpu).
    pub fn opt_level(&self) -> String {
        match self {
            TargetFacts::Ort(o) => o.opt_level.name().to_string(),
            TargetFacts::Wgpu(_) => String::new(),
        }
    }
}

/// Effect of exposing every intermediate value on ORT's final outputs.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Instrumentation {
    /// True when any final output differs bit for bit between the plain and the instrumented run.
    pub outputs_moved: bool,
    /// Largest absolute change of a final output.
    pub max_abs_change: f64,
    /// The final outputs compared in the verdict come from the plain (uninstrumented) run.
    pub outputs_from_plain_run: bool,
}

/// ONNX Runtime's graph optimization level.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OptLevel {
    Disable,
    Basic,
    Extended,
    All,
}

impl OptLevel {
    /// The name `--ort-opt-level` takes.
    pub fn name(self) -> &'static str {
        match self {
            OptLevel::Disable => "disable",
            OptLevel::Basic => "basic",
            OptLevel::Extended => "extended",
            OptLevel::All => "all",
        }
    }
}

impl crate::Named for OptLevel {
    const ALL: &'static [OptLevel] = &[
        OptLevel::Disable,
        OptLevel::Basic,
        OptLevel::Extended,
        OptLevel::All,
    ];

    fn name(self) -> &'static str {
        OptLevel::name(self)
    }
}
