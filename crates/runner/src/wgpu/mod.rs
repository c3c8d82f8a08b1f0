//! The wgpu target: phantom's own WGSL compute shaders (`shaders/`) run the ONNX graph node by node on a Vulkan,
//! Metal or DX12 adapter (Mesa's lavapipe in software), in f32 or f16 (native `enable f16;` when the adapter offers
//! `SHADER_F16`, otherwise emulated by rounding after every operation), with sums accumulated in f32 or f16.
//!
//! - [`device`]: adapters, `phantom devices`, `--adapter`;
//! - [`shaders`]: the embedded sources and their mode header; [`gpu`]: device, pipeline cache, buffer pool;
//! - [`exec`]: the graph walk; [`ops`]: one file per op family; [`host`]: nodes without a shader, on the CPU.

pub mod ctx;
pub mod device;
pub mod exec;
pub mod gpu;
pub mod host;
pub mod hostops;
mod nodetime;
pub mod ops;
mod readback;
pub mod shaders;
mod slab;
pub mod split;

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::facts::{TargetFacts, WgpuFacts};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::{ort::OrtRunner, ort_lib::Located, RunOutput};
pub use shaders::{Accum, Mode};

pub use crate::spec::F16Mode;

/// The wgpu target's options (`--adapter`, `--precision`, `--accumulate`, `--f16-mode`).
#[derive(Clone, Debug, Default)]
pub struct WgpuOptions {
    pub adapter: Option<String>,
    pub f16: bool,
    pub accumulate_f16: bool,
    pub f16_mode: F16Mode,
}

pub struct WgpuRunner {
    pub gpu: gpu::Gpu,
    host: host::Host,
    /// Node name → where and why it ran on the host; filled by [`WgpuRunner::run`].
    pub placement: HashMap<String, crate::facts::HostPlacement>,
    /// Values f16 could not hold when uploaded (the evidence for `initializer_range` causes).
    pub range_issues: Vec<crate::precision::convert::RangeIssue>,
}

impl WgpuRunner {
    /// Runs `graph` with every node timed (each device node waits for the device, so nothing overlaps): the
    /// output, each node's wall time, and the run's.
    pub fn run_timed(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
    ) -> Result<(RunOutput, Vec<gpu::NodeTime>, u64)> {
        *self.gpu.node_times.borrow_mut() = Some(vec![]);
        let t = std::time::Instant::now();
        let out = self.run(graph, inputs);
        let total = t.elapsed().as_micros() as u64;
        let times = self.gpu.node_times.borrow_mut().take().unwrap_or_default();
        Ok((out?, times, total))
    }

    /// Opens the adapter and device; `lib` gives the ONNX Runtime that runs nodes without a shader.
    pub fn new(opts: &WgpuOptions, lib: &Located) -> Result<WgpuRunner> {
        let adapter = device::pick(opts.adapter.as_deref())?;
        let f16_native = adapter.features().contains(wgpu::Features::SHADER_F16);
        let mode = match (opts.f16, opts.f16_mode) {
            (false, _) => Mode::F32,
            (true, F16Mode::Emulated) => Mode::F16Emulated,
            (true, F16Mode::Native) if !f16_native => {
                return Err(Error::Usage(format!(
                    "--f16-mode native: the adapter {} does not offer SHADER_F16; use --f16-mode emulated",
                    adapter.get_info().name
                )))
            }
            (true, F16Mode::Native) => Mode::F16Native,
            (true, F16Mode::Auto) if f16_native => Mode::F16Native,
            (true, F16Mode::Auto) => Mode::F16Emulated,
        };
        let acc = match opts.accumulate_f16 {
            true => Accum::Storage,
            false => Accum::F32,
        };
        let gpu = gpu::Gpu::open(&adapter, mode, acc)?;
        let ort = OrtRunner::cpu(lib)?;
        Ok(WgpuRunner {
            gpu,
            host: host::Host {
                ort,
                header: crate::model::surgery::Header::with_opsets(vec![]),
                types: HashMap::new(),
                dir: std::env::temp_dir(),
            },
            placement: HashMap::new(),
            range_issues: vec![],
        })
    }
}

impl WgpuRunner {
    fn decode(&mut self, graph: &Graph) -> Result<tract_onnx::pb::ModelProto> {
        let proto = crate::model::import::decode(graph.bytes.as_slice()).map_err(|e| {
            Error::MalformedModel {
                path: graph.path.clone(),
                reason: e.to_string(),
            }
        })?;
        self.host.header = crate::model::surgery::Header::of(&proto);
        if let Some(g) = &proto.graph {
            self.host.types = crate::model::types::infer(g, &HashMap::new());
        }
        Ok(proto)
    }

    /// Every node run once on its own, fed with `reference` values stored as the device stores them; the outputs
    /// by name (the introduced error of each node).
    pub fn run_isolated(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        reference: &dyn crate::spill::Values,
    ) -> Result<HashMap<String, crate::tensor::Tensor>> {
        let proto = self.decode(graph)?;
        let mut out = RunOutput::default();
        crate::error::guard("the wgpu target (each node alone)", || {
            exec::execute(
                &self.gpu,
                &self.host,
                graph,
                &proto,
                inputs,
                &mut out,
                Some(reference),
            )
        })?;
        Ok(out.values)
    }

    /// The element type each float value is stored in on the device (f16 in f16 mode), for the expected noise.
    pub fn rounding(&self, graph: &Graph) -> Result<crate::reference::Rounding> {
        let mut r = crate::isolate::rounding(graph, graph)?;
        if self.gpu.mode.is_f16() {
            for d in r.values_mut() {
                *d = crate::tensor::DType::F16;
            }
        }
        Ok(r)
    }
}

impl WgpuRunner {
    /// What this runner would run on, before any run.
    pub fn idle_facts(&self) -> TargetFacts {
        self.facts(&exec::Placement::default())
    }

    /// What ran: adapter, driver, compute mode, placement and time split.
    fn facts(&self, placed: &exec::Placement) -> TargetFacts {
        let a = &self.gpu.adapter;
        TargetFacts::Wgpu(WgpuFacts {
            adapter: a.name.clone(),
            backend: a.backend.clone(),
            device_type: a.device_type.clone(),
            driver: format!("{} {}", a.driver, a.driver_info).trim().into(),
            compute: self.gpu.mode.describe().into(),
            accumulate: match (self.gpu.acc, self.gpu.mode) {
                (Accum::Storage, Mode::F16Native | Mode::F16Emulated) => "f16",
                _ => "f32",
            }
            .into(),
            shader_f16: a.shader_f16,
            nodes_on_device: placed.device_nodes,
            nodes_on_host: placed.host.len(),
            dispatches: *self.gpu.dispatches.borrow(),
            nodes_cut_into_slabs: *self.gpu.cut_nodes.borrow(),
            max_binding_bytes: self.gpu.max_binding(),
            time_ms: format!(
                "dispatch {:.0}, wait and read back {:.0}, host nodes {:.0}",
                placed.dispatch_ms, placed.wait_read_ms, placed.host_ms
            ),
        })
    }
}

/// The engine's name and version, and one run capturing every value it can.
impl WgpuRunner {
    /// Short name used in reports (`tract-f64`, `onnxruntime`, `wgpu`).
    pub fn name(&self) -> String {
        "wgpu".into()
    }

    /// Version string of the underlying engine.
    pub fn version(&self) -> String {
        format!("wgpu 30.0.1 on {}", self.gpu.adapter.name)
    }

    /// Evaluates `graph` on `inputs`, capturing every value it can.
    pub fn run(&mut self, graph: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        let proto = self.decode(graph)?;
        let mut out = RunOutput::default();
        *self.gpu.cut_nodes.borrow_mut() = 0;
        let placed = crate::error::guard("the wgpu target", || {
            exec::execute(&self.gpu, &self.host, graph, &proto, inputs, &mut out, None)
        })?;
        out.facts = Some(self.facts(&placed));
        let mut unchecked: HashMap<&str, usize> = HashMap::new();
        for (node, why) in &placed.host {
            if why.kind == crate::facts::HostKind::NotCheckedOnGpu {
                let op = graph
                    .nodes
                    .iter()
                    .find(|n| &n.name == node)
                    .map(|n| n.op_type.as_str())
                    .unwrap_or("?");
                *unchecked.entry(op).or_default() += 1;
            }
        }
        if !unchecked.is_empty() {
            let mut ops: Vec<String> = unchecked.iter().map(|(o, n)| format!("{o} ×{n}")).collect();
            ops.sort();
            out.notes.push(format!(
                "wgpu: {} node(s) not checked on GPU (no shader for the op or its form; they ran on the CPU through \
                 ONNX Runtime in f32): {}",
                unchecked.values().sum::<usize>(),
                ops.join(", ")
            ));
        }
        self.placement = placed.host.clone();
        self.range_issues = placed.range_issues;
        out.placement = placed.host;
        Ok(out)
    }
}
