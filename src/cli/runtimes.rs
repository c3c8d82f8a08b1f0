//! `phantom runtimes`: which ONNX Runtime phantom finds, its version and execution providers.

use super::args::RuntimeArgs;
use super::out::sayln;
use super::Outcome;
use crate::runner::{ort, ort_lib};

pub fn run(a: RuntimeArgs) -> anyhow::Result<Outcome> {
    crate::runner::plugins::request(&a.ep_library)?;
    let lib = ort_lib::locate(a.ort_lib.as_deref(), a.no_install)?;
    let env = ort::init(&lib)?;
    sayln!("onnxruntime {}", env.2);
    sayln!("  library   {}", lib.path.display());
    sayln!("  found via {}", lib.source);
    sayln!("  providers {}", ort::available_providers().join(", "));
    sayln!("  build     {}", ::ort::info());
    for cli in ["cuda", "tensorrt"] {
        if let Some(r) = crate::runner::cuda_libs::ensure(&lib.path, cli) {
            sayln!("  {cli} needs (from {})", r.provider_lib.display());
            for l in r.lines() {
                sayln!("    {l}");
            }
        }
    }
    print_plugins(&env.0);
    sayln!(
        "reference   tract-onnx {} (f64, typed)",
        crate::runner::reference::TRACT_VERSION
    );
    Ok(Outcome::Clean)
}

/// Each plugin library (`--ep-library`, `onnxruntime_ep_*` Python packages) and the devices it offers.
fn print_plugins(env: &::ort::environment::Environment) {
    for (p, devices) in crate::runner::plugins::listing(env) {
        sayln!(
            "  plugin    {} ({}, from {})",
            p.name,
            p.path.display(),
            p.source
        );
        match devices {
            Ok(d) if d.is_empty() => {
                sayln!("    no device (the plugin found nothing it can run on)")
            }
            Ok(d) => {
                for d in d {
                    let vendor = if d.vendor.is_empty() { "" } else { " " };
                    sayln!(
                        "    {} on{vendor}{} {} (device id {})",
                        d.ep,
                        d.vendor,
                        d.kind,
                        d.id
                    );
                }
            }
            Err(e) => sayln!("    not loaded: {e}"),
        }
    }
}
