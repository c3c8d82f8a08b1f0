//! `phantom diff`: parses the options, runs [`crate::diff::run`], writes the reports.

use super::args::DiffArgs;
use super::Outcome;
use crate::compare::ToleranceSpec;
use crate::diff::{archive::Limits, naming::Rename, render, DiffOptions};
use crate::error::Error;
use crate::report::json::write_atomic;

fn rules(list: &[String]) -> anyhow::Result<Vec<Rename>> {
    list.iter()
        .map(|s| Rename::parse(s).map_err(|e| Error::Usage(e).into()))
        .collect()
}

fn sums(list: &[String]) -> anyhow::Result<Vec<(String, String, String)>> {
    list.iter()
        .map(|s| {
            let parsed = s.split_once('=').and_then(|(l, z)| {
                let (x, y) = l.split_once('+')?;
                Some((
                    x.trim().to_string(),
                    y.trim().to_string(),
                    z.trim().to_string(),
                ))
            });
            parsed.ok_or_else(|| Error::Usage(format!("--sum `{s}`: expected X+Y=Z")).into())
        })
        .collect()
}

pub fn run(a: DiffArgs) -> anyhow::Result<Outcome> {
    let max_unpacked = crate::fsutil::parse_size(&a.max_unpacked).ok_or_else(|| {
        Error::Usage(format!(
            "--max-unpacked `{}`: expected a size such as 512M or 16G",
            a.max_unpacked
        ))
    })?;
    let opts = DiffOptions {
        a: a.a.clone(),
        b: a.b.clone(),
        rename: rules(&a.rename)?,
        rename_a: rules(&a.rename_a)?,
        rename_b: rules(&a.rename_b)?,
        order: a.order.clone(),
        stages: a.stages.clone(),
        truncate: a.truncate,
        sums: sums(&a.sum)?,
        tolerance: ToleranceSpec {
            atol: a.atol,
            rtol: a.rtol,
            computed_in: None,
        },
        limits: Limits {
            max_unpacked: max_unpacked as u64,
            ..Limits::default()
        },
    };
    let report = crate::diff::run(&opts, std::env::args().collect())?;
    print!("{}", render::terminal(&report, a.show));
    if let Some(p) = &a.json {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        write_atomic(p, text.as_bytes())?;
    }
    if let Some(p) = &a.junit {
        write_atomic(p, render::junit(&report).as_bytes())?;
    }
    if let Some(p) = &a.markdown {
        write_atomic(p, render::markdown(&report).as_bytes())?;
    }
    Ok(if report.verdict.first_divergent.is_some() {
        Outcome::Diverged
    } else {
        Outcome::Clean
    })
}
