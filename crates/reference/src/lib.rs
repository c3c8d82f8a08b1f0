//! The f64 reference (tract at the typed level, translated to f64, with phantom's own f64 kernels where tract has
//! none: the yardstick) and what every runner hands back: [`RunOutput`], and the [`facts`] of what a target ran.
//! `phantom-runner` builds the targets (ONNX Runtime, wgpu) on these.

// The layers below, under the names the code uses.
pub(crate) use phantom_core::widened;
pub(crate) use phantom_core::{error, fsutil, heap, spill, tensor, units, work};
pub(crate) use phantom_model as model;

pub use phantom_engine::facts;
pub mod reference;

use std::collections::{BTreeMap, HashMap};

use crate::tensor::Tensor;

/// What a run produced.
#[derive(Debug, Default)]
pub struct RunOutput {
    /// Values by ONNX tensor name.
    pub values: HashMap<String, Tensor>,
    /// Values the runner could not produce, with the reason.
    pub missing: HashMap<String, String>,
    /// How each node was computed, by node name (reference runner only; absent means plain f64).
    pub precision: HashMap<String, RefPrecision>,
    /// The reference's facts for the report (tract version, precision).
    pub details: BTreeMap<String, String>,
    /// What a target actually ran (set by targets).
    pub facts: Option<facts::TargetFacts>,
    /// Things the user should know.
    pub notes: Vec<String>,
    /// Node name → where it ran instead of the target device, and why (wgpu target only).
    pub placement: HashMap<String, facts::HostPlacement>,
    /// Value name → the target's discrete decisions the reference adopted there (reference runner only).
    pub adopted: HashMap<String, reference::decide::Adopted>,
}

pub use phantom_engine::computed::RefPrecision;
