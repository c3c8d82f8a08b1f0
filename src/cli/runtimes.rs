//! `phantom runtimes`: which ONNX Runtime phantom finds, its version and execution providers.

use super::args::RuntimeArgs;
use super::Outcome;
use crate::runner::{ort, ort_lib};

pub fn run(a: RuntimeArgs) -> anyhow::Result<Outcome> {
    let lib = ort_lib::locate(a.ort_lib.as_deref(), a.no_install)?;
    let env = ort::init(&lib)?;
    println!("onnxruntime {}", env.2);
    println!("  library   {}", lib.path.display());
    println!("  found via {}", lib.source);
    println!("  providers {}", ort::available_providers().join(", "));
    println!("  build     {}", ::ort::info());
    println!(
        "reference   tract-onnx {} (f64, typed)",
        crate::runner::reference::TRACT_VERSION
    );
    Ok(Outcome::Clean)
}
