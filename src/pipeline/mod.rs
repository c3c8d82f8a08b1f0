//! The `phantom onnx` pipeline as stages, each a function of a page:
//!
//! ```text
//! prepare ─► capture ─► expected noise ─► stream-compare ─► attribute ─► explain ─► assemble
//! (model,    (target,    (reference        (reference f64,    (each node   (culprits,   (Report)
//!  inputs,    per         rerun with        compared value     alone on     causes,
//!  target)    strategy)   target rounding)  by value)          the target)  fusion)
//! ```
//!
//! Bounded memory is a capture strategy ([`Strategy::Bounded`]): the target runs chunk by chunk inside the
//! stream-compare stage. Bisection ([`crate::bisect`]) reuses [`prepare`].

mod assemble;
mod explain;
mod parts;
mod settings;
mod stream;

use std::collections::HashMap;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::model::{self, inputs::Inputs, Graph};
use crate::report::model::Report;
use crate::runner::ort_lib::{self, Located};
use crate::runner::reference::{ReferenceRunner, Rounding};
use crate::runner::RunOutput;
use crate::target::{self, Capture, Target};
use crate::tensor::Tensor;

pub use parts::environment;
use parts::{ms, stage};
pub use settings::{CompareSettings, RuntimeSpec, Strategy};

/// Heatmaps kept per report: those of the values using most of their tolerance (a few kilobytes each).
pub const MAX_HEATMAPS: usize = 200;

/// The model, its inputs, ONNX Runtime and the opened target.
pub struct Prepared {
    pub graph: Graph,
    pub inputs: Inputs,
    pub lib: Located,
    pub target: Box<dyn Target>,
    pub import_ms: f64,
}

/// Runs the whole comparison and builds the report.
pub fn compare(s: &CompareSettings) -> Result<(Report, Inputs)> {
    let t_all = Instant::now();
    let mut p = prepare(s)?;
    let attribution = s.attribution && s.budget().is_none();
    let mut captured = capture(s, &mut p)?;
    let rounding = attribution
        .then(|| p.target.rounding(&p.graph))
        .transpose()?;
    let emulated = expected_noise(s, &p, rounding.as_ref())?;
    let mut cmp = stream::compare(s, &mut p, &mut captured.out, emulated, attribution)?;
    if let Some(round) = &rounding {
        explain::attribute(s, &mut p, &mut cmp, round)?;
    }
    let found = explain::explain(s, &p, &mut cmp, &mut captured.out, rounding.as_ref())?;
    let report = assemble::report(s, &p, &captured, cmp, found, t_all);
    Ok((report, p.inputs))
}

/// Loads the model, makes the inputs, finds ONNX Runtime and opens the target (converting the model where asked).
pub fn prepare(s: &CompareSettings) -> Result<Prepared> {
    let t = Instant::now();
    let graph = model::load(&s.model)?;
    let inputs = model::inputs::prepare(&graph, &s.inputs)?;
    let lib = ort_lib::locate(s.runtime.ort_lib.as_deref(), s.runtime.no_install)?;
    let target = target::open(&s.target, &graph, &lib)?;
    if let Some(path) = &s.save_target_model {
        let own = target.own_model().ok_or_else(|| {
            Error::Usage(
                "--save-target-model: this target runs MODEL itself; there is no converted model to save".into(),
            )
        })?;
        crate::report::json::write_atomic(path, &own.bytes)?;
    }
    Ok(Prepared {
        graph,
        inputs,
        lib,
        target,
        import_ms: ms(t),
    })
}

/// The target's run: every value at once, or (bounded memory) nothing yet — chunks run as the reference streams.
pub struct Captured {
    pub out: RunOutput,
    pub ms: f64,
}

fn capture(s: &CompareSettings, p: &mut Prepared) -> Result<Captured> {
    let t = Instant::now();
    let pb = stage(s.progress, &format!("target: {}", s.target.label()));
    let out = match s.strategy {
        Strategy::Whole => p.target.run(&p.graph, &p.inputs, Capture::All)?,
        Strategy::Bounded { .. } => RunOutput::default(),
    };
    pb.finish_and_clear();
    Ok(Captured { out, ms: ms(t) })
}

/// The reference rerun with every value rounded to the element type the target stores it in: per value, what
/// correct rounding alone would give (the expected noise).
fn expected_noise(
    s: &CompareSettings,
    p: &Prepared,
    rounding: Option<&Rounding>,
) -> Result<HashMap<String, Tensor>> {
    let mut emulated = HashMap::new();
    let Some(round) = rounding else {
        return Ok(emulated);
    };
    let pb = stage(s.progress, "expected noise: reference with target rounding");
    let mut ideal = ReferenceRunner {
        round: Some(round.clone()),
    };
    ideal.run_streaming(&p.graph, &p.inputs, &mut |name, value| {
        if let (Ok(v), Some(&d)) = (value, round.get(name)) {
            emulated.insert(name.to_string(), v.cast(d).unwrap_or(v));
        }
    })?;
    pb.finish_and_clear();
    Ok(emulated)
}
