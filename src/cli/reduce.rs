//! `phantom reduce`: a culprit cut out as a repro bundle (see [`crate::reduce`]).

use super::args::ReduceArgs;
use super::out::say;
use super::Outcome;
use crate::reduce::{bundle, reduce, ReduceSettings};

pub fn run(a: ReduceArgs) -> anyhow::Result<Outcome> {
    if a.out.exists() && !a.force {
        anyhow::bail!(
            "{} already exists; pass --force to replace it",
            a.out.display()
        );
    }
    let mut s = super::settings::one_target(
        super::settings::OneTarget {
            model: &a.model,
            on_target: &a.model_on_target,
            engine: &a.engine,
            inputs: &a.inputs,
            tolerance: a.tolerance,
            keep_control_flow: a.keep_control_flow,
        },
        "reduce cuts a culprit out for one target; give one --ep",
    )?;
    s.attribution = true;
    s.attribute_all = true;
    let settings = ReduceSettings {
        compare: s,
        node: a.node,
        out: a.out.clone(),
        force: a.force,
        max_nodes: a.max_nodes as usize,
    };
    let (r, b) = reduce(&settings)?;
    if !r.reproduced {
        let tried: Vec<String> = r
            .attempts
            .iter()
            .map(|t| format!("{} fed the {}'s values", t.nodes, t.fed))
            .collect();
        anyhow::bail!(
            "{} `{}` does not fail on {} when cut out (cuts tried, in model nodes: {}; --max-nodes {}): the error \
             needs more of the model; no bundle written (raise --max-nodes, or attach `phantom onnx --html` instead)",
            r.op_type,
            r.node,
            r.target,
            tried.join(", "),
            settings.max_nodes
        );
    }
    bundle::write(&a.out, a.force, &r, &b)?;
    say!("{}", summary(&r, &a.out));
    Ok(Outcome::Clean)
}

/// What the terminal shows: the node, the cut, both checks and where the bundle is.
fn summary(r: &crate::reduce::Reduced, out: &std::path::Path) -> String {
    let mut s = format!(
        "phantom reduce: {} `{}` on {} ({})\n  cut: {} node(s): {}; fed the {}'s values\n",
        r.op_type,
        r.node,
        r.target,
        r.chosen,
        r.nodes.len(),
        r.nodes.join(", "),
        r.inputs_from
    );
    for o in &r.outputs {
        s.push_str(&format!(
            "  `{}`: target max abs err {:.4e}{}, {} of {} out of tolerance; f64 reference on the same inputs {} (max abs err {:.3e})\n",
            o.name,
            o.target_max_abs,
            nonfinite(o.target_nonfinite),
            o.target_failing,
            o.elements,
            if o.reference_passes { "passes" } else { "fails too" },
            o.reference_max_abs
        ));
    }
    let run = match r.facts {
        crate::runner::facts::TargetFacts::Ort(_) => "python3 repro.py",
        crate::runner::facts::TargetFacts::Wgpu(_) => "see README.md",
    };
    s.push_str(&format!(
        "reproduced: bundle in {} (model.onnx, test_data_set_0/, README.md; {run})\n",
        out.display()
    ));
    s
}

/// ` (+N NaN/Inf on one side only)`, or nothing.
pub fn nonfinite(n: u64) -> String {
    match n {
        0 => String::new(),
        n => format!(" (+{n} NaN/Inf on one side only)"),
    }
}
