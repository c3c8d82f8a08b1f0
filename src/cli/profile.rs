//! `phantom profile`: per-node time, FLOPs, bytes and memory on the target (see [`crate::profile`]).

use super::out::say;
use anyhow::Context;

use super::args::ProfileArgs;
use super::Outcome;
use crate::pipeline::CompareSettings;
use crate::profile::{profile, render, Profile};
use crate::report::json::write_atomic;

pub fn run(a: ProfileArgs) -> anyhow::Result<Outcome> {
    for (flag, p) in [("--json", &a.json.path), ("--trace", &a.trace)] {
        if let Some(p) = p.as_ref().filter(|p| p.is_dir()) {
            anyhow::bail!(
                "{flag} {}: is a directory; give a file name to write",
                p.display()
            );
        }
    }
    if let Some(d) = a.model_explorer.as_ref().filter(|d| d.exists() && !a.force) {
        anyhow::bail!(
            "--model-explorer {}: already exists; pass --force to replace it",
            d.display()
        );
    }
    let other = a.compare.as_ref().map(|p| load(p)).transpose()?;
    let m = &a.model_on_target;
    let mut targets =
        super::target_flags::specs(&a.engine, m.precision, &m.keep_fp32, m.target_model.clone())?;
    anyhow::ensure!(
        targets.len() == 1,
        "profile measures one target; give one --ep"
    );
    let mut s = CompareSettings::new(a.model.clone(), targets.remove(0));
    s.inputs = super::settings::input_spec(&a.inputs)?;
    s.runtime = super::target_flags::runtime(&a.engine);
    crate::watchdog::stage("profile: target runs");
    let (p, runs) = profile(&s, a.runs as usize)?;
    if let Some(path) = &a.json.path {
        super::settings::emit_json(path, &p)
            .with_context(|| format!("writing the profile to {}", path.display()))?;
    }
    if let Some(path) = &a.trace {
        let bytes = serde_json::to_vec(&render::chrome_trace(&runs, &p))
            .context("serializing the trace")?;
        write_atomic(path, &bytes)
            .with_context(|| format!("writing the trace to {}", path.display()))?;
    }
    if let Some(d) = &a.model_explorer {
        let graph = match &a.model_on_target.target_model {
            Some(t) => crate::model::load(t)?,
            None => crate::model::load(&a.model)?,
        };
        let ids = crate::report::explorer::ids(&graph)?;
        crate::report::explorer::write(
            d,
            a.force,
            &ids,
            &crate::profile::render::overlays(&p, &graph),
        )
        .with_context(|| format!("writing Model Explorer overlays to {}", d.display()))?;
    }
    say!("{}", render::terminal(&p, a.top));
    if let Some(o) = &other {
        say!("\n{}", render::compare(o, &p, a.top));
    }
    Ok(Outcome::Clean)
}

/// A profile saved with `--json`.
fn load(path: &std::path::Path) -> anyhow::Result<Profile> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("--compare {}: cannot read it", path.display()))?;
    let p: Profile = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "--compare {}: not a phantom profile (save one with --json)",
            path.display()
        )
    })?;
    anyhow::ensure!(
        p.schema == crate::profile::SCHEMA,
        "--compare {}: it is `{}`, phantom reads `{}`",
        path.display(),
        p.schema,
        crate::profile::SCHEMA
    );
    Ok(p)
}
