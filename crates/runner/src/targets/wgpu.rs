//! phantom's wgpu shaders as a [`Target`]: the adapter, precision, accumulation and f16 mode of the spec. The
//! executor computes every value on the device; a capture of chosen values keeps only those on the host.

use std::collections::HashSet;

use super::{Capture, Chunks, Engine, Isolated, Reruns, Target, TargetSpec};
use crate::error::{Error, Result};
use crate::facts::TargetFacts;
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::ort_lib::Located;
use crate::precision::convert::RangeIssue;
use crate::precision::LowPrecision;
use crate::reference::Rounding;
use crate::spill::Values;
use crate::trace::{Kernel, Run};
use crate::wgpu::gpu::NodeTime;
use crate::wgpu::{WgpuOptions, WgpuRunner};
use crate::RunOutput;

/// phantom's shaders on one adapter.
pub struct WgpuTarget {
    spec: TargetSpec,
    runner: WgpuRunner,
    /// Facts of the last run.
    last: Option<TargetFacts>,
}

impl WgpuTarget {
    /// Opens the adapter `spec` names (or the best there is) in the mode it asks for.
    pub fn open(spec: &TargetSpec, lib: &Located) -> Result<WgpuTarget> {
        let Engine::Wgpu(w) = &spec.engine else {
            return Err(Error::Usage("not a wgpu target".into()));
        };
        let opts = WgpuOptions {
            adapter: w.adapter.clone(),
            f16: spec.precision == Some(LowPrecision::F16),
            accumulate_f16: w.accumulate == crate::spec::Accumulate::F16,
            f16_mode: w.f16_mode,
        };
        Ok(WgpuTarget {
            spec: spec.clone(),
            runner: WgpuRunner::new(&opts, lib)?,
            last: None,
        })
    }
}

impl Target for WgpuTarget {
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
        None
    }

    fn run(&mut self, graph: &Graph, inputs: &Inputs, capture: Capture) -> Result<RunOutput> {
        let mut out = self.runner.run(graph, inputs)?;
        self.last = out.facts.clone();
        let keep: Option<HashSet<&str>> = match capture {
            Capture::All => None,
            Capture::Outputs => Some(graph.outputs.iter().map(|o| o.name.as_str()).collect()),
            Capture::Names(n) => Some(n.iter().copied().collect()),
        };
        if let Some(keep) = keep {
            out.values.retain(|k, _| keep.contains(&k.as_str()));
            out.missing.retain(|k, _| keep.contains(&k.as_str()));
        }
        Ok(out)
    }

    fn run_isolated(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        reference: &dyn Values,
        _rounding: &Rounding,
    ) -> Result<Isolated> {
        Ok(Isolated {
            values: self.runner.run_isolated(graph, inputs, reference)?,
            groups: 1,
            ..Default::default()
        })
    }

    fn chunks<'a>(
        &'a mut self,
        graph: &'a Graph,
        inputs: &'a Inputs,
    ) -> Result<Box<dyn Chunks + 'a>> {
        // The device computes node by node (nothing fuses across a value), so a run per chunk gives the whole run's
        // values.
        Ok(Box::new(Reruns {
            target: self,
            graph,
            inputs,
        }))
    }

    fn rounding(&self, graph: &Graph) -> Result<Rounding> {
        self.runner.rounding(graph)
    }

    fn facts(&self, _graph: &Graph) -> TargetFacts {
        self.last
            .clone()
            .unwrap_or_else(|| self.runner.idle_facts())
    }

    fn range_issues(&self) -> &[RangeIssue] {
        &self.runner.range_issues
    }

    fn profiled(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        runs: usize,
    ) -> Result<(Vec<Run>, String)> {
        let mut out = vec![];
        let mut ts = 0;
        for _ in 0..runs {
            let (o, times, total) = self.runner.run_timed(graph, inputs)?;
            self.last = o.facts.clone();
            let kernels = times.into_iter().map(|t| self.kernel(t, ts)).collect();
            out.push(Run {
                ts,
                total_us: total,
                executor_us: None,
                kernels,
            });
            ts += total + 1;
        }
        let ran = format!(
            "{} · {} · wall time per node (each device node waits for the device, so nodes do not overlap)",
            self.version(),
            self.facts(graph).used()
        );
        Ok((out, ran))
    }
}

impl WgpuTarget {
    /// A timed node as a profile kernel (element type: the compute mode's float).
    fn kernel(&self, t: NodeTime, run_ts: u64) -> Kernel {
        let (ty, size) = match self.spec.precision {
            Some(LowPrecision::F16) => ("float16", 2),
            _ => ("float", 4),
        };
        let typed = |v: Vec<Vec<usize>>| -> Vec<(String, Vec<u64>)> {
            v.into_iter()
                .map(|d| (ty.to_string(), d.into_iter().map(|x| x as u64).collect()))
                .collect()
        };
        let outputs = typed(t.outputs);
        Kernel {
            node: t.node,
            op_type: t.op_type,
            provider: if t.on_device {
                "wgpu".into()
            } else {
                "host (not on the device)".into()
            },
            ts: run_ts + t.start_us,
            dur_us: t.dur_us,
            inputs: typed(t.inputs),
            output_bytes: outputs
                .iter()
                .map(|(_, d)| size * d.iter().product::<u64>())
                .sum(),
            outputs,
            mem_peak: 0,
        }
    }
}
