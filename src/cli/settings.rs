//! Arguments resolved into plain settings before any model is touched.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::args::InputArgs;
use crate::model::image::ImageNorm;
use crate::model::inputs::{InputSource, InputSpec};

fn parse_dims(s: &str) -> anyhow::Result<Vec<usize>> {
    s.split(['x', 'X', ','])
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .with_context(|| format!("`{d}` in `{s}` is not a dimension"))
        })
        .collect()
}

/// Refuses a tolerance or budget that is negative, NaN or infinite, naming the flag.
pub fn finite_non_negative(flag: &str, v: f64) -> anyhow::Result<()> {
    if !(v.is_finite() && v >= 0.0) {
        bail!("{flag} must be a finite number ≥ 0, got {v}");
    }
    Ok(())
}

/// Resolves the input arguments into an [`InputSpec`].
pub fn input_spec(a: &InputArgs) -> anyhow::Result<InputSpec> {
    let mut spec = InputSpec {
        seed: a.seed,
        ..Default::default()
    };
    if let Some(r) = &a.val_range {
        let (lo, hi) = r
            .split_once(',')
            .context("--val-range takes LO,HI (e.g. --val-range -1,1)")?;
        let lo: f64 = lo
            .trim()
            .parse()
            .context("--val-range: LO is not a number")?;
        let hi: f64 = hi
            .trim()
            .parse()
            .context("--val-range: HI is not a number")?;
        if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
            bail!("--val-range: LO must be below HI");
        }
        if !(hi - lo).is_finite() {
            bail!("--val-range {r}: give finite bounds whose difference is finite too");
        }
        spec.val_range = Some((lo, hi));
    }
    let mut dims = HashMap::new();
    for d in &a.dims {
        let (k, v) = d
            .split_once('=')
            .with_context(|| format!("--dim takes NAME=VALUE, got `{d}`"))?;
        let n: i64 = v
            .trim()
            .parse()
            .with_context(|| format!("--dim {d}: not an integer"))?;
        if n < 0 {
            bail!("--dim {d}: a dim cannot be negative");
        }
        dims.insert(k.trim().to_string(), n);
    }
    spec.dims = dims;
    spec.past = a.past.unwrap_or(0);
    for s in &a.shapes {
        let (k, v) = s
            .split_once('=')
            .with_context(|| format!("--shape takes INPUT=1x3x224x224, got `{s}`"))?;
        spec.shapes.insert(k.trim().to_string(), parse_dims(v)?);
    }
    for i in &a.inputs {
        let src = match i.split_once('=') {
            Some((name, path)) if crate::model::image::is_image(Path::new(path)) => {
                InputSource::Image {
                    name: name.to_string(),
                    path: PathBuf::from(path),
                }
            }
            Some((name, path)) => InputSource::Npy {
                name: name.to_string(),
                path: PathBuf::from(path),
            },
            None => {
                let p = PathBuf::from(i);
                if p.is_dir() {
                    InputSource::TestDataSet(p)
                } else if p.extension().is_some_and(|e| e == "npz") {
                    InputSource::Npz(p)
                } else if !p.exists() {
                    bail!("--input {i}: no such file or directory");
                } else {
                    bail!(
                        "--input {i}: give NAME=file.npy, a .npz file or a test_data_set directory"
                    );
                }
            }
        };
        if let InputSource::Npy { path, .. }
        | InputSource::Npz(path)
        | InputSource::Image { path, .. } = &src
        {
            if !path.exists() {
                bail!("--input {i}: {} does not exist", path.display());
            }
        }
        spec.sources.push(src);
    }
    spec.image = image_norm(a, &spec.sources)?;
    Ok(spec)
}

/// `--scale`, `--mean`, `--std`, `--bgr`: refused when no input is an image.
fn image_norm(a: &InputArgs, sources: &[InputSource]) -> anyhow::Result<ImageNorm> {
    let mut norm = ImageNorm::default();
    if let Some(s) = a.scale {
        norm.scale = s;
    }
    let list = |flag: &str, v: &str| -> anyhow::Result<Vec<f64>> {
        v.split(',')
            .map(|x| {
                x.trim()
                    .parse::<f64>()
                    .with_context(|| format!("--{flag} {v}: `{x}` is not a number"))
            })
            .collect()
    };
    if let Some(m) = &a.mean {
        norm.mean = list("mean", m)?;
    }
    if let Some(s) = &a.std {
        norm.std = list("std", s)?;
        if norm.std.contains(&0.0) {
            bail!("--std {s}: a standard deviation of 0 divides by zero");
        }
    }
    norm.bgr = a.bgr;
    let all = norm.mean.iter().chain(&norm.std).chain([&norm.scale]);
    if let Some(x) = all.into_iter().find(|x| !x.is_finite()) {
        bail!("--scale/--mean/--std: {x} is not a finite number");
    }
    let images = sources
        .iter()
        .any(|s| matches!(s, InputSource::Image { .. }));
    if !norm.is_default() && !images {
        bail!("--scale, --mean, --std and --bgr apply to image inputs (--input NAME=photo.jpg); none was given");
    }
    Ok(norm)
}

/// What the one-target commands built on a comparison (`reduce`, `plan`) share on their command line.
pub struct OneTarget<'a> {
    pub model: &'a Path,
    pub on_target: &'a super::args_groups::ModelOnTarget,
    pub engine: &'a super::args::EngineArgs,
    pub inputs: &'a InputArgs,
    pub tolerance: super::args::ToleranceArgs,
    pub keep_control_flow: bool,
}

/// The comparison settings of a command that runs one target; `why` says why one (for the refusal).
pub fn one_target(a: OneTarget, why: &str) -> anyhow::Result<crate::pipeline::CompareSettings> {
    a.tolerance.check()?;
    let m = a.on_target;
    let mut targets =
        super::target_flags::specs(a.engine, m.precision, &m.keep_fp32, m.target_model.clone())?;
    anyhow::ensure!(targets.len() == 1, "{why}");
    let mut s = crate::pipeline::CompareSettings::new(a.model.to_path_buf(), targets.remove(0));
    a.tolerance.apply(&mut s.tolerance)?;
    s.inputs = input_spec(a.inputs)?;
    s.runtime = super::target_flags::runtime(a.engine);
    s.keep_control_flow = a.keep_control_flow;
    s.pair_by_name = m.pair_by_name;
    Ok(s)
}

/// Writes `value` as JSON to `path`, or to standard output when `path` is `-`.
pub fn emit_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    Ok(crate::fsutil::write_output(path, text.as_bytes())?)
}
