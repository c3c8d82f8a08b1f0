//! Runners evaluate a [`Graph`] and hand back every value they can, keyed by ONNX tensor name.
//!
//! - [`reference`]: tract at the typed level, translated to f64, with phantom's own f64 kernels where tract has
//!   none; the yardstick.
//! - [`ort`]: ONNX Runtime through the `ort` crate on a chosen execution provider; a target.
//! - [`wgpu`]: phantom's own WGSL shaders on a Vulkan/Metal/DX12 adapter; a target.
//! - [`targets`]: each engine behind the one [`targets::Target`] interface every command uses, and the registry
//!   that opens the one a spec asks for.

// The layers below, under the names the code uses.
pub(crate) use phantom_core::{
    dispatch_tensor, error, fsutil, spill, tensor, units, watchdog, work,
};
pub(crate) use phantom_model as model;
pub(crate) use phantom_precision as precision;

pub mod cuda_libs;
pub mod isolate;
pub mod ort;
pub mod ort_lib;
pub mod plugins;
pub mod providers;
pub mod spec;
pub mod targets;
pub mod trace;
pub mod wgpu;

// The f64 reference and the runner interface live in phantom-reference.
pub use phantom_reference::{facts, reference, RefPrecision, RunOutput};
