//! `phantom precision`: the precision advisor. Compares the fp16/bf16 conversion with the f64 reference, keeps the
//! culprits (and the nodes their causes name) in fp32, and repeats until the model meets the tolerance; writes the
//! mixed-precision model and prints the nodes kept.

use std::collections::HashSet;

use anyhow::{bail, Context};

use super::args::PrecisionArgs;
use super::Outcome;
use crate::pipeline::{compare, CompareSettings};
use crate::report::model::{Report, Status};
use crate::report::terminal::verdict_line;

/// Nodes to keep next: the culprits and the nodes their causes involve; failing that, the first divergence, then
/// the producers of the culprits' inputs.
fn next_nodes(r: &Report, graph: &crate::model::Graph, keep: &[String]) -> Vec<String> {
    let known: HashSet<&str> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    let fresh = |v: Vec<String>| -> Vec<String> {
        let mut seen = HashSet::new();
        v.into_iter()
            .filter(|n| known.contains(n.as_str()) && !keep.contains(n) && seen.insert(n.clone()))
            .collect()
    };
    let mut direct = vec![];
    for c in &r.verdict.culprits {
        direct.push(c.node.clone());
        for k in &c.causes {
            direct.extend(k.nodes.iter().cloned());
        }
    }
    let direct = fresh(direct);
    if !direct.is_empty() {
        return direct;
    }
    if let Some(f) = &r.verdict.first_divergence {
        let f = fresh(vec![f.node.clone()]);
        if !f.is_empty() {
            return f;
        }
    }
    let producers = graph.producers();
    fresh(
        r.verdict
            .culprits
            .iter()
            .flat_map(|c| graph.nodes[c.node_index].inputs.iter())
            .filter_map(|i| producers.get(i.as_str()))
            .map(|&p| graph.nodes[p].name.clone())
            .collect(),
    )
}

pub fn run(a: PrecisionArgs) -> anyhow::Result<Outcome> {
    let Some(_) = a.precision.low() else {
        bail!("--precision fp32 needs no advice: choose fp16 or bf16");
    };
    if a.out.exists() && !a.force {
        bail!(
            "{}: already exists; pass --force to replace it",
            a.out.display()
        );
    }
    let target = super::target_flags::one("precision", &a.engine, a.precision, None)?;
    if target.is_wgpu() {
        bail!(
            "phantom precision writes a mixed fp16/fp32 ONNX model for ONNX Runtime; --ep wgpu computes every node \
             in f16 and cannot keep nodes in fp32: choose an ONNX Runtime provider (--ep cpu, cuda, ...)"
        );
    }
    if a.max_rounds == 0 {
        bail!("--max-rounds must be at least 1");
    }
    let inputs = super::settings::input_spec(&a.inputs)?;
    let graph = crate::model::load(&a.model)?;
    let scratch = a.out.with_extension("phantom-partial.onnx");
    let mut keep = a.keep_fp32.clone();
    let mut met = false;
    for round in 1..=a.max_rounds {
        let mut target = target.clone();
        if let Some(o) = target.engine.ort_mut() {
            o.keep_fp32 = keep.clone();
        }
        let mut settings = CompareSettings::new(a.model.clone(), target);
        a.tolerance.apply(&mut settings.tolerance)?;
        settings.inputs = inputs.clone();
        settings.runtime = super::target_flags::runtime(&a.engine);
        settings.attribution = true;
        // The advisor ranks nodes by what each does alone.
        settings.attribute_all = true;
        settings.save_target_model = Some(scratch.clone());
        let (report, _) = compare(&settings)?;
        println!(
            "round {round} ({} kept in fp32): {}",
            keep.len(),
            verdict_line(&report)
        );
        if report.verdict.status == Status::Clean {
            met = true;
            break;
        }
        let next = next_nodes(&report, &graph, &keep);
        if next.is_empty() {
            println!("no further node to keep: the remaining drift is not tied to a node phantom can keep in fp32");
            break;
        }
        println!("  keeping in fp32: {}", next.join(", "));
        keep.extend(next);
    }
    std::fs::rename(&scratch, &a.out).with_context(|| format!("writing {}", a.out.display()))?;
    println!(
        "{} nodes kept in fp32{}{}",
        keep.len(),
        if keep.is_empty() { "" } else { ": " },
        keep.join(",")
    );
    println!("mixed-precision model: {}", a.out.display());
    if met {
        println!(
            "meets the tolerance (rerun: phantom onnx {} --precision {} --keep-fp32 '{}')",
            a.model.display(),
            format!("{:?}", a.precision).to_lowercase(),
            keep.join(",")
        );
        Ok(Outcome::Clean)
    } else {
        println!(
            "does NOT meet the tolerance after {} round(s)",
            a.max_rounds
        );
        Ok(Outcome::Diverged)
    }
}
