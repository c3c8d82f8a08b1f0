//! The `.npy` reader on arbitrary bytes: an error or a tensor, never a panic or an allocation beyond the data.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = phantom::model::npy::parse_npy("fuzz.npy", data);
});
