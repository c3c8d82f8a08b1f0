//! `phantom run`: one side only, the f64 reference or plain ONNX Runtime; prints each graph output's shape and
//! statistics and the time taken (also the baseline for the benchmarks).

use std::time::Instant;

use super::args::{RunArgs, Side};
use super::Outcome;
use crate::model;
use crate::runner::{ort::OrtRunner, ort_lib, reference::ReferenceRunner, Runner};

pub fn run(a: RunArgs) -> anyhow::Result<Outcome> {
    let graph = model::load(&a.model)?;
    let inputs = model::inputs::prepare(&graph, &super::settings::input_spec(&a.inputs)?)?;
    let t = Instant::now();
    let out = match a.runner {
        Side::Reference => ReferenceRunner::default().run(&graph, &inputs)?,
        Side::Ort => {
            let lib = ort_lib::locate(a.runtime.ort_lib.as_deref(), a.runtime.no_install)?;
            OrtRunner::new(&lib, a.ep, a.ort_opt_level, None)?.run_plain(&graph, &inputs)?
        }
    };
    let ms = t.elapsed().as_secs_f64() * 1e3;
    for o in &graph.outputs {
        match out.values.get(&o.name) {
            Some(t) => {
                let f = t.to_f64_array();
                let (lo, hi) = f
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
                        (l.min(v), h.max(v))
                    });
                println!("{} {} {:?} min {lo} max {hi}", o.name, t.dtype(), t.shape());
            }
            None => println!(
                "{} unavailable: {}",
                o.name,
                out.missing.get(&o.name).map(String::as_str).unwrap_or("?")
            ),
        }
    }
    println!("{} values in {ms:.1} ms", out.values.len());
    Ok(Outcome::Clean)
}
