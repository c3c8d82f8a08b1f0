//! The wgpu side: adapters (this module) — the WGSL executor that runs ONNX graphs on them is not built yet.

pub mod device;
