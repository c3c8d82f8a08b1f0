//! ONNX's `Upsample` (opsets 7 and 9, deprecated since 10; tract has none): every axis scaled, the output's
//! extent floor(extent · scale). Scales come from the `scales` attribute (opset 7; opset 1's `height_scale` and
//! `width_scale` name the last two axes) or the second input (opset 9), whose value must be known when the model is
//! typed. As ONNX Runtime computes the opsets before Resize (ONNX's reference covers integral `nearest` only, which
//! this agrees with): an output coordinate x maps to x / scale in the input (`asymmetric`); `nearest` takes the
//! input element at its integer part (its ceiling when the scale is below 1); `linear` (also `bilinear`)
//! interpolates each axis in turn between the elements at the clamped coordinate's floor and the next (the last
//! element past the end). Floats are computed in f64; other types pass through `nearest` unchanged, and `linear`
//! computes them in f64 and truncates back.

use tract_onnx::prelude::tract_ndarray::{ArrayD, IxDyn};
use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::dispatch_datum;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::signal::known;
use super::util::{fact, opt, string, values};

/// Claimed in any domain: tract lacks Upsample.
pub(super) const TABLE: &[Row] = &[Row::any_domain("Upsample", &Upsample)];

/// The interpolation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
}

fn mode(n: &Node) -> TractResult<Mode> {
    match string(n, "mode", "nearest").as_str() {
        "nearest" => Ok(Mode::Nearest),
        "linear" | "bilinear" => Ok(Mode::Linear),
        other => anyhow::bail!("Upsample `{}`: unknown mode `{other}`", n.proto.name),
    }
}

/// The scale of every axis of a rank-`rank` input: the input's value `given`, else the attributes.
fn scales(n: &Node, rank: usize, given: Option<&Tensor>) -> TractResult<Vec<f64>> {
    let s = match given {
        Some(t) => values::<f64>(t)?,
        None if !n.floats("scales").is_empty() => n.floats("scales"),
        None => {
            // Opset 1: the last two axes' scales, the others 1.
            let mut s = vec![1.0; rank];
            if rank >= 2 {
                s[rank - 2] = n.float("height_scale", 1.0);
                s[rank - 1] = n.float("width_scale", 1.0);
            }
            s
        }
    };
    anyhow::ensure!(
        s.len() == rank && s.iter().all(|&v| v > 0.0),
        "Upsample `{}`: scales {s:?} for an input of rank {rank} (expected one positive scale per axis)",
        n.proto.name
    );
    Ok(s)
}

/// The output's shape: each extent times its scale, rounded down.
fn out_shape(shape: &[usize], scales: &[f64]) -> Vec<usize> {
    shape
        .iter()
        .zip(scales)
        .map(|(&d, &s)| (d as f64 * s).floor() as usize)
        .collect()
}

/// The (input index, weight) taps of output index `o` on an axis of `len` input elements scaled by `scale`.
fn taps(mode: Mode, o: usize, len: usize, scale: f64) -> Vec<(usize, f64)> {
    let x = o as f64 / scale;
    let last = len - 1;
    match mode {
        Mode::Nearest => {
            let i = if scale < 1.0 { x.ceil() } else { x.trunc() };
            vec![((i as usize).min(last), 1.0)]
        }
        Mode::Linear => {
            let x = x.clamp(0.0, last as f64);
            let lo = (x as usize).min(last);
            let hi = (lo + 1).min(last);
            match lo == hi {
                true => vec![(lo, 1.0)],
                false => vec![(lo, 1.0 - (x - lo as f64)), (hi, x - lo as f64)],
            }
        }
    }
}

/// Each output element's (flat input index, weight) taps: every axis's taps multiplied out.
fn plan(m: Mode, shape: &[usize], scales: &[f64]) -> Vec<Vec<(usize, f64)>> {
    let out = out_shape(shape, scales);
    let axes: Vec<Vec<Vec<(usize, f64)>>> = (0..shape.len())
        .map(|a| {
            (0..out[a])
                .map(|o| taps(m, o, shape[a], scales[a]))
                .collect()
        })
        .collect();
    let strides: Vec<usize> = (0..shape.len())
        .map(|a| shape[a + 1..].iter().product())
        .collect();
    let total: usize = out.iter().product();
    let mut plan = Vec::with_capacity(total);
    let mut index = vec![0usize; out.len()];
    for _ in 0..total {
        let mut acc = vec![(0usize, 1.0f64)];
        for (a, &o) in index.iter().enumerate() {
            let stride = strides[a];
            acc = (acc.iter())
                .flat_map(|&(f, w)| {
                    axes[a][o]
                        .iter()
                        .map(move |&(i, tw)| (f + i * stride, w * tw))
                })
                .collect();
        }
        plan.push(acc);
        // The next output index, row-major.
        for a in (0..out.len()).rev() {
            index[a] += 1;
            if index[a] < out[a] {
                break;
            }
            index[a] = 0;
        }
    }
    plan
}

/// The elements of `x` at flat indices `src`, shaped `shape` (nearest: values copied in their own type).
fn pick<T: Datum>(x: &Tensor, src: &[usize], shape: &[usize]) -> TractResult<Tensor> {
    let flat: Vec<T> = x.to_plain_array_view::<T>()?.iter().cloned().collect();
    let out: Vec<T> = src.iter().map(|&i| flat[i].clone()).collect();
    Ok(ArrayD::from_shape_vec(IxDyn(shape), out)?.into_tensor())
}

struct Upsample;

impl Upsample {
    /// X resized: `nearest` copies elements in their own type, `linear` mixes them in f64.
    fn resize(n: &Node, x: &Tensor, scales: &[f64]) -> TractResult<Tensor> {
        let m = mode(n)?;
        let shape = out_shape(x.shape(), scales);
        if shape.iter().product::<usize>() == 0 || x.len() == 0 {
            return Tensor::zero_dt(x.datum_type(), &shape);
        }
        let plan = plan(m, x.shape(), scales);
        if m == Mode::Nearest {
            let src: Vec<usize> = plan.iter().map(|t| t[0].0).collect();
            return dispatch_datum!(pick(x.datum_type())(x, &src, &shape));
        }
        let xs = values::<f64>(x)?;
        let y: Vec<f64> = (plan.iter())
            .map(|t| t.iter().map(|&(i, w)| w * xs[i]).sum())
            .collect();
        Ok(ArrayD::from_shape_vec(IxDyn(&shape), y)?.into_tensor())
    }
}

impl Kernel for Upsample {
    fn value_slots(&self) -> &'static [usize] {
        &[1]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        mode(n)?;
        let given = match ins.get(1).copied().flatten() {
            Some(_) => Some(known(n, values, 1, "scales")?),
            None => None,
        };
        let s = scales(n, shape.len(), given)?;
        Ok(vec![(*dt, out_shape(shape, &s))])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let s = scales(n, x.rank(), ins.get(1).copied().flatten())?;
        Ok(vec![Self::resize(n, x, &s)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(mode: &str) -> Node {
        Node::new(&tract_onnx::pb::NodeProto {
            op_type: "Upsample".into(),
            attribute: vec![tract_onnx::pb::AttributeProto {
                name: "mode".into(),
                s: mode.as_bytes().to_vec(),
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    #[test]
    fn nearest_repeats_each_element() {
        let x = Tensor::from_shape(&[1, 1, 2, 2], &[1i32, 2, 3, 4]).unwrap();
        let y = Upsample::resize(&node("nearest"), &x, &[1.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(y.shape(), [1, 1, 4, 6]);
        assert_eq!(y.datum_type(), i32::datum_type());
        let v = values::<i32>(&y).unwrap();
        assert_eq!(&v[..12], &[1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2]);
    }

    #[test]
    fn linear_interpolates_and_holds_the_last_element() {
        let x = Tensor::from_shape(&[2], &[1.0f64, 3.0]).unwrap();
        let y = Upsample::resize(&node("linear"), &x, &[2.0]).unwrap();
        assert_eq!(values::<f64>(&y).unwrap(), [1.0, 2.0, 3.0, 3.0]);
    }
}
