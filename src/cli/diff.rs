//! `phantom diff`: parses the options, runs [`crate::diff::run`], writes the reports.

use super::args::DiffArgs;
use super::out::say;
use super::Outcome;
use crate::compare::ToleranceSpec;
use crate::diff::{archive::Limits, naming::Rename, render, DiffOptions};
use crate::error::Error;

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

/// The diff's options from its arguments.
fn options(a: &DiffArgs) -> anyhow::Result<DiffOptions> {
    let max_unpacked = crate::units::parse_size(&a.max_unpacked).ok_or_else(|| {
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
        tolerance: {
            let mut t = ToleranceSpec::default();
            a.tolerance.apply(&mut t)?;
            t
        },
        limits: Limits {
            max_unpacked: max_unpacked as u64,
            ..Limits::default()
        },
        inspect: a.report.html.is_some(),
    };
    Ok(opts)
}

pub fn run(a: DiffArgs) -> anyhow::Result<Outcome> {
    let opts = options(&a)?;
    let report = crate::diff::run(&opts, std::env::args().collect())?;
    say!("{}", render::terminal(&report, a.show));
    crate::report::emit::write(&report, a.report.outputs())?;
    Ok(if report.verdict.first_divergent.is_some() {
        Outcome::Diverged
    } else {
        Outcome::Clean
    })
}

/// One comparison of `phantom serve`: A, B and the extra options a person typed, into the inspector page.
fn serve_one(
    a: &std::path::Path,
    b: &std::path::Path,
    extra: &str,
    max_unpacked: u64,
) -> Result<String, String> {
    use clap::Parser;
    let mut argv: Vec<String> = vec!["phantom".into(), "diff".into()];
    argv.push(a.to_string_lossy().into_owned());
    argv.push(b.to_string_lossy().into_owned());
    argv.extend(extra.split_whitespace().map(String::from));
    let cli = super::args::Cli::try_parse_from(&argv).map_err(|e| e.to_string())?;
    let super::args::Command::Diff(d) = cli.command else {
        return Err("only diff options are accepted".into());
    };
    if d.report.named().iter().any(|(_, p)| p.is_some()) {
        return Err("options that write files on this machine (--json, --junit, --markdown, --html) are not accepted here".into());
    }
    let mut opts = options(&d).map_err(|e| e.to_string())?;
    opts.inspect = true;
    opts.limits.max_unpacked = opts.limits.max_unpacked.min(max_unpacked);
    let report = crate::diff::run(&opts, argv).map_err(|e| format!("error: {e}"))?;
    Ok(crate::diff::inspect::html(&report))
}

pub fn serve(a: super::args::ServeArgs) -> anyhow::Result<Outcome> {
    let parse = |s: &str, flag: &str| {
        crate::units::parse_size(s)
            .ok_or_else(|| Error::Usage(format!("{flag} `{s}`: expected a size such as 500M")))
    };
    let max_upload = parse(&a.max_upload, "--max-upload")? as u64;
    let max_unpacked = parse(&a.max_unpacked, "--max-unpacked")? as u64;
    let run = move |x: &std::path::Path, y: &std::path::Path, extra: &str| {
        serve_one(x, y, extra, max_unpacked)
    };
    crate::diff::serve::serve(&crate::diff::serve::Serve {
        port: a.port,
        max_upload,
        run: &run,
    })?;
    Ok(Outcome::Clean)
}
