//! ONNX's window functions (`HannWindow`, `HammingWindow`, `BlackmanWindow`) and `MelWeightMatrix` in f64. tract
//! computes them in f32 and folds them into f32 constants at import (their inputs are scalars the model or the run
//! fixes); phantom claims them before tract parses, so the reference computes them in f64 from the `size` input and
//! the `periodic` and `output_datatype` attributes (MelWeightMatrix: from its five scalar inputs). Their inputs decide
//! the output's shape, so their values must be known when the model is typed (initializers, constants, or graph
//! inputs the run gives). Formulas as ONNX's reference (onnx/reference/ops/op_*_window.py, op_mel_weight_matrix.py):
//! Hamming's coefficients are 25/46 and 21/46, a symmetric window divides by size − 1, a periodic one by size.

use std::f64::consts::PI;

use tract_onnx::pb::tensor_proto::DataType;
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, opt, shaped};

/// Claimed in any domain, before tract parses the model: tract folds the windows and MelWeightMatrix
/// into f32 constants at import.
pub(super) const TABLE: &[Row] = &[
    Row::any_domain("HannWindow", &Window(Shape::Hann)),
    Row::any_domain("HammingWindow", &Window(Shape::Hamming)),
    Row::any_domain("BlackmanWindow", &Window(Shape::Blackman)),
    Row::any_domain("MelWeightMatrix", &MelWeightMatrix),
];

/// The element type an `output_datatype` attribute names (default float): floats are computed and kept in f64,
/// integers in their own type (the f64 values truncated, as the reference's `astype`).
pub(super) fn output_type(n: &Node) -> TractResult<DatumType> {
    let code = n.int("output_datatype", DataType::Float as i64);
    if code == DataType::Bfloat16 as i64 {
        return Ok(f64::datum_type());
    }
    let dt: DatumType = i32::try_from(code)
        .ok()
        .and_then(|c| DataType::try_from(c).ok())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} `{}`: unknown output_datatype {code}",
                n.op(),
                n.proto.name
            )
        })?
        .try_into()?;
    Ok(if dt.is_float() { f64::datum_type() } else { dt })
}

/// The single integer of a scalar (or one-element) tensor, named `what` in errors.
pub(super) fn scalar_int(n: &Node, t: &Tensor, what: &str) -> TractResult<i64> {
    let v = t.cast_to::<i64>()?;
    let v = v.to_plain_array_view::<i64>()?;
    anyhow::ensure!(
        v.len() == 1,
        "{} `{}`: its {what} has {} elements, expected one",
        n.op(),
        n.proto.name,
        v.len()
    );
    Ok(v.iter().copied().next().unwrap_or_default())
}

/// The single number of a scalar (or one-element) tensor, in f64.
fn scalar_f64(n: &Node, t: &Tensor, what: &str) -> TractResult<f64> {
    let v = t.cast_to::<f64>()?;
    let v = v.to_plain_array_view::<f64>()?;
    anyhow::ensure!(
        v.len() == 1,
        "{} `{}`: its {what} has {} elements, expected one",
        n.op(),
        n.proto.name,
        v.len()
    );
    Ok(v.iter().copied().next().unwrap_or_default())
}

/// The value of input `slot` known at typing time, or an error saying it must be.
pub(super) fn known<'a>(
    n: &Node,
    values: &[Option<&'a Tensor>],
    slot: usize,
    what: &str,
) -> TractResult<&'a Tensor> {
    values.get(slot).copied().flatten().ok_or_else(|| {
        anyhow::anyhow!(
            "{} `{}`: its {what} (input {slot}) must be known before the run",
            n.op(),
            n.proto.name
        )
    })
}

/// A non-negative integer count (a size, a number of bins) as usize.
fn count(n: &Node, v: i64, what: &str) -> TractResult<usize> {
    usize::try_from(v)
        .map_err(|_| anyhow::anyhow!("{} `{}`: its {what} is {v}, negative", n.op(), n.proto.name))
}

/// Which window.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Hann,
    Hamming,
    Blackman,
}

/// The `size` values of the window (`periodic` divides by `size`, symmetric by `size − 1`).
fn window(shape: Shape, size: usize, periodic: bool) -> Vec<f64> {
    let span = if periodic {
        size as f64
    } else {
        size as f64 - 1.0
    };
    (0..size)
        .map(|i| {
            let t = 2.0 * PI * i as f64 / span;
            match shape {
                Shape::Hann => (PI * i as f64 / span).sin().powi(2),
                Shape::Hamming => 25.0 / 46.0 - 21.0 / 46.0 * t.cos(),
                Shape::Blackman => 0.42 - 0.5 * t.cos() + 0.08 * (2.0 * t).cos(),
            }
        })
        .collect()
}

struct Window(Shape);

impl Kernel for Window {
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
        let size = count(
            n,
            scalar_int(n, known(n, values, 0, "size")?, "size")?,
            "size",
        )?;
        Ok(vec![(output_type(n)?, vec![size])])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let size = count(n, scalar_int(n, opt(n, ins, 0)?, "size")?, "size")?;
        let w = window(self.0, size, n.int("periodic", 1) != 0);
        Ok(vec![shaped(&[size], w)?])
    }
}

/// MelWeightMatrix's inputs.
struct Mel {
    bins: usize,
    dft_length: usize,
    sample_rate: f64,
    lower_hz: f64,
    upper_hz: f64,
}

impl Mel {
    /// Reads the five inputs from their (known) values, by ONNX slot.
    fn read(n: &Node, v: &[Option<&Tensor>]) -> TractResult<Mel> {
        let int = |k: usize, what: &str| -> TractResult<usize> {
            count(n, scalar_int(n, known(n, v, k, what)?, what)?, what)
        };
        let float = |k: usize, what: &str| scalar_f64(n, known(n, v, k, what)?, what);
        Ok(Mel {
            bins: int(0, "num_mel_bins")?,
            dft_length: int(1, "dft_length")?,
            sample_rate: float(2, "sample_rate")?,
            lower_hz: float(3, "lower_edge_hertz")?,
            upper_hz: float(4, "upper_edge_hertz")?,
        })
    }

    /// Rows of the matrix: the spectrogram bins of a one-sided DFT.
    fn rows(&self) -> usize {
        self.dft_length / 2 + 1
    }

    /// The DFT bin of each of the `bins + 2` triangle corners, equally spaced on the mel scale from the lower
    /// edge to the upper (2595·log10(1 + f/700)), in steps of the range over `bins + 2`, as the reference has it.
    fn corners(&self, n: &Node) -> TractResult<Vec<usize>> {
        let mel = |hz: f64| 2595.0 * (hz / 700.0).ln_1p() / 10f64.ln();
        let (lo, hi) = (mel(self.lower_hz), mel(self.upper_hz));
        let points = self.bins + 2;
        let step = (hi - lo) / points as f64;
        (0..points)
            .map(|i| {
                let hz = 700.0 * ((i as f64 * step + lo) / 2595.0 * 10f64.ln()).exp_m1();
                let bin = ((self.dft_length as f64 + 1.0) * hz / self.sample_rate).floor();
                anyhow::ensure!(
                    bin >= 0.0 && (bin as usize) < self.rows(),
                    "MelWeightMatrix `{}`: frequency {hz} Hz falls in DFT bin {bin}, outside 0..{}",
                    n.proto.name,
                    self.rows()
                );
                Ok(bin as usize)
            })
            .collect()
    }

    /// The [rows, bins] matrix, row-major: triangle `i` rises from corner i to corner i + 1 and falls to i + 2.
    fn matrix(&self, n: &Node) -> TractResult<Vec<f64>> {
        let c = self.corners(n)?;
        let (rows, cols) = (self.rows(), self.bins);
        let mut out = vec![0.0; rows * cols];
        for i in 0..cols {
            let (lo, mid, hi) = (c[i], c[i + 1], c[i + 2]);
            if mid == lo {
                out[mid * cols + i] = 1.0;
            } else {
                for j in lo..=mid {
                    out[j * cols + i] = (j - lo) as f64 / (mid - lo) as f64;
                }
            }
            // Corners out of order (a lower edge above the upper) leave the falling side empty, as the reference.
            for j in mid..hi {
                out[j * cols + i] = (hi - j) as f64 / (hi - mid) as f64;
            }
        }
        Ok(out)
    }
}

struct MelWeightMatrix;

impl Kernel for MelWeightMatrix {
    fn value_slots(&self) -> &'static [usize] {
        &[0, 1]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        fact(n, ins, 0)?;
        let bins = count(
            n,
            scalar_int(n, known(n, values, 0, "num_mel_bins")?, "num_mel_bins")?,
            "num_mel_bins",
        )?;
        let dft = count(
            n,
            scalar_int(n, known(n, values, 1, "dft_length")?, "dft_length")?,
            "dft_length",
        )?;
        Ok(vec![(output_type(n)?, vec![dft / 2 + 1, bins])])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let mel = Mel::read(n, ins)?;
        Ok(vec![shaped(&[mel.rows(), mel.bins], mel.matrix(n)?)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn windows_are_periodic_or_symmetric() {
        // Symmetric Hann of 5: 0, ½, 1, ½, 0; periodic of 4: 0, ½, 1, ½.
        assert!(close(
            &window(Shape::Hann, 5, false),
            &[0.0, 0.5, 1.0, 0.5, 0.0]
        ));
        assert!(close(&window(Shape::Hann, 4, true), &[0.0, 0.5, 1.0, 0.5]));
        // Hamming's ends are 25/46 − 21/46 = 2/23; Blackman's are 0.
        assert!(close(
            &window(Shape::Hamming, 3, false),
            &[2.0 / 23.0, 1.0, 2.0 / 23.0]
        ));
        assert!(close(&window(Shape::Blackman, 3, false), &[0.0, 1.0, 0.0]));
    }

    #[test]
    fn mel_triangles_rise_and_fall() {
        let mel = Mel {
            bins: 8,
            dft_length: 16,
            sample_rate: 8192.0,
            lower_hz: 0.0,
            upper_hz: 4096.0,
        };
        let n = Node::new(&tract_onnx::pb::NodeProto {
            op_type: "MelWeightMatrix".into(),
            ..Default::default()
        });
        let m = mel.matrix(&n).unwrap();
        assert_eq!(m.len(), 9 * 8);
        // The suite's first row: the first two triangles peak at bin 0.
        assert_eq!(&m[..8], &[1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }
}
