//! ONNX's `STFT` in f64. tract's STFT needs its window to be a constant when it types the model, so a window given
//! as a graph input, or computed by a window op phantom evaluates itself (`HannWindow` of a constant size is no
//! longer folded by tract), cannot be typed; phantom computes every STFT. As ONNX's reference
//! (onnx/reference/ops/op_stft.py): signal [batch, length, 1] (real) or [batch, length, 2] (complex), frames of
//! `frame_length` samples every `frame_step`, 1 + (length − frame_length) / frame_step of them, each multiplied by
//! the window (ones when absent) and transformed by a DFT of `frame_length` points (the frame zero-padded or cut to
//! it where the window's length differs), giving [batch, frames, bins, 2] with bins = frame_length / 2 + 1 when
//! `onesided` (the default) and frame_length otherwise. `frame_length` defaults to the window's length, then to
//! the signal's. The DFT is direct, its twiddles taken from one table of the frame length's roots of unity.

use std::f64::consts::PI;

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::signal::{known, scalar_int};
use super::util::{f64s, f64s_opt, fact, float_type, opt, shaped};

/// Claimed in any domain: tract's STFT needs a constant window.
pub(super) const TABLE: &[Row] = &[Row::any_domain("STFT", &Stft)];

/// The framing of one STFT: every length in samples.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Frames {
    batch: usize,
    length: usize,
    /// 1 for a real signal, 2 for a complex one.
    parts: usize,
    step: usize,
    /// Samples weighted per frame (the window's length, or frame_length without a window).
    window: usize,
    /// Points of each frame's DFT.
    dft: usize,
    count: usize,
    bins: usize,
}

impl Frames {
    /// The framing of a signal of shape `signal`, from frame_step, the window's length and frame_length.
    fn new(
        n: &Node,
        signal: &[usize],
        step: i64,
        window: Option<usize>,
        frame_length: Option<i64>,
    ) -> TractResult<Frames> {
        let name = &n.proto.name;
        let [batch, length, parts] = *signal else {
            anyhow::bail!(
                "STFT `{name}`: signal of shape {signal:?}, expected [batch, length, 1 or 2]"
            );
        };
        anyhow::ensure!(
            parts == 1 || parts == 2,
            "STFT `{name}`: signal of shape {signal:?} is neither real nor complex"
        );
        anyhow::ensure!(step > 0, "STFT `{name}`: frame_step {step} is not positive");
        let dft = match frame_length {
            Some(f) => usize::try_from(f).ok().filter(|&f| f > 0).ok_or_else(|| {
                anyhow::anyhow!("STFT `{name}`: frame_length {f} is not positive")
            })?,
            None => window.unwrap_or(length),
        };
        anyhow::ensure!(
            dft <= length,
            "STFT `{name}`: frame_length {dft} exceeds the signal's {length} samples"
        );
        let step = step as usize;
        let onesided = n.int("onesided", 1) != 0;
        Ok(Frames {
            batch,
            length,
            parts,
            step,
            window: window.unwrap_or(dft),
            dft,
            count: 1 + (length - dft) / step,
            bins: if onesided { dft / 2 + 1 } else { dft },
        })
    }

    fn out_shape(&self) -> Vec<usize> {
        vec![self.batch, self.count, self.bins, 2]
    }

    /// The weighted samples of frame `f` of batch row `b` as (re, im), `dft` of them: zero past the window's
    /// length or the signal's end.
    fn frame(&self, x: &[f64], w: &[f64], b: usize, f: usize) -> Vec<(f64, f64)> {
        (0..self.dft)
            .map(|k| {
                let at = f * self.step + k;
                if k >= self.window || at >= self.length {
                    return (0.0, 0.0);
                }
                let s = &x[(b * self.length + at) * self.parts..][..self.parts];
                let im = if self.parts == 2 { s[1] } else { 0.0 };
                (s[0] * w[k], im * w[k])
            })
            .collect()
    }

    /// The whole output, row-major [batch, frames, bins, 2].
    fn transform(&self, x: &[f64], w: &[f64]) -> Vec<f64> {
        // cos and sin of 2πm/N: bin k of sample j turns by (k·j) mod N of them, exact for every k and j.
        let n = self.dft;
        let table: Vec<(f64, f64)> = (0..n)
            .map(|m| {
                let a = 2.0 * PI * m as f64 / n as f64;
                (a.cos(), a.sin())
            })
            .collect();
        let mut out = Vec::with_capacity(self.batch * self.count * self.bins * 2);
        for b in 0..self.batch {
            for f in 0..self.count {
                let frame = self.frame(x, w, b, f);
                for k in 0..self.bins {
                    let (mut re, mut im) = (0.0, 0.0);
                    for (j, &(a, c)) in frame.iter().enumerate() {
                        // (a + ic)·(cos θ − i sin θ), θ = 2πkj/N.
                        let (cos, sin) = table[(k * j) % n];
                        re += a * cos + c * sin;
                        im += c * cos - a * sin;
                    }
                    out.extend([re, im]);
                }
            }
        }
        out
    }
}

struct Stft;

impl Kernel for Stft {
    fn value_slots(&self) -> &'static [usize] {
        &[1, 3]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let signal = fact(n, ins, 0)?;
        let dt = float_type(n, signal)?;
        let step = scalar_int(n, known(n, values, 1, "frame_step")?, "frame_step")?;
        let window = ins.get(2).copied().flatten().map(|w| w.1.iter().product());
        let frame_length = match ins.get(3).copied().flatten() {
            Some(_) => Some(scalar_int(
                n,
                known(n, values, 3, "frame_length")?,
                "frame_length",
            )?),
            None => None,
        };
        Ok(vec![(
            dt,
            Frames::new(n, &signal.1, step, window, frame_length)?.out_shape(),
        )])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let signal = opt(n, ins, 0)?;
        let step = scalar_int(n, opt(n, ins, 1)?, "frame_step")?;
        let frame_length = match ins.get(3).copied().flatten() {
            Some(t) => Some(scalar_int(n, t, "frame_length")?),
            None => None,
        };
        let window: Option<Vec<f64>> = f64s_opt(ins, 2)?.map(|w| w.iter().copied().collect());
        let frames = Frames::new(
            n,
            signal.shape(),
            step,
            window.as_ref().map(Vec::len),
            frame_length,
        )?;
        let w = window.unwrap_or_else(|| vec![1.0; frames.window]);
        let x: Vec<f64> = f64s(n, ins, 0)?.iter().copied().collect();
        Ok(vec![shaped(&frames.out_shape(), frames.transform(&x, &w))?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: "STFT".into(),
            input: vec!["x".into(), "step".into()],
            ..Default::default()
        })
    }

    #[test]
    fn frames_count_and_bins() {
        let f = Frames::new(&node(), &[1, 128, 1], 8, None, Some(16)).unwrap();
        assert_eq!(f.out_shape(), [1, 15, 9, 2]);
        assert!(Frames::new(&node(), &[1, 8, 1], 8, None, Some(16)).is_err());
    }

    #[test]
    fn a_constant_frame_has_only_a_dc_bin() {
        let f = Frames::new(&node(), &[1, 4, 1], 4, None, Some(4)).unwrap();
        let y = f.transform(&[1.0; 4], &[1.0; 4]);
        assert_eq!(y.len(), 3 * 2);
        assert_eq!(y[0], 4.0);
        assert!(y[1..].iter().all(|v| v.abs() < 1e-12));
    }

    #[test]
    fn a_complex_exponential_lands_in_its_bin() {
        // x[j] = e^{2πi j/4}: all of it in bin 1 of a two-sided DFT.
        let mut n = node();
        n.proto.attribute.push(tract_onnx::pb::AttributeProto {
            name: "onesided".into(),
            i: 0,
            ..Default::default()
        });
        let x: Vec<f64> = (0..4)
            .flat_map(|j| {
                let a = 2.0 * PI * j as f64 / 4.0;
                [a.cos(), a.sin()]
            })
            .collect();
        let f = Frames::new(&n, &[1, 4, 2], 1, None, None).unwrap();
        let y = f.transform(&x, &[1.0; 4]);
        assert!((y[2] - 4.0).abs() < 1e-12 && y[3].abs() < 1e-12);
        assert!(y[0].abs() < 1e-12 && y[4].abs() < 1e-12 && y[6].abs() < 1e-12);
    }
}
