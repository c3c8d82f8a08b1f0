//! `phantom replay DIR`: runs a saved run again with its inputs and options; says whether the verdict matches and
//! names what changed (environment, inputs, model). Exit 0 when the verdict is reproduced, 1 when it is not.

use std::path::PathBuf;

use anyhow::Context;

use super::args::{Ep, OptLevel, PrecisionArg, ReplayArgs};
use super::Outcome;
use crate::compare::ToleranceSpec;
use crate::golden::{check::environment_changes, Provenance};
use crate::model::inputs::{InputSource, InputSpec};
use crate::pipeline::{run_compare, CompareSettings};

fn parse<T: clap::ValueEnum>(v: Option<&String>, default: &str) -> anyhow::Result<T> {
    let v = v.map(String::as_str).unwrap_or(default);
    T::from_str(v, true).map_err(|e| anyhow::anyhow!("saved option `{v}`: {e}"))
}

pub fn run(a: ReplayArgs) -> anyhow::Result<Outcome> {
    let saved = crate::replay::load(&a.dir)?;
    let model = PathBuf::from(&saved.model);
    anyhow::ensure!(
        model.exists(),
        "the saved run's model {} no longer exists",
        model.display()
    );
    let num = |k: &str| {
        saved
            .options
            .get(k)
            .map(|v| v.parse::<f64>())
            .transpose()
            .with_context(|| format!("saved option {k}"))
    };
    let precision = parse::<PrecisionArg>(saved.options.get("precision"), "fp32")?.low();
    let wgpu = crate::runner::wgpu::WgpuOptions {
        adapter: saved.options.get("adapter").cloned(),
        f16: precision == Some(crate::precision::LowPrecision::F16),
        accumulate_f16: parse::<super::args::AccumulateArg>(
            saved.options.get("accumulate"),
            "f32",
        )? == super::args::AccumulateArg::F16,
        f16_mode: match parse::<super::args::F16ModeArg>(saved.options.get("f16_mode"), "auto")? {
            super::args::F16ModeArg::Auto => crate::runner::wgpu::F16Mode::Auto,
            super::args::F16ModeArg::Native => crate::runner::wgpu::F16Mode::Native,
            super::args::F16ModeArg::Emulated => crate::runner::wgpu::F16Mode::Emulated,
        },
    };
    let settings = CompareSettings {
        wgpu,
        model,
        target_model: saved.target_model.as_ref().map(PathBuf::from),
        ep: parse::<Ep>(saved.options.get("ep"), "cpu")?,
        opt_level: parse::<OptLevel>(saved.options.get("ort_opt_level"), "all")?,
        tolerance: ToleranceSpec {
            atol: num("atol")?,
            rtol: num("rtol")?,
            computed_in: precision.map(|p| p.dtype()),
        },
        inputs: InputSpec {
            sources: vec![InputSource::TestDataSet(a.dir.join("test_data_set_0"))],
            ..Default::default()
        },
        ort_lib: a.runtime.ort_lib.clone(),
        no_install: a.runtime.no_install,
        command: std::env::args().collect(),
        progress: false,
        heatmaps: false,
        precision,
        max_memory: None,
        slice: None,
        attribution: match saved.options.get("attribution").map(String::as_str) {
            Some("on") => true,
            Some("off") => false,
            _ => precision.is_some(),
        },
        keep_fp32: saved
            .options
            .get("keep_fp32")
            .map(|k| {
                k.split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        save_target_model: None,
    };
    let (report, inputs) = run_compare(&settings)?;
    let now = Provenance::from_details(
        &report.target.name,
        &report.target.version,
        &report.target.details,
        &report.model.sha256,
    );
    println!("phantom replay {} ({})", a.dir.display(), saved.model);
    let mut differences = 0;
    for c in environment_changes(&saved.environment, &now) {
        println!(
            "environment changed: {}: {} → {}",
            c.what, c.recorded, c.now
        );
        differences += 1;
    }
    let hashes: Vec<(String, String)> = inputs
        .tensors
        .iter()
        .map(|(n, t)| {
            (
                n.clone(),
                format!("{:016x}", crate::analysis::determinism::hash(t)),
            )
        })
        .collect();
    for ((name, was), (_, is)) in saved.inputs.iter().zip(&hashes) {
        if was != is {
            println!("input changed: `{name}` differs from the one the run was saved with");
            differences += 1;
        }
    }
    let same = report.verdict.status == saved.status
        && report.verdict.first_divergence == saved.first_divergence;
    let describe =
        |s: &crate::report::model::Status, f: &Option<crate::report::model::NodeRef>| match f {
            Some(f) => {
                format!("{s:?} (first divergence #{} `{}`)", f.node_index, f.node).to_lowercase()
            }
            None => format!("{s:?}").to_lowercase(),
        };
    if same {
        println!(
            "verdict reproduced: {}{}",
            describe(&saved.status, &saved.first_divergence),
            if differences == 0 {
                "; nothing changed"
            } else {
                ""
            }
        );
        Ok(Outcome::Clean)
    } else {
        println!(
            "verdict differs: saved {}, now {}",
            describe(&saved.status, &saved.first_divergence),
            describe(&report.verdict.status, &report.verdict.first_divergence)
        );
        Ok(Outcome::Diverged)
    }
}
