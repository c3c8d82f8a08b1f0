//! The repro bundle: `model.onnx`, `test_data_set_0/` (inputs, and the f64 reference's expected outputs as float64
//! TensorProto), `repro.py` with `bundle.json` (ONNX Runtime targets: numpy and onnxruntime only), `reduce.json`,
//! and a README with the environment, ready to attach to an upstream issue.

use std::fmt::Write as _;
use std::path::Path;

use prost::Message;
use serde_json::json;

use super::{Bundle, Reduced};
use crate::error::Result;
use crate::fsutil::write_dir_atomically;
use crate::model::proto::tensor_to_proto;
use crate::runner::facts::TargetFacts;
use crate::runner::ort::OptLevel;

const SCRIPT: &str = include_str!("repro.py");

/// Writes the bundle to `dir` (refused when it exists, unless `force`).
pub fn write(dir: &Path, force: bool, r: &Reduced, b: &Bundle) -> Result<()> {
    write_dir_atomically(dir, force, "a repro bundle", |w| {
        w.write("model.onnx", &b.model)?;
        for (k, (n, t)) in b.inputs.iter().enumerate() {
            let pb = tensor_to_proto(n, t).encode_to_vec();
            w.write(&format!("test_data_set_0/input_{k}.pb"), &pb)?;
        }
        for (k, (n, t)) in b.expected.iter().enumerate() {
            let pb = tensor_to_proto(n, t).encode_to_vec();
            w.write(&format!("test_data_set_0/output_{k}.pb"), &pb)?;
        }
        if let Some(cfg) = script_config(r) {
            w.write(
                "bundle.json",
                &serde_json::to_vec_pretty(&cfg).expect("serializes"),
            )?;
            w.write("repro.py", SCRIPT.as_bytes())?;
        }
        w.write(
            "reduce.json",
            &serde_json::to_vec_pretty(r).expect("serializes"),
        )?;
        w.write("README.md", readme(r, b).as_bytes())
    })
    .map(|_| ())
}

/// What `repro.py` reads: the provider and its options, the optimization level, the custom-op libraries phantom's
/// sessions registered, each output's tolerance.
fn script_config(r: &Reduced) -> Option<serde_json::Value> {
    let TargetFacts::Ort(o) = &r.facts else {
        return None;
    };
    let level = match o.opt_level {
        OptLevel::Disable => "ORT_DISABLE_ALL",
        OptLevel::Basic => "ORT_ENABLE_BASIC",
        OptLevel::Extended => "ORT_ENABLE_EXTENDED",
        OptLevel::All => "ORT_ENABLE_ALL",
    };
    let outputs: Vec<_> = r
        .outputs
        .iter()
        .map(|c| {
            json!({ "name": c.name, "atol": c.tolerance.atol, "rtol": c.tolerance.rtol, "scale": c.scale,
                    "phantom_max_abs": c.target_max_abs })
        })
        .collect();
    Some(json!({
        "onnxruntime": o.version,
        "provider": o.ep_requested,
        "provider_options": o.ep_options,
        "graph_optimization_level": level,
        "custom_op_libraries": crate::model::custom_ops::libraries().iter().map(|l| &l.path).collect::<Vec<_>>(),
        "node": r.node,
        "outputs": outputs,
    }))
}

/// The bundle's README: what fails, by how much, how to run it, and what ran.
fn readme(r: &Reduced, b: &Bundle) -> String {
    let mut s = format!(
        "# {} `{}` out of tolerance on {}\n\nFound by phantom {} ({}): {}.\n\n",
        r.op_type, r.node, r.target, r.phantom_version, r.schema, r.chosen
    );
    let _ = writeln!(
        s,
        "`model.onnx` is {} node(s) cut out of `{}`: {}. Its inputs are {}; the expected outputs are the f64 \
         reference's values in the full model (float64).\n",
        r.nodes.len(),
        r.model,
        r.nodes.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
        match r.inputs_from.as_str() {
            "target" => "the values the target itself computed for them in the full model",
            _ => "the f64 reference's values, stored as the target stores them",
        }
    );
    s.push_str("| output | target: max abs err | elements out of tolerance | f64 reference on the same inputs | tolerance |\n|---|---|---|---|---|\n");
    for o in &r.outputs {
        let _ = writeln!(
            s,
            "| `{}` | {:.6e}{} | {} of {} | {} (max abs err {:.3e}) | atol {:.3e} + rtol {:.3e} × max(\\|ref\\|, {:.3e}) |",
            o.name,
            o.target_max_abs,
            match o.target_nonfinite {
                0 => String::new(),
                n => format!(" (+{n} NaN/Inf on one side only)"),
            },
            o.target_failing,
            o.elements,
            if o.reference_passes { "passes" } else { "fails too" },
            o.reference_max_abs,
            o.tolerance.atol,
            o.tolerance.rtol,
            o.scale
        );
    }
    s.push('\n');
    s.push_str(&verdict_text(r));
    s.push_str("\n## Reproduce\n\n");
    s.push_str(&how_to_run(r, b));
    s.push_str("\n## Environment\n\n");
    s.push_str(&environment(r));
    let _ = writeln!(s, "\nCommand: `{}`", r.command.join(" "));
    s
}

fn verdict_text(r: &Reduced) -> String {
    let tries = r
        .attempts
        .iter()
        .map(|a| {
            format!(
                "{} node(s): {}",
                a.nodes,
                if a.reproduced { "fails" } else { "passes" }
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    if r.inputs_from == "target" && r.reproduced {
        let mut s = "**Reproduced with the target's own inputs only.** Fed the f64 reference's values (rounded as the \
                     target stores them), no cut up to the size tried fails; fed the values the target itself computed \
                     upstream (each within tolerance), this node fails. It amplifies the error it inherits: its \
                     conditioning, not its arithmetic, is the finding (the f64 reference on these same inputs: see the \
                     table)."
            .to_string();
        let _ = writeln!(s, " Cuts tried: {tries}.");
        return s;
    }
    let mut s = match (r.reproduced, r.reference_passes) {
        (true, true) => "**Reproduced**: the cut fails on the target and passes on the f64 reference fed the same \
                         inputs, so the target's arithmetic on these inputs makes the error."
            .to_string(),
        (true, false) => "**Reproduced**, but the f64 reference fed the same (rounded) inputs misses the tolerance \
                          too: rounding the inputs to the target's type explains at least part of the error."
            .to_string(),
        (false, _) => "**Not reproduced**: no cut up to the size tried fails on the target alone; the error needs \
                       more of the model (attach phantom's full report instead)."
            .to_string(),
    };
    let _ = writeln!(s, " Cuts tried: {tries}.");
    s
}

fn how_to_run(r: &Reduced, b: &Bundle) -> String {
    match &r.facts {
        TargetFacts::Ort(o) => {
            let pip = if o.ep_requested == "CPUExecutionProvider" {
                "onnxruntime"
            } else {
                "onnxruntime-gpu"
            };
            let mut s = format!(
                "```\npip install numpy {pip}=={}\npython3 repro.py      # exit 1: reproduced, 0: not reproduced\n```\n",
                o.version
            );
            if let Some(dir) = o
                .library
                .split("/onnxruntime/capi/")
                .next()
                .filter(|_| o.library.contains("/onnxruntime/capi/"))
            {
                let _ = writeln!(s, "\nThe ONNX Runtime phantom used is a Python package: `PYTHONPATH={dir} python3 repro.py`.");
            }
            s
        }
        TargetFacts::Wgpu(_) => {
            let mut s = format!(
                "phantom's wgpu shaders are the target, so the repro is phantom itself ({}):\n\n```\nphantom onnx \
                 model.onnx --input test_data_set_0 {}\n```\n\nThat command compares the shaders with the f64 reference \
                 run on these same inputs: it shows the error the shaders' own arithmetic makes.",
                b.runtime,
                target_flags(&r.command)
            );
            if !r.reference_passes {
                s.push_str(
                    " Here the f64 reference on these inputs misses the tolerance too (table above), so most of the \
                     error comes from rounding the inputs, and that command may pass; the full model's f64 values are \
                     `test_data_set_0/output_*.pb`.",
                );
            }
            s.push('\n');
            s
        }
    }
}

/// The target options of the command that found the culprit (`--ep`, `--precision`, wgpu's, `--ort-*`).
fn target_flags(command: &[String]) -> String {
    let mut out = vec![];
    let mut it = command.iter().skip(2).peekable();
    while let Some(a) = it.next() {
        let target = [
            "--ep",
            "--precision",
            "--keep-fp32",
            "--accumulate",
            "--adapter",
            "--f16-mode",
            "--ort-",
            "--custom-op-library",
        ]
        .iter()
        .any(|p| a.starts_with(p));
        if target {
            out.push(a.clone());
            if !a.contains('=') {
                if let Some(v) = it.next_if(|v| !v.starts_with("--")) {
                    out.push(v.clone());
                }
            }
        }
    }
    out.join(" ")
}

fn environment(r: &Reduced) -> String {
    let env = crate::pipeline::environment();
    let mut s = format!(
        "- machine: {} {}, {} ({} cores)\n",
        env.os, env.arch, env.cpu, env.cores
    );
    match &r.facts {
        TargetFacts::Ort(o) => {
            let _ = writeln!(
                s,
                "- ONNX Runtime {} from {} ({})",
                o.version, o.library, o.library_source
            );
            let _ = writeln!(s, "- build: {}", o.build_info);
            let _ = writeln!(
                s,
                "- provider asked: {}; nodes placed on: {}",
                o.ep_requested, o.ep_used
            );
            let _ = writeln!(
                s,
                "- provider options: {:?}; graph optimization: {}; deterministic: {}",
                o.ep_options,
                o.opt_level.name(),
                o.deterministic
            );
        }
        TargetFacts::Wgpu(w) => {
            let _ = writeln!(
                s,
                "- wgpu adapter: {} ({}, {}), driver {}",
                w.adapter, w.backend, w.device_type, w.driver
            );
            let _ = writeln!(s, "- compute {}, accumulate {}", w.compute, w.accumulate);
        }
    }
    s
}
