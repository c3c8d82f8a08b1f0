//! TensorProto decoding (test_data_set `input_N.pb`, constants), external data resolved against an empty
//! directory: an error or a tensor, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = tract_onnx::pb::TensorProto::decode(data) {
        let _ = phantom::model::proto::tensor_from_proto(&t, Some(std::path::Path::new("/nonexistent")));
    }
});
