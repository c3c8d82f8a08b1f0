//! phantom's bottom layer: errors, tensors and the helpers every other crate uses (files, memory, spill to disk,
//! units, the watchdog, SIMD dispatch). Nothing here knows about ONNX.

pub mod error;
pub mod fsutil;
pub mod heap;
pub mod pip;
pub mod simd;
pub mod spill;
pub mod tensor;
pub mod units;
pub mod watchdog;
pub mod work;

pub use error::{Error, Result};
