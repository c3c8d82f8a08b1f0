//! `phantom replay DIR`: runs a saved run again with its inputs and options; says whether the verdict matches and
//! names what changed (environment, inputs, model). Exit 0 when the verdict is reproduced, 1 when it is not.

use super::out::sayln;
use std::path::PathBuf;

use super::args::ReplayArgs;
use super::Outcome;
use crate::golden::{check::environment_changes, Provenance};
use crate::model::inputs::{InputSource, InputSpec};
use crate::pipeline::{compare, RuntimeSpec};

pub fn run(a: ReplayArgs) -> anyhow::Result<Outcome> {
    let saved = crate::replay::load(&a.dir)?;
    let model = PathBuf::from(&saved.model);
    anyhow::ensure!(
        model.exists(),
        "the saved run's model {} no longer exists",
        model.display()
    );
    let mut settings = saved.settings.clone();
    settings.inputs = InputSpec {
        sources: vec![InputSource::TestDataSet(a.dir.join("test_data_set_0"))],
        ..Default::default()
    };
    settings.runtime = RuntimeSpec {
        ort_lib: a.runtime.ort_lib.clone(),
        no_install: a.runtime.no_install,
        ep_library: a.runtime.ep_library.clone(),
    };
    settings.command = std::env::args().collect();
    let (report, inputs) = compare(&settings)?;
    let now = Provenance::from_facts(
        &report.target.name,
        &report.target.version,
        &report.target.details,
        &report.model.sha256,
    );
    sayln!("phantom replay {} ({})", a.dir.display(), saved.model);
    sayln!("target: {}", report.target.label);
    for n in &report.notes {
        sayln!("note: {n}");
    }
    let mut differences = 0;
    for c in environment_changes(&saved.environment, &now) {
        sayln!(
            "environment changed: {}: {} → {}",
            c.what,
            c.recorded,
            c.now
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
            sayln!("input changed: `{name}` differs from the one the run was saved with");
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
        sayln!(
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
        sayln!(
            "verdict differs: saved {}, now {}",
            describe(&saved.status, &saved.first_divergence),
            describe(&report.verdict.status, &report.verdict.first_divergence)
        );
        Ok(Outcome::Diverged)
    }
}
