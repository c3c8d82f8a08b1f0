//! `phantom record` and `phantom check`: golden runs for CI.

use super::out::{say, sayln};
use std::collections::{BTreeMap, HashMap};

use anyhow::Context;

use super::args::{CheckArgs, RecordArgs, TargetArgs};
use super::Outcome;
use crate::golden::check::{check as check_values, Budgets, ValueCheck};
use crate::golden::{self, fingerprint, Golden, Provenance, GOLDEN_SCHEMA};
use crate::model::{self, inputs::Inputs, Graph};
use crate::runner::{ort_lib, RunOutput};
use crate::targets::{self, Capture, TargetSpec};
use crate::tensor::Tensor;

/// Runs the one target the arguments name, every value captured; what ran, as provenance.
fn run_target(
    graph: &Graph,
    inputs: &Inputs,
    t: &TargetArgs,
    command: &str,
) -> anyhow::Result<(RunOutput, Provenance, TargetSpec)> {
    let m = &t.on_target;
    let spec = super::target_flags::one(
        command,
        &t.engine,
        m.precision,
        &m.keep_fp32,
        m.target_model.clone(),
    )?;
    let rt = &t.engine.runtime;
    let lib = ort_lib::locate(rt.ort_lib.as_deref(), rt.no_install)?;
    let mut target = targets::open(&spec, graph, &lib)?;
    let out = target.run(graph, inputs, Capture::All)?;
    let sha = &target.own_model().unwrap_or(graph).sha256;
    let facts = out.facts.clone().unwrap_or_else(|| target.facts(graph));
    let prov = Provenance::from_facts(&target.name(), &target.version(), &facts, sha);
    Ok((out, prov, spec))
}

pub fn record(a: RecordArgs) -> anyhow::Result<Outcome> {
    if a.output.exists() && !a.force {
        anyhow::bail!("{} already exists; phantom never overwrites a golden record: pass --force to replace it", a.output.display());
    }
    // Prepared as every command prepares it: the dims ONNX Runtime accepts, random ops drawing phantom's seeded hash
    // noise (a rerun draws the same numbers), the Ifs and Loops these inputs decide resolved.
    let spec_in = super::settings::input_spec(&a.inputs)?;
    let runtime = super::target_flags::runtime(&a.target.engine);
    let (graph, inputs) =
        crate::pipeline::prepared_model("record", &a.model, &spec_in, &runtime, true)?;
    let (out, provenance, spec) = run_target(&graph, &inputs, &a.target, "record")?;
    let mut values = vec![];
    for n in &graph.nodes {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            if let Some(t) = out.values.get(o) {
                values.push(fingerprint(n.index, &n.name, &n.op_type, o, t));
            }
        }
    }
    let full: Vec<(String, Tensor)> = if a.full_outputs {
        graph
            .outputs
            .iter()
            .filter_map(|o| Some((o.name.clone(), out.values.get(&o.name)?.clone())))
            .collect()
    } else {
        vec![]
    };
    let mut options = BTreeMap::new();
    options.insert("target".into(), spec.label());
    options.insert("seed".into(), a.inputs.seed.to_string());
    let g = Golden {
        schema: GOLDEN_SCHEMA.into(),
        model: graph.path.display().to_string(),
        provenance,
        options,
        target: Some(spec),
        inputs: inputs.tensors.iter().map(|(n, _)| n.clone()).collect(),
        full_outputs: full.iter().map(|(n, _)| n.clone()).collect(),
        values,
    };
    let size = golden::write(&a.output, &g, &inputs.tensors, &full, a.force)?;
    sayln!(
        "recorded {} values of {} into {} ({} bytes)",
        g.values.len(),
        g.model,
        a.output.display(),
        size
    );
    Ok(Outcome::Clean)
}

fn budget_map(list: &[String], flag: &str) -> anyhow::Result<HashMap<String, f64>> {
    list.iter()
        .map(|s| {
            let (k, v) = s
                .rsplit_once('=')
                .with_context(|| format!("{flag} takes NAME=BUDGET, got `{s}`"))?;
            let b = v
                .parse::<f64>()
                .with_context(|| format!("{flag} {s}: not a number"))?;
            super::settings::finite_non_negative(flag, b)?;
            Ok((k.to_string(), b))
        })
        .collect()
}

pub fn check(a: CheckArgs) -> anyhow::Result<Outcome> {
    let budgets = parse_budgets(&a)?;
    let g = golden::read(&a.golden)?;
    let (graph, out, now, spec) = rerun(&a, &g)?;
    let report = check_values(&g, &out.values, &now, &budgets);
    if let Some(p) = &a.json.path {
        super::settings::emit_json(p, &report)?;
    }
    if let Some(p) = &a.junit.path {
        let xml = golden::render::junit(&report, &graph.path);
        crate::fsutil::write_output(p, xml.as_bytes())?;
    }
    let github = std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true");
    say!(
        "{}",
        golden::render::summary(&report, &graph.path, &a.golden, github)
    );
    if let Some(hint) = tf32_hint(&spec, report.first_regressed.as_ref()) {
        sayln!("{hint}");
    }
    Ok(if report.regressed > 0 || report.missing > 0 {
        Outcome::Diverged
    } else {
        Outcome::Clean
    })
}

/// The drift budgets the arguments give: the default, then per op type and per node.
fn parse_budgets(a: &CheckArgs) -> anyhow::Result<Budgets> {
    super::settings::finite_non_negative("--budget", a.budget)?;
    Ok(Budgets {
        default: a.budget,
        by_op: budget_map(&a.budget_op, "--budget-op")?,
        by_node: budget_map(&a.budget_node, "--budget-node")?,
    })
}

/// On ONNX Runtime's CUDA provider with TF32 on, a first regression at a MatMul/Gemm/Conv may be TF32 alone (a
/// record made elsewhere, or before TF32 hardware): the line saying how to tell. `phantom onnx` settles it by a
/// rerun; a check only has the record's statistics, so it says how, and claims nothing.
fn tf32_hint(spec: &crate::targets::TargetSpec, first: Option<&ValueCheck>) -> Option<String> {
    let first = first.filter(|f| crate::analysis::tf32::on_tensor_cores(&f.op_type))?;
    spec.without_tf32()?;
    Some(format!(
        "note: ONNX Runtime's CUDA provider runs float32 {} on TF32 tensor cores by default (use_tf32=1; operands \
         rounded to a 10-bit mantissa); check again with --ep-option use_tf32=0 to tell TF32 from a regression",
        first.op_type
    ))
}

/// Runs the target again on the recorded inputs and seed: the prepared graph, what it produced, what ran, and the
/// target it ran.
type Rerun = (Graph, RunOutput, Provenance, crate::targets::TargetSpec);
fn rerun(a: &CheckArgs, g: &Golden) -> anyhow::Result<Rerun> {
    let seed = g
        .options
        .get("seed")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let tensors = golden::read_inputs(&a.golden, g)?;
    let inputs = Inputs {
        tensors,
        ..Default::default()
    };
    let graph = crate::pipeline::prepared_graph(model::load(&a.model)?, &inputs, seed, false)?;
    crate::pipeline::logged("check", &graph, &inputs);
    let (out, now, spec) = run_target(&graph, &inputs, &a.target, "check")?;
    Ok((graph, out, now, spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::golden::check::CheckStatus;
    use crate::targets::{Engine, OrtSpec, TargetSpec};

    fn first(op: &str) -> ValueCheck {
        ValueCheck {
            node_index: 4,
            node: "Conv_1".into(),
            op_type: op.into(),
            value: "c".into(),
            status: CheckStatus::Regressed,
            drift: 2.6e-4,
            budget: 1e-5,
            detail: None,
        }
    }

    fn on(provider: &str, options: &[(&str, &str)]) -> TargetSpec {
        let mut o = OrtSpec::new(provider);
        for (k, v) in options {
            o.options.insert(k.to_string(), v.to_string());
        }
        TargetSpec {
            engine: Engine::Ort(o),
            precision: None,
            model: None,
        }
    }

    #[test]
    fn a_tensor_core_regression_on_cuda_with_tf32_on_says_how_to_tell_tf32() {
        let hint = tf32_hint(&on("cuda", &[]), Some(&first("Conv"))).unwrap();
        assert!(
            hint.contains("--ep-option use_tf32=0") && hint.contains("Conv"),
            "{hint}"
        );
        assert!(tf32_hint(&on("cuda", &[("use_tf32", "0")]), Some(&first("Conv"))).is_none());
        assert!(tf32_hint(&on("cpu", &[]), Some(&first("MatMul"))).is_none());
        assert!(tf32_hint(&on("cuda", &[]), Some(&first("Softmax"))).is_none());
        assert!(tf32_hint(&on("cuda", &[]), None).is_none());
    }
}
