//! What an engine is asked to run and what it reports it ran: the [`spec::TargetSpec`] a user's flags resolve to
//! (ONNX Runtime on a provider, or phantom's wgpu shaders, with their options and precision) and the [`facts`] a
//! target records (the provider that ran the nodes, the adapter, the instrumentation's effect). Plain data with the
//! rules that need no runtime, below the analyses and reports that read it, so that those compile neither ONNX
//! Runtime nor wgpu. `phantom-runner` builds the engines on it.

// The layers below, under the names the code uses.
pub(crate) use phantom_core::error;
pub(crate) use phantom_precision as precision;

pub mod computed;
pub mod facts;
pub mod named;
pub mod spec;

pub use named::Named;
