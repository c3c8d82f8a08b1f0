//! `phantom plan`, `phantom segment`, `phantom merge`: segment-wise comparison (see [`crate::segment`]).

use super::out::{say, sayln};
use anyhow::Context;

use super::args::{MergeArgs, PlanArgs, SegmentArgs, Switch};
use super::Outcome;
use crate::report::terminal;
use crate::segment::{merge as merging, plan as planning, run, Plan};
use crate::units::fmt_size;

pub fn plan(a: PlanArgs) -> anyhow::Result<Outcome> {
    let mut s = super::settings::one_target(
        super::settings::OneTarget {
            model: &a.model,
            on_target: &a.model_on_target,
            engine: &a.engine,
            inputs: &a.inputs,
            tolerance: a.tolerance,
            keep_control_flow: a.keep_control_flow,
        },
        "a plan compares one target; give one --ep (make one plan per target)",
    )?;
    anyhow::ensure!(
        s.inputs.samples <= 1,
        "a plan runs one input sample; drop --samples"
    );
    s.attribution = a.attribution != Switch::Off;
    s.accept_incomplete = a.accept_incomplete;
    let split = match (&a.segments, &a.segment_memory) {
        (Some(k), _) => planning::Split::Segments(*k as usize),
        (None, Some(m)) => planning::Split::Memory(
            crate::units::parse_size(m)
                .with_context(|| format!("--segment-memory {m}: not a size (try 6GiB)"))?
                as u64,
        ),
        (None, None) => anyhow::bail!("give --segments K or --segment-memory SIZE"),
    };
    let ps = planning::PlanSettings {
        compare: s,
        out: a.out.clone(),
        force: a.force,
        split,
    };
    let p = planning::plan(&ps)?;
    say!("{}", plan_summary(&p, &a.out));
    Ok(Outcome::Clean)
}

/// The segments with their sizes and estimates, and the commands to run next.
fn plan_summary(p: &Plan, dir: &std::path::Path) -> String {
    let mut s = format!(
        "phantom plan: {} ({} nodes) in {} segment(s), target {}\n",
        p.model.display(),
        p.nodes,
        p.segments.len(),
        p.settings.targets[0].label()
    );
    for g in &p.segments {
        s.push_str(&format!(
            "  segment {}: nodes #{}..#{} ({}), weights {}, reads {} boundary value(s), hands on {}; estimated peak \
             of its job {} (reference {}, target {}; {} of {} values sized)\n",
            g.index,
            g.first,
            g.last,
            g.nodes.len(),
            fmt_size(g.weight_bytes as usize),
            g.reads.len(),
            g.hands_on.len(),
            fmt_size(g.estimate.job_bytes as usize),
            fmt_size(g.estimate.reference_bytes as usize),
            fmt_size(g.estimate.target_bytes as usize),
            g.estimate.sized_values,
            g.estimate.values
        ));
    }
    for n in &p.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    let d = dir.display();
    s.push_str(&format!(
        "next: phantom segment {d} --boundary        # in order, once\n      \
         phantom segment {d} --index I       # I = 0..{}, all at once\n      \
         phantom merge {d}\n",
        p.segments.len().saturating_sub(1)
    ));
    s
}

/// The segment index: --index, the variable --index-env names, SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX.
fn index(a: &SegmentArgs) -> anyhow::Result<Option<usize>> {
    if let Some(i) = a.index {
        return Ok(Some(i));
    }
    let vars: Vec<String> = match &a.index_env {
        Some(v) => vec![v.clone()],
        None => vec!["SLURM_ARRAY_TASK_ID".into(), "JOB_COMPLETION_INDEX".into()],
    };
    for v in &vars {
        if let Ok(text) = std::env::var(v) {
            let i = text.trim().parse::<usize>().with_context(|| {
                format!("{v}={text}: not a segment index (a non-negative integer)")
            })?;
            return Ok(Some(i));
        }
    }
    anyhow::ensure!(
        a.index_env.is_none(),
        "--index-env {}: the variable is not set",
        vars[0]
    );
    Ok(None)
}

pub fn segment(a: SegmentArgs) -> anyhow::Result<Outcome> {
    let plan = loaded(&a.plan)?;
    let index = index(&a)?;
    if a.boundary {
        let which: Vec<usize> = match index {
            Some(i) => vec![i],
            None => (0..plan.segments.len()).collect(),
        };
        for i in which {
            let st = run::boundary(&a.plan, &plan, i)?;
            sayln!(
                "segment {i}: boundary pass stored {} value(s) per side in {:.0} ms (peak RSS {})",
                st.values,
                st.wall_ms,
                rss(st.peak_rss_bytes)
            );
        }
        return Ok(Outcome::Clean);
    }
    let i = index.context(
        "no segment index: give --index I (or set SLURM_ARRAY_TASK_ID / JOB_COMPLETION_INDEX, or name a \
         variable with --index-env), or --boundary for the boundary pass",
    )?;
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr()) && !a.quiet;
    let p = run::compare(&a.plan, &plan, i, progress)?;
    sayln!(
        "segment {i}: {} ({} ms, peak RSS {}); partial report in {}",
        terminal::verdict_line(&p.report),
        p.wall_ms.round(),
        rss(p.peak_rss_bytes),
        crate::segment::store_report_path(&a.plan, i).display()
    );
    Ok(Outcome::Clean)
}

fn rss(b: Option<u64>) -> String {
    b.map(|b| fmt_size(b as usize))
        .unwrap_or_else(|| "unknown".into())
}

/// The plan in `dir`, with the custom-op libraries it records registered (its model reads their domains).
fn loaded(dir: &std::path::Path) -> anyhow::Result<Plan> {
    let plan = Plan::load(dir)?;
    let recorder = format!("the plan in {}", dir.display());
    crate::model::custom_ops::request_recorded(&plan.custom_op_libraries, &recorder)?;
    Ok(plan)
}

pub fn merge(a: MergeArgs) -> anyhow::Result<Outcome> {
    let plan = loaded(&a.plan)?;
    let m = merging::merge(&a.plan, &plan, std::env::args().collect())?;
    let r = &m.report;
    crate::report::emit::write(r, a.report.outputs())?;
    match a.quiet {
        true => sayln!("{}", terminal::verdict_line(r)),
        false => {
            say!("{}", terminal::render(r, a.top));
            for (i, peak, ms) in &m.jobs {
                sayln!("segment {i}: {:.0} ms, peak RSS {}", ms, rss(*peak));
            }
        }
    }
    Ok(match r.verdict.status.fails(a.strict) {
        false => Outcome::Clean,
        true => Outcome::Diverged,
    })
}
