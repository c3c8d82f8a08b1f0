//! Inputs that hold an encoded image: a `uint8` vector read by an image decoder in the graph (onnxruntime-extensions'
//! `DecodeImage`, what its pre-processing tools put first). Such an input takes a file's bytes as they are
//! (`--input image=photo.jpg`: no decoding by phantom), and, when none is given, a seeded random RGB image encoded
//! as PNG: random bytes are no image, and the decoder would refuse them.

use std::io::Cursor;
use std::path::Path;

use ::image::{ImageFormat, RgbImage};
use ndarray::{ArrayD, IxDyn};
use rand::RngExt;

use super::super::{Graph, ValueInfo};
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

/// Ops that decode an image held as bytes.
const DECODERS: [&str; 2] = ["DecodeImage", "ImageDecoder"];

/// Height and width of the image phantom draws.
const DRAWN: (u32, u32) = (240, 320);

/// The node that decodes input `info` as an encoded image, if one does.
pub(super) fn decoder_of(graph: &Graph, info: &ValueInfo) -> Option<String> {
    let bytes = info.dtype == Some(DType::U8) && info.dims.as_ref().is_none_or(|d| d.len() == 1);
    if !bytes {
        return None;
    }
    graph
        .nodes
        .iter()
        .find(|n| {
            !n.domain.is_empty()
                && DECODERS.contains(&n.op_type.as_str())
                && n.inputs.first() == Some(&info.name)
        })
        .map(|n| n.name.clone())
}

/// The input an image decoder reads: the bytes of the file given for it, else an image drawn.
pub(super) fn input(
    graph: &Graph,
    info: &ValueInfo,
    given: Option<&std::path::PathBuf>,
    seed: u64,
    rng: &mut rand::rngs::StdRng,
) -> Result<(Tensor, String)> {
    match given {
        Some(path) => from_file(info, path),
        None => Ok(drawn(
            &decoder_of(graph, info).unwrap_or_default(),
            seed,
            rng,
        )),
    }
}

/// The bytes of `path` as the input (the decoder reads the file's encoding itself).
fn from_file(info: &ValueInfo, path: &Path) -> Result<(Tensor, String)> {
    let bytes = std::fs::read(path).map_err(|e| Error::Input {
        name: info.name.clone(),
        reason: format!("cannot read {}: {e}", path.display()),
    })?;
    let origin = format!("the bytes of {} (decoded by the model)", path.display());
    Ok((as_tensor(bytes), origin))
}

/// A seeded random RGB image, PNG-encoded.
fn drawn(decoder: &str, seed: u64, rng: &mut rand::rngs::StdRng) -> (Tensor, String) {
    let (h, w) = DRAWN;
    let mut img = RgbImage::new(w, h);
    for p in img.pixels_mut() {
        p.0 = [
            rng.random_range(0..=255),
            rng.random_range(0..=255),
            rng.random_range(0..=255),
        ];
    }
    let mut png = Cursor::new(vec![]);
    img.write_to(&mut png, ImageFormat::Png)
        .expect("encoding an in-memory RGB image as PNG cannot fail");
    let origin = format!(
        "a random {w}×{h} RGB image seed {seed}, PNG-encoded for `{decoder}` (pass a real one with --input NAME=photo.jpg)"
    );
    (as_tensor(png.into_inner()), origin)
}

fn as_tensor(bytes: Vec<u8>) -> Tensor {
    let n = bytes.len();
    Tensor::U8(ArrayD::from_shape_vec(IxDyn(&[n]), bytes).expect("length matches shape"))
}
