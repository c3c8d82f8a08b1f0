//! Dims the model states itself (`tests/data/hf/`, imitations of optimum's CLIP-style exports made by its
//! `make_hf.py`): an image's channels from the convolution that reads it, its size from a vision transformer's patch
//! grid or the `preprocessor_config.json` beside the model, a text length bounded by the position table. With no
//! flags, each compares clean, and the report says where every dim came from.

use crate::common::{ensure_runtime, root};
use crate::contrib::onnx_report;

/// The one input's shape and the reasons its dims were chosen, after a clean comparison of `tests/data/hf/DIR`.
fn input_of(dir: &str) -> (Vec<u64>, Vec<String>) {
    ensure_runtime();
    let m = root().join("tests/data/hf").join(dir).join("model.onnx");
    let (code, out, r) = onnx_report(&m, &[]);
    assert_eq!(code, 0, "{dir}: {out}");
    assert_eq!(r["verdict"]["status"], "clean", "{dir}: {out}");
    let input = &r["inputs"][0];
    let shape = (input["shape"].as_array().unwrap().iter()).map(|d| d.as_u64().unwrap());
    let from =
        (input["dims_from"].as_array().unwrap().iter()).map(|d| d.as_str().unwrap().to_string());
    (shape.collect(), from.collect())
}

#[test]
fn a_vision_transformers_channels_and_size_come_from_its_weights() {
    let (shape, from) = input_of("clip_vision");
    assert_eq!(shape, [1, 3, 224, 224], "{from:?}");
    assert!(from[1].contains("input channels of Conv"), "{from:?}");
    assert!(
        from[2].contains("patch grid of position table") && from[2].contains("14×14 patches of 16"),
        "{from:?}"
    );
}

#[test]
fn a_text_towers_length_is_bounded_by_its_position_table() {
    let (shape, from) = input_of("clip_text");
    assert_eq!(shape, [1, 77], "{from:?}");
    assert!(
        from[1].contains("bounded by the position table"),
        "{from:?}"
    );
}

#[test]
fn the_preprocessor_config_beside_a_model_gives_its_image_size() {
    let (shape, from) = input_of("convnet_preprocessor");
    assert_eq!(shape, [1, 3, 256, 256], "{from:?}");
    assert!(
        from[2].contains("`crop_size` of the preprocessor_config.json"),
        "{from:?}"
    );
}
