//! Images as inputs (`--input NAME=photo.jpg`): a vision model's real numbers come from real pixels. The image is
//! decoded (JPEG, PNG, BMP through the `image` crate, with its decoding limits), converted to the input's channel
//! count (1 grey, 3 RGB or BGR, 4 RGBA), resized bilinearly to the input's height and width, laid out NCHW or NHWC
//! as the input's shape says (channels the axis of size 1–4), and — for float inputs — normalised as
//! `(pixel · scale − mean[c]) / std[c]` (default scale 1/255, mean 0, std 1). `uint8` inputs get the raw pixels.

use std::path::Path;

use ::image::{imageops::FilterType, DynamicImage, ImageReader, Limits};
use ndarray::ArrayD;
use serde::{Deserialize, Serialize};

use super::dims::image_axes;
use super::ValueInfo;
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

/// File extensions read as images.
pub const EXTENSIONS: [&str; 10] = [
    "jpg", "jpeg", "png", "bmp", "webp", "tif", "tiff", "pnm", "ppm", "pgm",
];

/// Largest image side decoded (a photo of 16k × 16k pixels is 768 MiB in RGB).
const MAX_SIDE: u32 = 16384;

/// How pixels become float values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageNorm {
    /// Pixel multiplier, applied first.
    pub scale: f64,
    /// Subtracted per channel after scaling (one value for every channel, or one per channel).
    pub mean: Vec<f64>,
    /// Divided per channel last.
    pub std: Vec<f64>,
    /// Channels in BGR order (OpenCV-trained models).
    pub bgr: bool,
}

impl Default for ImageNorm {
    fn default() -> ImageNorm {
        ImageNorm {
            scale: 1.0 / 255.0,
            mean: vec![0.0],
            std: vec![1.0],
            bgr: false,
        }
    }
}

impl ImageNorm {
    /// Whether anything but the defaults was asked for.
    pub fn is_default(&self) -> bool {
        *self == ImageNorm::default()
    }

    fn per_channel(v: &[f64], c: usize) -> f64 {
        if v.len() == 1 {
            v[0]
        } else {
            v[c]
        }
    }
}

/// Whether `path` names an image file.
pub fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The image at `path` as the value of input `info` of `shape`, and a sentence saying how it was made.
pub fn load(
    path: &Path,
    info: &ValueInfo,
    dtype: DType,
    shape: &[usize],
    norm: &ImageNorm,
) -> Result<(Tensor, String)> {
    let bad = |reason: String| Error::Input {
        name: info.name.clone(),
        reason: format!("image {}: {reason}", path.display()),
    };
    let (layout, (ha, wa), ca) = layout(shape).ok_or_else(|| {
        bad(format!(
            "the input's shape {shape:?} is not an image batch (rank 4, NCHW or NHWC with 1–4 channels): give a \
             .npy instead"
        ))
    })?;
    let channels = shape[ca];
    if norm.mean.len() > 1 && norm.mean.len() != channels
        || norm.std.len() > 1 && norm.std.len() != channels
    {
        return Err(bad(format!(
            "--mean/--std give one value or {channels} (one per channel)"
        )));
    }
    if !(dtype.is_float() || dtype == DType::U8 && norm.is_default()) {
        return Err(bad(format!(
            "the input is {dtype}: images feed float inputs (normalised) or uint8 inputs (raw pixels, no \
             --mean/--std/--scale)"
        )));
    }
    let img = decode(path).map_err(bad)?;
    let (w0, h0) = (img.width(), img.height());
    let (h, w) = (shape[ha], shape[wa]);
    let (th, tw) = (u32::try_from(h), u32::try_from(w));
    let (Ok(th), Ok(tw)) = (th, tw) else {
        return Err(bad(format!("the input asks for {h}x{w} pixels")));
    };
    let resized = img.resize_exact(tw, th, FilterType::Triangle);
    let pixels = channel_planes(&resized, channels, norm.bgr);
    let raw = dtype == DType::U8;
    let mut out = ArrayD::<f64>::zeros(shape.to_vec());
    for n in 0..shape[0] {
        for ((y, x, c), &p) in pixels.indexed_iter() {
            let mut idx = vec![n, 0, 0, 0];
            idx[ha] = y;
            idx[wa] = x;
            idx[ca] = c;
            out[idx.as_slice()] = if raw {
                p
            } else {
                (p * norm.scale - ImageNorm::per_channel(&norm.mean, c))
                    / ImageNorm::per_channel(&norm.std, c)
            };
        }
    }
    let t =
        Tensor::from_f64(dtype, out).ok_or_else(|| bad(format!("cannot make {dtype} values")))?;
    let how = if raw {
        "raw pixels".to_string()
    } else {
        format!(
            "(pixel·{} − mean {:?}) / std {:?}",
            crate::units::num(norm.scale),
            norm.mean,
            norm.std
        )
    };
    let order = match (channels, norm.bgr) {
        (1, _) => "grey",
        (4, _) => "RGBA",
        (_, true) => "BGR",
        _ => "RGB",
    };
    let size = match (w0 as usize, h0 as usize) == (w, h) {
        true => "at its own size".to_string(),
        false => format!("resized to {w}x{h} (bilinear)"),
    };
    Ok((
        t,
        format!(
            "image {} ({w0}x{h0}) {size}, {order} {layout}, {how}",
            path.display()
        ),
    ))
}

/// The image's own height and width at the axes of input `info` where the model leaves them open (a symbolic or
/// unknown dim): an image given for a detector with dynamic dims keeps its size. The layout is read from the
/// declared channel dim (1–4 at axis 1: NCHW, at axis 3: NHWC); nothing when it cannot be told or the header
/// cannot be read (the image's own error then comes when it is loaded).
pub fn own_size(path: &Path, info: &ValueInfo) -> Vec<(usize, usize)> {
    use crate::Dim;
    let Some(dims) = info.dims.as_ref().filter(|d| d.len() == 4) else {
        return vec![];
    };
    let channels = |a: usize| matches!(dims[a], Dim::Fixed(c) if (1..=4).contains(&c));
    let (ha, wa) = match (channels(1), channels(3)) {
        (true, _) => (2, 3),
        (false, true) => (1, 2),
        _ => return vec![],
    };
    let Ok((w, h)) = image::image_dimensions(path) else {
        return vec![];
    };
    let open = |a: usize| !matches!(dims[a], Dim::Fixed(v) if v >= 0);
    [(ha, h as usize), (wa, w as usize)]
        .into_iter()
        .filter(|&(a, _)| open(a))
        .collect()
}

/// "NCHW" or "NHWC", the (height, width) axes and the channel axis of an image input of `shape`.
fn layout(shape: &[usize]) -> Option<(&'static str, (usize, usize), usize)> {
    if shape.len() != 4 {
        return None;
    }
    let channels = |a: usize| Some(shape[a]).filter(|c| (1..=4).contains(c));
    match image_axes(channels(1), channels(3))? {
        (2, 3) => Some(("NCHW", (2, 3), 1)),
        axes => Some(("NHWC", axes, 3)),
    }
}

/// Decodes with limits on size and memory.
fn decode(path: &Path) -> std::result::Result<DynamicImage, String> {
    let mut reader = ImageReader::open(path)
        .map_err(|e| format!("cannot read it: {e}"))?
        .with_guessed_format()
        .map_err(|e| format!("cannot read it: {e}"))?;
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    reader.limits(limits);
    reader
        .decode()
        .map_err(|e| format!("cannot decode it as an image ({e}); phantom reads JPEG, PNG and BMP"))
}

/// Pixels as (y, x, channel) → value in 0..=255, in the channel order asked for.
fn channel_planes(img: &DynamicImage, channels: usize, bgr: bool) -> ndarray::Array3<f64> {
    let (w, h) = (img.width() as usize, img.height() as usize);
    let mut out = ndarray::Array3::<f64>::zeros((h, w, channels));
    match channels {
        1 => {
            for (x, y, p) in img.to_luma8().enumerate_pixels() {
                out[(y as usize, x as usize, 0)] = p.0[0] as f64;
            }
        }
        4 => {
            for (x, y, p) in img.to_rgba8().enumerate_pixels() {
                for c in 0..4 {
                    out[(y as usize, x as usize, c)] = p.0[c] as f64;
                }
            }
        }
        _ => {
            for (x, y, p) in img.to_rgb8().enumerate_pixels() {
                for c in 0..channels.min(3) {
                    let src = if bgr { 2 - c } else { c };
                    out[(y as usize, x as usize, c)] = p.0[src] as f64;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dim;

    fn write_png(dir: &Path) -> std::path::PathBuf {
        // 2×2: red, green / blue, white.
        let img = image::RgbImage::from_fn(2, 2, |x, y| match (x, y) {
            (0, 0) => image::Rgb([255, 0, 0]),
            (1, 0) => image::Rgb([0, 255, 0]),
            (0, 1) => image::Rgb([0, 0, 255]),
            _ => image::Rgb([255, 255, 255]),
        });
        let p = dir.join("px.png");
        img.save(&p).unwrap();
        p
    }

    fn info(dims: Vec<i64>) -> ValueInfo {
        ValueInfo {
            name: "x".into(),
            dtype: Some(DType::F32),
            dims: Some(dims.into_iter().map(Dim::Fixed).collect()),
            format: None,
        }
    }

    #[test]
    fn nchw_and_nhwc_with_normalisation() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_png(dir.path());
        let norm = ImageNorm {
            mean: vec![0.5],
            std: vec![0.5],
            ..Default::default()
        };
        let (t, how) = load(
            &p,
            &info(vec![1, 3, 2, 2]),
            DType::F32,
            &[1, 3, 2, 2],
            &norm,
        )
        .unwrap();
        let v = t.as_f64();
        // channel 0 (R) plane: 1, -1 / -1, 1; channel 2 (B) plane: -1, -1 / 1, 1.
        assert_eq!(
            v.iter().take(4).copied().collect::<Vec<_>>(),
            vec![1.0, -1.0, -1.0, 1.0]
        );
        assert_eq!(
            v.iter().skip(8).copied().collect::<Vec<_>>(),
            vec![-1.0, -1.0, 1.0, 1.0]
        );
        assert!(how.contains("NCHW") && how.contains("RGB"), "{how}");
        let bgr = ImageNorm {
            bgr: true,
            ..Default::default()
        };
        let (t, how) = load(
            &p,
            &info(vec![1, 2, 2, 3]),
            DType::U8,
            &[1, 2, 2, 3],
            &ImageNorm::default(),
        )
        .unwrap();
        assert_eq!(
            t.as_f64().iter().take(3).copied().collect::<Vec<_>>(),
            vec![255.0, 0.0, 0.0]
        );
        assert!(how.contains("NHWC") && how.contains("raw pixels"), "{how}");
        let (t, _) = load(&p, &info(vec![1, 2, 2, 3]), DType::F32, &[1, 2, 2, 3], &bgr).unwrap();
        assert_eq!(
            t.as_f64().iter().take(3).copied().collect::<Vec<_>>(),
            vec![0.0, 0.0, 1.0]
        );
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_png(dir.path());
        let e = load(
            &p,
            &info(vec![1, 3, 2]),
            DType::F32,
            &[1, 3, 2],
            &ImageNorm::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("not an image batch"), "{e}");
        let e = load(
            &p,
            &info(vec![1, 3, 2, 2]),
            DType::I64,
            &[1, 3, 2, 2],
            &ImageNorm::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("images feed float inputs"), "{e}");
        let garbage = dir.path().join("bad.jpg");
        std::fs::write(&garbage, b"not a jpeg").unwrap();
        let e = load(
            &garbage,
            &info(vec![1, 3, 2, 2]),
            DType::F32,
            &[1, 3, 2, 2],
            &ImageNorm::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("cannot decode"), "{e}");
    }
}
