//! ONNX `ImageDecoder` (opset 20): decodes an encoded image (a 1-D uint8 tensor of the file's bytes) into uint8
//! pixels, (H, W, 3) in RGB or BGR order or (H, W, 1) grey, as `pixel_format` says. tract has no such op.
//!
//! Decoded with the `image` crate (BMP, JPEG, PNG, PNM, TIFF, WebP), as ONNX's reference decodes with Pillow:
//! grey is Pillow's `convert("L")` of the RGB pixels, `(19595·R + 38470·G + 7471·B + 2¹⁵) >> 16`, and an image
//! stored grey is taken as it is. Colour output has three channels whatever the image stores (alpha dropped, grey
//! repeated, a palette expanded), as the spec's (H, W, 3) says; Pillow would hand out its stored channels there.
//! The output's shape is the image's, so the encoded bytes must be known before the run (a constant or a graph
//! input). Not covered: JPEG 2000, for which no well-kept pure-Rust decoder exists (refused, named). The spec's
//! "empty matrix" for undecodable bytes is not reproduced: phantom cannot tell a corrupt stream from a gap in its
//! decoder, so either is an error naming the node.

use std::io::Cursor;

use anyhow::Context;
use image::{DynamicImage, ImageReader};
use tract_onnx::prelude::tract_ndarray::{ArrayD, IxDyn};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, opt, string, values};

/// Claimed in any domain: tract lacks ImageDecoder.
pub(super) const TABLE: &[Row] = &[Row::any_domain("ImageDecoder", &ImageDecoder)];

/// The output's channels and their order.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pixels {
    Rgb,
    Bgr,
    Grey,
}

impl Pixels {
    fn of(n: &Node) -> TractResult<Pixels> {
        match string(n, "pixel_format", "RGB").as_str() {
            "RGB" => Ok(Pixels::Rgb),
            "BGR" => Ok(Pixels::Bgr),
            "Grayscale" => Ok(Pixels::Grey),
            other => anyhow::bail!(
                "{}ImageDecoder `{}`: pixel_format `{other}` is none of RGB, BGR, Grayscale",
                super::kernel::INVALID,
                n.proto.name
            ),
        }
    }

    fn channels(self) -> usize {
        match self {
            Pixels::Grey => 1,
            _ => 3,
        }
    }
}

/// The encoded bytes: input 0, a uint8 tensor.
fn encoded(n: &Node, t: &Tensor) -> TractResult<Vec<u8>> {
    anyhow::ensure!(
        t.datum_type() == u8::datum_type(),
        "{}ImageDecoder `{}`: encoded_stream is {:?}, not uint8",
        super::kernel::INVALID,
        n.proto.name,
        t.datum_type()
    );
    values::<u8>(t)
}

/// A reader of `bytes` in the format their signature names; JPEG 2000 and unknown formats are errors.
fn reader<'a>(n: &Node, bytes: &'a [u8]) -> TractResult<ImageReader<Cursor<&'a [u8]>>> {
    const JP2: &[u8] = b"\0\0\0\x0cjP  ";
    const J2K: &[u8] = b"\xff\x4f\xff\x51";
    let name = &n.proto.name;
    anyhow::ensure!(
        !bytes.starts_with(JP2) && !bytes.starts_with(J2K),
        "ImageDecoder `{name}`: the image is JPEG 2000, which phantom's reference does not decode (no well-kept \
         pure-Rust decoder)"
    );
    let r = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .with_context(|| format!("ImageDecoder `{name}`: reading the encoded image"))?;
    anyhow::ensure!(
        r.format().is_some(),
        "ImageDecoder `{name}`: the {} bytes are no image format phantom decodes (BMP, JPEG, PNG, PNM, TIFF, WebP)",
        bytes.len()
    );
    Ok(r)
}

/// Pillow's `convert("L")` of one RGB pixel.
fn luma(p: [u8; 3]) -> u8 {
    let [r, g, b] = p.map(u32::from);
    ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16) as u8
}

/// The pixels of `img`, (H, W, C) row-major, in the order `px` asks.
fn pixels(img: DynamicImage, px: Pixels) -> Vec<u8> {
    match (px, img) {
        (Pixels::Grey, DynamicImage::ImageLuma8(g)) => g.into_raw(),
        (Pixels::Grey, img) => img.to_rgb8().pixels().map(|p| luma(p.0)).collect(),
        (Pixels::Rgb, img) => img.to_rgb8().into_raw(),
        (Pixels::Bgr, img) => img
            .to_rgb8()
            .pixels()
            .flat_map(|p| [p.0[2], p.0[1], p.0[0]])
            .collect(),
    }
}

struct ImageDecoder;

impl Kernel for ImageDecoder {
    fn facts(&self, n: &Node, _ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        anyhow::bail!(
            "ImageDecoder `{}`: its output's shape is the image's, so the encoded bytes must be known before the \
             run (a constant or a graph input); here the model computes them",
            n.proto.name
        )
    }

    fn value_slots(&self) -> &'static [usize] {
        &[0]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        fact(n, ins, 0)?;
        let Some(t) = values.first().copied().flatten() else {
            return self.facts(n, ins);
        };
        let px = Pixels::of(n)?;
        let bytes = encoded(n, t)?;
        let (w, h) = reader(n, &bytes)?.into_dimensions().with_context(|| {
            format!("ImageDecoder `{}`: reading the image's size", n.proto.name)
        })?;
        Ok(vec![(
            u8::datum_type(),
            vec![h as usize, w as usize, px.channels()],
        )])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let px = Pixels::of(n)?;
        let bytes = encoded(n, opt(n, ins, 0)?)?;
        let img = reader(n, &bytes)?
            .decode()
            .with_context(|| format!("ImageDecoder `{}`: decoding the image", n.proto.name))?;
        let (w, h) = (img.width() as usize, img.height() as usize);
        let shape = [h, w, px.channels()];
        Ok(vec![ArrayD::from_shape_vec(
            IxDyn(&shape),
            pixels(img, px),
        )?
        .into_tensor()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageFormat, Rgb, RgbImage};
    use tract_onnx::pb::{AttributeProto, NodeProto};

    fn node(format: &str) -> Node {
        Node::new(&NodeProto {
            op_type: "phantom.ImageDecoder".into(),
            name: "dec".into(),
            input: vec!["data".into()],
            output: vec!["out".into()],
            attribute: vec![AttributeProto {
                name: "pixel_format".into(),
                r#type: 3,
                s: format.as_bytes().to_vec(),
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    /// A 2×1 image (red, then a grey-blue) encoded as `format`, as a uint8 tensor.
    fn encoded_image(format: ImageFormat) -> Tensor {
        let img = RgbImage::from_fn(2, 1, |x, _| match x {
            0 => Rgb([255, 0, 0]),
            _ => Rgb([10, 20, 200]),
        });
        let mut buf = Cursor::new(vec![]);
        img.write_to(&mut buf, format).unwrap();
        tensor1(&buf.into_inner())
    }

    fn decode(format: &str, data: &Tensor) -> TractResult<Tensor> {
        let n = node(format);
        let facts = ImageDecoder.facts_valued(
            &n,
            &[Some(&(u8::datum_type(), vec![data.len()]))],
            &[Some(data)],
        )?;
        let out = ImageDecoder.eval(&n, &[Some(data)])?.remove(0);
        assert_eq!(out.shape(), facts[0].1.as_slice());
        Ok(out)
    }

    #[test]
    fn pixels_come_in_the_order_asked() {
        for format in [
            ImageFormat::Png,
            ImageFormat::Bmp,
            ImageFormat::Pnm,
            ImageFormat::Tiff,
            ImageFormat::WebP,
        ] {
            let data = encoded_image(format);
            let rgb = decode("RGB", &data).unwrap();
            assert_eq!(rgb.shape(), [1, 2, 3], "{format:?}");
            assert_eq!(
                values::<u8>(&rgb).unwrap(),
                [255, 0, 0, 10, 20, 200],
                "{format:?}"
            );
            let bgr = decode("BGR", &data).unwrap();
            assert_eq!(
                values::<u8>(&bgr).unwrap(),
                [0, 0, 255, 200, 20, 10],
                "{format:?}"
            );
        }
    }

    #[test]
    fn grey_is_pillows_luma() {
        // 255·19595 + 2¹⁵ >> 16 = 76; (10·19595 + 20·38470 + 200·7471 + 2¹⁵) >> 16 = 38.
        let grey = decode("Grayscale", &encoded_image(ImageFormat::Png)).unwrap();
        assert_eq!(grey.shape(), [1, 2, 1]);
        assert_eq!(values::<u8>(&grey).unwrap(), [76, 38]);
    }

    #[test]
    fn undecodable_bytes_and_formats_are_errors() {
        let junk = tensor1(&[1u8, 2, 3, 4]);
        assert!(decode("RGB", &junk).is_err());
        let jp2 = tensor1(b"\0\0\0\x0cjP  \r\n\x87\n");
        let err = decode("RGB", &jp2).unwrap_err();
        assert!(format!("{err:#}").contains("JPEG 2000"), "{err:#}");
        assert!(decode("HSV", &encoded_image(ImageFormat::Png)).is_err());
    }
}
