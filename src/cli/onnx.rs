//! `phantom onnx`: compare every intermediate of a model between the f64 reference and ONNX Runtime.

use std::io::IsTerminal;

use anyhow::Context;

use super::args::OnnxArgs;
use super::Outcome;
use crate::compare::ToleranceSpec;
use crate::pipeline::{run_compare, CompareSettings};
use crate::report::model::Status;
use crate::report::{json, terminal};

fn check_tolerance(name: &str, v: Option<f64>) -> anyhow::Result<()> {
    match v {
        Some(x) if !(x >= 0.0 && x.is_finite()) => {
            anyhow::bail!("--{name} must be a finite number ≥ 0, got {x}")
        }
        _ => Ok(()),
    }
}

/// Options that belong to one kind of target are refused on the other, rather than silently ignored.
fn check_target_options(a: &OnnxArgs) -> anyhow::Result<()> {
    use super::args::{AccumulateArg, F16ModeArg, PrecisionArg};
    let wgpu = a.ep == super::args::Ep::Wgpu;
    if wgpu {
        if a.precision == PrecisionArg::Bf16 {
            anyhow::bail!("--ep wgpu computes in fp32 or fp16; bf16 is for ONNX Runtime targets");
        }
        if !a.keep_fp32.is_empty() || a.save_target_model.is_some() {
            anyhow::bail!(
                "--keep-fp32 and --save-target-model belong to phantom's fp16/bf16 model conversion for ONNX Runtime; \
                 --ep wgpu computes in f16 itself"
            );
        }
        if a.accumulate == AccumulateArg::F16 && a.precision != PrecisionArg::Fp16 {
            anyhow::bail!("--accumulate f16 needs --precision fp16 (in fp32 every sum is f32)");
        }
    } else if a.accumulate != AccumulateArg::F32
        || a.adapter.is_some()
        || a.f16_mode != F16ModeArg::Auto
    {
        anyhow::bail!("--accumulate, --adapter and --f16-mode are options of --ep wgpu");
    }
    Ok(())
}

pub fn run(a: OnnxArgs) -> anyhow::Result<Outcome> {
    check_tolerance("atol", a.atol)?;
    check_tolerance("rtol", a.rtol)?;
    check_target_options(&a)?;
    if let Some(p) = &a.json {
        if p.is_dir() {
            anyhow::bail!("--json {}: is a directory; give a file name", p.display());
        }
    }
    let settings = CompareSettings {
        model: a.model.clone(),
        target_model: a.target_model.clone(),
        ep: a.ep,
        opt_level: a.ort_opt_level,
        tolerance: ToleranceSpec {
            atol: a.atol,
            rtol: a.rtol,
            computed_in: a.precision.low().map(|p| p.dtype()),
        },
        inputs: super::settings::input_spec(&a.inputs)?,
        ort_lib: a.runtime.ort_lib.clone(),
        no_install: a.runtime.no_install,
        command: std::env::args().collect(),
        progress: std::io::stderr().is_terminal() && !a.quiet,
        heatmaps: a.html.is_some(),
        precision: a.precision.low(),
        slice: a
            .slice
            .as_deref()
            .map(|sp| {
                crate::compare::slice::SliceSpec::parse(sp)
                    .map_err(|e| anyhow::anyhow!("--slice {sp}: {e}"))
            })
            .transpose()?,
        max_memory: a
            .max_memory
            .as_deref()
            .map(|m| {
                crate::bounded::parse_size(m)
                    .with_context(|| format!("--max-memory {m}: not a size (try 2GiB or 512MiB)"))
            })
            .transpose()?,
        attribution: match a.attribution {
            super::args::Switch::On => true,
            super::args::Switch::Off => false,
            super::args::Switch::Auto => a.precision.low().is_some(),
        },
        keep_fp32: a.keep_fp32.clone(),
        save_target_model: a.save_target_model.clone(),
        wgpu: crate::runner::wgpu::WgpuOptions {
            adapter: a.adapter.clone(),
            f16: a.precision == super::args::PrecisionArg::Fp16,
            accumulate_f16: a.accumulate == super::args::AccumulateArg::F16,
            f16_mode: match a.f16_mode {
                super::args::F16ModeArg::Auto => crate::runner::wgpu::F16Mode::Auto,
                super::args::F16ModeArg::Native => crate::runner::wgpu::F16Mode::Native,
                super::args::F16ModeArg::Emulated => crate::runner::wgpu::F16Mode::Emulated,
            },
        },
    };
    if let Some(d) = &a.save_run {
        if d.exists() && !a.force {
            anyhow::bail!(
                "--save-run {}: already exists; pass --force to replace it",
                d.display()
            );
        }
    }
    if a.bisect {
        if a.ep == super::args::Ep::Wgpu {
            anyhow::bail!(
                "--bisect probes ONNX Runtime targets; the wgpu target already exposes every value"
            );
        }
        return bisect(&settings, a.json.as_deref());
    }
    let (report, inputs) = run_compare(&settings)?;
    if let Some(d) = &a.save_run {
        let mut options = std::collections::BTreeMap::new();
        options.insert("ep".to_string(), format!("{:?}", a.ep).to_lowercase());
        options.insert(
            "ort_opt_level".to_string(),
            format!("{:?}", a.ort_opt_level).to_lowercase(),
        );
        options.insert(
            "precision".to_string(),
            format!("{:?}", a.precision).to_lowercase(),
        );
        options.insert(
            "attribution".to_string(),
            format!("{:?}", a.attribution).to_lowercase(),
        );
        if !a.keep_fp32.is_empty() {
            options.insert("keep_fp32".into(), a.keep_fp32.join(","));
        }
        if a.ep == super::args::Ep::Wgpu {
            options.insert(
                "accumulate".into(),
                format!("{:?}", a.accumulate).to_lowercase(),
            );
            options.insert(
                "f16_mode".into(),
                format!("{:?}", a.f16_mode).to_lowercase(),
            );
            if let Some(ad) = &a.adapter {
                options.insert("adapter".into(), ad.clone());
            }
        }
        if let Some(v) = a.atol {
            options.insert("atol".into(), v.to_string());
        }
        if let Some(v) = a.rtol {
            options.insert("rtol".into(), v.to_string());
        }
        let run = crate::replay::SavedRun::from_report(&report, options, &inputs.tensors);
        crate::replay::save(d, &run, &inputs.tensors, a.force)?;
    }
    if let Some(p) = &a.json {
        json::write(&report, p)
            .with_context(|| format!("writing the JSON report to {}", p.display()))?;
    }
    if let Some(p) = &a.junit {
        json::write_atomic(p, crate::report::junit::from_report(&report).as_bytes())
            .with_context(|| format!("writing the JUnit report to {}", p.display()))?;
    }
    if let Some(p) = &a.summary_md {
        json::write_atomic(p, crate::report::markdown::render(&report).as_bytes())
            .with_context(|| format!("writing the Markdown summary to {}", p.display()))?;
    }
    if let Some(p) = &a.html {
        json::write_atomic(p, crate::report::html::render(&report).as_bytes())
            .with_context(|| format!("writing the HTML report to {}", p.display()))?;
    }
    if let Some(p) = &a.dot {
        let graph = crate::model::load(&a.model)?;
        json::write_atomic(p, crate::report::dot::render(&report, &graph).as_bytes())
            .with_context(|| format!("writing the DOT graph to {}", p.display()))?;
    }
    if a.quiet {
        println!("{}", terminal::verdict_line(&report));
    } else {
        print!("{}", terminal::render(&report, a.top));
        if let Some(p) = &a.json {
            println!("JSON report: {}", p.display());
        }
    }
    if std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true") {
        if let Some(f) = &report.verdict.first_divergence {
            println!(
                "::error title=phantom drift::first divergence at node #{} {} `{}` (value `{}`)",
                f.node_index, f.op_type, f.node, f.value
            );
        }
    }
    Ok(if report.verdict.status == Status::Clean {
        Outcome::Clean
    } else {
        Outcome::Diverged
    })
}

fn bisect(settings: &CompareSettings, json: Option<&std::path::Path>) -> anyhow::Result<Outcome> {
    let r = crate::bisect::bisect(settings)?;
    println!(
        "phantom --bisect {}: {} target run(s) over {} value(s) on the path to the first failing output",
        r.model, r.target_runs, r.candidates
    );
    for p in &r.probes {
        println!(
            "  probe #{} {} `{}` → `{}`: {:?}{}",
            p.node_index,
            p.op_type,
            p.node,
            p.value,
            p.status,
            p.tolerance_used
                .map(|u| format!(" ({} of its tolerance)", terminal::num(u)))
                .unwrap_or_default()
        );
    }
    if let Some(p) = json {
        let bytes = serde_json::to_vec_pretty(&r).context("serializing the bisect report")?;
        json::write_atomic(p, &bytes)?;
    }
    match &r.first_divergence {
        Some(f) => {
            println!(
                "first divergence: node #{} {} `{}` (value `{}`)",
                f.node_index, f.op_type, f.node, f.value
            );
            Ok(Outcome::Diverged)
        }
        None => {
            println!("clean: the outputs are within tolerance");
            Ok(Outcome::Clean)
        }
    }
}
