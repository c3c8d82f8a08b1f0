//! ONNX import and the validation pass on arbitrary bytes: an error or a graph, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = phantom::model::import::from_bytes(std::path::Path::new("fuzz.onnx"), data.to_vec());
});
