//! The `.npz` reader (a zip archive of `.npy` files) on arbitrary bytes, written to a temporary file: entries whose
//! size is beyond the input budget are refused before inflating.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("phantom-fuzz-{}.npz", std::process::id()));
    if std::fs::write(&path, data).is_ok() {
        let _ = phantom::model::npy::read_npz(&path);
    }
});
