//! `phantom onnx`: compare every intermediate of a model between the f64 reference and ONNX Runtime.

use super::out::{say, sayln};
use std::io::IsTerminal;

use anyhow::Context;

use super::args::OnnxArgs;
use super::Outcome;
use crate::pipeline::{compare_samples, compare_targets, CompareSettings, Strategy};
use crate::report::{json, terminal};

pub fn run(a: OnnxArgs) -> anyhow::Result<Outcome> {
    a.tolerance.check()?;
    refuse_directories(&a)?;
    let settings = settings(&a)?;
    refuse_existing(&a)?;
    if a.bisect {
        refuse_with_bisect(&a)?;
        return bisect(&settings, a.report.json.path.as_deref());
    }
    anyhow::ensure!(
        a.samples <= 1 || a.dump.is_none(),
        "--dump writes one run's values; with --samples each sample is a run: drop one (or dump with --seed K)"
    );
    if settings.targets.len() > 1 {
        return several(&a, &settings);
    }
    anyhow::ensure!(
        a.steps <= 1 || (a.samples <= 1 && a.dump.is_none() && a.save_run.is_none()),
        "--steps runs several passes of one input sample: drop --samples, --dump and --save-run"
    );
    let (report, inputs) = match a.steps > 1 {
        true => crate::pipeline::compare_steps(&settings)?,
        false => compare_samples(&settings)?,
    };
    if let Some(d) = &a.save_run {
        let run = crate::replay::SavedRun::from_report(&report, &settings, &inputs.tensors);
        crate::replay::save(d, &run, &inputs.tensors, a.force)?;
    }
    crate::report::emit::write(&report, a.report.outputs())?;
    write_graph_views(&a, &report)?;
    print_summary(&a, &report);
    Ok(match report.verdict.status.fails(a.strict) {
        false => Outcome::Clean,
        true => Outcome::Diverged,
    })
}

/// Refuses an output file flag given a directory.
fn refuse_directories(a: &OnnxArgs) -> anyhow::Result<()> {
    let [json, junit, md, html] = a.report.named();
    let outputs = [
        json,
        junit,
        md,
        html,
        ("--dot", &a.dot),
        ("--save-target-model", &a.save_target_model),
    ];
    for (flag, p) in outputs {
        if let Some(p) = p.as_ref().filter(|p| p.is_dir()) {
            anyhow::bail!(
                "{flag} {}: is a directory; give a file name to write",
                p.display()
            );
        }
    }
    Ok(())
}

/// Refuses to replace an existing `--save-run` or `--model-explorer` directory without `--force`.
fn refuse_existing(a: &OnnxArgs) -> anyhow::Result<()> {
    for (flag, d) in [
        ("--save-run", &a.save_run),
        ("--model-explorer", &a.model_explorer),
    ] {
        if let Some(d) = d.as_ref().filter(|d| d.exists() && !a.force) {
            anyhow::bail!(
                "{flag} {}: already exists; pass --force to replace it",
                d.display()
            );
        }
    }
    Ok(())
}

/// Refuses the options `--bisect` cannot combine with: it probes one value of one forward pass per run.
fn refuse_with_bisect(a: &OnnxArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.dump.is_none(),
        "--bisect exposes one value per run; --dump needs a whole run: drop one"
    );
    anyhow::ensure!(
        a.samples <= 1,
        "--bisect probes one input sample; drop --samples (or run --bisect with --seed K for sample K)"
    );
    anyhow::ensure!(
        a.steps <= 1,
        "--bisect probes one forward pass: drop --steps"
    );
    Ok(())
}

/// Writes the DOT graph and the Model Explorer overlays where a path is given.
fn write_graph_views(a: &OnnxArgs, report: &crate::report::model::Report) -> anyhow::Result<()> {
    if let Some(p) = &a.dot {
        let graph = crate::model::load(&a.model)?;
        json::write_atomic(p, crate::report::dot::render(report, &graph).as_bytes())
            .with_context(|| format!("writing the DOT graph to {}", p.display()))?;
    }
    if let Some(d) = &a.model_explorer {
        use crate::report::explorer;
        let graph = crate::model::load(&a.model)?;
        let ids = explorer::ids(&graph)?;
        let overlays = explorer::from_report(report);
        let mut each: Vec<(&explorer::Ids, &explorer::Overlay)> =
            overlays.iter().map(|o| (&ids, o)).collect();
        let theirs = target_overlays(report)?;
        each.extend(
            theirs
                .iter()
                .flat_map(|(ids, os)| os.iter().map(move |o| (ids, o))),
        );
        explorer::write_each(d, a.force, &each)
            .with_context(|| format!("writing Model Explorer overlays to {}", d.display()))?;
    }
    Ok(())
}

/// With a `--target-model` paired by value: the same overlays over the target model (`target_*.json`), each value's
/// datum on the node of the target model that computes it.
fn target_overlays(
    report: &crate::report::model::Report,
) -> anyhow::Result<
    Option<(
        crate::report::explorer::Ids,
        Vec<crate::report::explorer::Overlay>,
    )>,
> {
    use crate::report::explorer;
    let Some((t, pairing)) =
        (report.target_model.as_ref()).and_then(|t| t.pairing.as_ref().map(|p| (t, p)))
    else {
        return Ok(None);
    };
    let ids =
        explorer::ids(&crate::model::load(std::path::Path::new(&t.path))?)?.under(&pairing.renamed);
    let overlays = (explorer::from_report(report).into_iter())
        .map(|mut o| {
            o.file = format!("target_{}", o.file);
            o
        })
        .collect();
    Ok(Some((ids, overlays)))
}

/// Prints the verdict line or the full summary, and on GitHub Actions an error annotation at the first divergence.
fn print_summary(a: &OnnxArgs, report: &crate::report::model::Report) {
    if a.quiet {
        sayln!("{}", terminal::verdict_line(report));
    } else {
        say!("{}", terminal::render(report, a.top));
        if let Some(p) = a.report.json.path.as_ref().filter(|p| p.as_os_str() != "-") {
            sayln!("JSON report: {}", p.display());
        }
    }
    if std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true") {
        if let Some(f) = &report.verdict.first_divergence {
            sayln!(
                "::error title=phantom drift::first divergence at node #{} {} `{}` (value `{}`)",
                f.node_index,
                f.op_type,
                f.node,
                f.value
            );
        }
    }
}

fn bisect(settings: &CompareSettings, json: Option<&std::path::Path>) -> anyhow::Result<Outcome> {
    let r = crate::bisect::bisect(settings)?;
    sayln!(
        "phantom --bisect {} on {} ({}): {} target run(s) over {} value(s) on the path to the first failing output",
        r.model, r.target, r.ran, r.target_runs, r.candidates
    );
    for p in &r.probes {
        sayln!(
            "  probe #{} {} `{}` → `{}`: {:?}{}",
            p.node_index,
            p.op_type,
            p.node,
            p.value,
            p.status,
            p.tolerance_used
                .map(|u| format!(" ({} of its tolerance)", crate::units::num(u)))
                .unwrap_or_default()
        );
    }
    if let Some(p) = json {
        super::settings::emit_json(p, &r).context("writing the bisect report")?;
    }
    match &r.first_divergence {
        Some(f) => {
            sayln!(
                "first divergence: node #{} {} `{}` (value `{}`)",
                f.node_index,
                f.op_type,
                f.node,
                f.value
            );
            Ok(Outcome::Diverged)
        }
        None => {
            sayln!("clean: the outputs are within tolerance");
            Ok(Outcome::Clean)
        }
    }
}

/// The command line resolved into the pipeline's settings.
fn settings(a: &OnnxArgs) -> anyhow::Result<CompareSettings> {
    let mut targets = super::target_flags::specs(
        &a.engine,
        a.on_target.precision,
        &a.on_target.keep_fp32,
        a.on_target.target_model.clone(),
    )?;
    if targets.len() > 1 {
        refuse_with_several(a)?;
    }
    let first = targets.remove(0);
    let mut s = CompareSettings::new(a.model.clone(), first);
    s.targets.extend(targets);
    a.tolerance.apply(&mut s.tolerance)?;
    s.inputs = super::settings::input_spec(&a.inputs)?;
    s.inputs.samples = a.samples as usize;
    s.pair_by_name = a.on_target.pair_by_name;
    s.runtime = super::target_flags::runtime(&a.engine);
    s.progress = std::io::stderr().is_terminal() && !a.quiet;
    s.heatmaps = a.report.html.is_some();
    s.slice = a
        .slice
        .as_deref()
        .map(|sp| {
            crate::compare::slice::SliceSpec::parse(sp)
                .map_err(|e| anyhow::anyhow!("--slice {sp}: {e}"))
        })
        .transpose()?;
    s.strategy = Strategy::Auto;
    if let Some(m) = a.max_memory.as_deref() {
        let budget = crate::units::parse_size(m)
            .with_context(|| format!("--max-memory {m}: not a size (try 2GiB or 512MiB)"))?;
        s.strategy = Strategy::Bounded { budget };
    }
    s.attribution = match a.attribution {
        super::args::Switch::On => true,
        super::args::Switch::Off => false,
        super::args::Switch::Auto => true,
    };
    s.attribute_all = a.attribute_all;
    s.noise_always = a.expected_noise == super::args::NoiseWhen::Always;
    s.save_target_model = a.save_target_model.clone();
    s.keep_control_flow = a.keep_control_flow;
    s.own_decisions = a.own_decisions;
    s.accept_incomplete = a.accept_incomplete;
    s.steps = a.steps as usize;
    s.inputs.steps = s.steps;
    s.dump = a.dump.clone().map(|d| (d, a.force));
    Ok(s)
}

/// Options that work on one target only, refused with several (`--ep` given more than once).
fn refuse_with_several(a: &OnnxArgs) -> anyhow::Result<()> {
    let one_only = [
        ("--bisect", a.bisect),
        ("--max-memory", a.max_memory.is_some()),
        ("--save-run", a.save_run.is_some()),
        ("--save-target-model", a.save_target_model.is_some()),
        ("--dot", a.dot.is_some()),
        ("--model-explorer", a.model_explorer.is_some()),
        ("--samples", a.samples > 1),
        ("--steps", a.steps > 1),
    ];
    match one_only.iter().find(|(_, on)| *on) {
        Some((name, _)) => anyhow::bail!(
            "{name} works on one target; with several --ep, run it once per target (`phantom onnx MODEL --ep X {name} …`)"
        ),
        None => Ok(()),
    }
}

/// Several targets against one reference run: each compared with f64, and with each other.
fn several(a: &OnnxArgs, settings: &CompareSettings) -> anyhow::Result<Outcome> {
    use crate::report::multi;
    let (m, _) = compare_targets(settings)?;
    crate::report::emit::write(&m, a.report.outputs())?;
    match a.quiet {
        true => say!("{}", multi::terminal::verdict_lines(&m)),
        false => say!("{}", multi::terminal::render(&m, a.top)),
    }
    Ok(match m.status.fails(a.strict) {
        false => Outcome::Clean,
        true => Outcome::Diverged,
    })
}
