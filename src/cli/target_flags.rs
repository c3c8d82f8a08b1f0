//! `--ep` and its options resolved into [`TargetSpec`]s, once, for every command. An option that does not apply
//! to the targets asked for is an error naming it, never ignored.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};

use super::args::{EngineArgs, PrecisionArg};
use crate::pipeline::RuntimeSpec;
use crate::runner::providers::Provider;
use crate::targets::{Engine, OrtSpec, TargetSpec, WgpuSpec};

/// Where ONNX Runtime comes from. `--no-install` also keeps phantom from installing onnxruntime-extensions.
pub fn runtime(e: &EngineArgs) -> RuntimeSpec {
    if e.runtime.no_install {
        phantom_core::pip::forbid();
    }
    RuntimeSpec {
        ort_lib: e.runtime.ort_lib.clone(),
        no_install: e.runtime.no_install,
        ep_library: e.runtime.ep_library.clone(),
    }
}

fn ep_options(list: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    list.iter()
        .map(|o| {
            let (k, v) = o
                .split_once('=')
                .with_context(|| format!("--ep-option takes KEY=VALUE, got `{o}`"))?;
            Ok((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Every target `--ep` names, with the options that apply to it; `keep_fp32` and `model` go to ONNX Runtime.
pub fn specs(
    e: &EngineArgs,
    precision: PrecisionArg,
    keep_fp32: &[String],
    model: Option<PathBuf>,
) -> anyhow::Result<Vec<TargetSpec>> {
    crate::runner::plugins::request(&e.runtime.ep_library)?;
    let wgpu =
        e.ep.iter()
            .filter(|x| x.eq_ignore_ascii_case("wgpu"))
            .count();
    let ort = e.ep.len() - wgpu;
    if wgpu == 0 && (e.accumulate.is_some() || e.adapter.is_some() || e.f16_mode.is_some()) {
        bail!("--accumulate, --adapter and --f16-mode are options of --ep wgpu");
    }
    if ort == 0 {
        if e.ort_opt_level.is_some() || !e.ep_options.is_empty() {
            bail!("--ort-opt-level and --ep-option are options of ONNX Runtime targets, not of --ep wgpu");
        }
        if !keep_fp32.is_empty() {
            bail!(
                "--keep-fp32 belongs to phantom's fp16/bf16 model conversion for ONNX Runtime; --ep wgpu computes \
                 in f16 itself"
            );
        }
    }
    if ort > 1 && !e.ep_options.is_empty() {
        bail!("--ep-option with several ONNX Runtime targets: it would apply to all of them; run them one at a time");
    }
    let options = ep_options(&e.ep_options)?;
    let mut out = vec![];
    for name in &e.ep {
        let engine = if name.eq_ignore_ascii_case("wgpu") {
            Engine::Wgpu(WgpuSpec {
                adapter: e.adapter.clone(),
                accumulate: e.accumulate.unwrap_or_default(),
                f16_mode: e.f16_mode.unwrap_or_default(),
            })
        } else {
            let p = Provider::find(name).with_context(|| {
                format!(
                    "--ep {name}: not a target phantom knows; choose one of {}, or wgpu",
                    Provider::names().join(", ")
                )
            })?;
            let mut o = OrtSpec::new(p.cli);
            o.options = options.clone();
            o.opt_level = e.ort_opt_level.unwrap_or(o.opt_level);
            o.keep_fp32 = keep_fp32.to_vec();
            Engine::Ort(o)
        };
        let model = match engine {
            Engine::Ort(_) => model.clone(),
            Engine::Wgpu(_) => None,
        };
        let spec = TargetSpec {
            engine,
            precision: precision.low(),
            model,
        };
        crate::runner::spec::check(&spec)?;
        out.push(spec);
    }
    if out.iter().any(|s| s.is_wgpu()) && model.is_some() && ort == 0 {
        bail!("--ep wgpu runs MODEL itself (its shaders are the thing under test): --target-model is for ONNX Runtime targets");
    }
    let mut labels: Vec<String> = out.iter().map(TargetSpec::label).collect();
    labels.sort();
    labels.dedup();
    if labels.len() < out.len() {
        bail!("--ep names the same target twice");
    }
    Ok(out)
}

/// The one target of a command that runs one.
pub fn one(
    command: &str,
    e: &EngineArgs,
    precision: PrecisionArg,
    keep_fp32: &[String],
    model: Option<PathBuf>,
) -> anyhow::Result<TargetSpec> {
    let mut all = specs(e, precision, keep_fp32, model)?;
    if all.len() != 1 {
        bail!(
            "--ep given {} times: `phantom {command}` runs one target (only `phantom onnx` compares several)",
            all.len()
        );
    }
    Ok(all.remove(0))
}
