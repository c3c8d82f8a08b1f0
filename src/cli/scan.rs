//! `phantom scan`: numerically fragile nodes from one f64 reference run (see [`crate::scan`]).

use super::out::say;
use anyhow::Context;

use super::args::ScanArgs;
use super::Outcome;

pub fn run(a: ScanArgs) -> anyhow::Result<Outcome> {
    let precision = a
        .precision
        .low()
        .context("--precision fp32: a scan judges fp16 or bf16; give --precision fp16 or bf16")?;
    if let Some(p) = a.json.path.as_ref().filter(|p| p.is_dir()) {
        anyhow::bail!(
            "--json {}: is a directory; give a file name to write",
            p.display()
        );
    }
    if let Some(d) = a.model_explorer.as_ref().filter(|d| d.exists() && !a.force) {
        anyhow::bail!(
            "--model-explorer {}: already exists; pass --force to replace it",
            d.display()
        );
    }
    let spec_in = super::settings::input_spec(&a.inputs)?;
    let runtime = crate::pipeline::RuntimeSpec::default();
    let (graph, inputs) =
        crate::pipeline::prepared_model("scan", &a.model, &spec_in, &runtime, true)?;
    crate::watchdog::stage("scan: reference run");
    let scan = crate::scan::scan(&graph, &inputs, precision)?;
    if let Some(p) = &a.json.path {
        super::settings::emit_json(p, &scan)
            .with_context(|| format!("writing the scan to {}", p.display()))?;
    }
    if let Some(d) = &a.model_explorer {
        let ids = crate::report::explorer::ids(&graph)?;
        crate::report::explorer::write(d, a.force, &ids, &crate::scan::render::overlays(&scan))
            .with_context(|| format!("writing Model Explorer overlays to {}", d.display()))?;
    }
    say!("{}", crate::scan::terminal(&scan, a.top));
    Ok(Outcome::Clean)
}
