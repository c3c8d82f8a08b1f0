//! ONNX `Resize` in f64 (tract computes it in f32), as the ONNX reference defines it: each resized axis in turn,
//! each output position mapped back to an input coordinate by the coordinate transformation, its neighbours (the
//! input padded with its edge values) weighted by the mode's coefficients — nearest (every rounding mode) and linear,
//! antialiased when downsampling, `exclude_outside` renormalising — and `tf_crop_and_resize`
//! reading its region of interest, with the extrapolation value outside it. Output lengths and per-axis scales come
//! from `scales`, or from `sizes` (with the aspect-ratio policy). Where the shape this computes is not tract's, or a
//! window would reach past the padding, the node is left to tract (and marked reduced-precision). `cubic` uses Keys'
//! kernel with `cubic_coeff_a` (antialiased: stretched to a half-width of 2/scale and renormalised), as the ONNX
//! reference writes its coefficients.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::nn::resize::{CoordTransformer, Interpolator};
use tract_onnx_opl::resize::{AspectRatio, CoordTransform, Nearest, Resize};

/// `node` computed in f64, or `None` when it is not a Resize phantom computes (tract's f32 kernel then runs).
pub fn eval(node: &TypedNode, ins: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    let op = node.op_as::<Resize>()?;
    let x = ins
        .first()
        .filter(|x| x.datum_type() == f64::datum_type())?;
    let get = |ix: Option<usize>| ix.and_then(|i| ins.get(i)).filter(|t| t.len() > 0);
    let (scales, lens) = plan(
        op,
        x.shape(),
        get(op.optional_scales_input),
        get(op.optional_sizes_input),
    )?;
    let want = node.outputs.first()?.fact.shape.as_concrete()?;
    if lens.as_slice() != want {
        return None;
    }
    let roi = match op.coord_transformer {
        CoordTransform::TfCropAndResize => Some(roi(op, x.rank(), get(op.optional_roi_input)?)?),
        _ => None,
    };
    let mut data: Vec<f64> = x
        .to_plain_array_view::<f64>()
        .ok()?
        .iter()
        .copied()
        .collect();
    let mut shape: Vec<usize> = x.shape().to_vec();
    for axis in 0..shape.len() {
        let (len_in, len_out, s) = (shape[axis], lens[axis], scales[axis]);
        let crop = roi.as_ref().map(|r| r[axis]);
        if len_in == len_out && s == 1.0 && crop.is_none() {
            continue;
        }
        let taps: Vec<Taps> = (0..len_out)
            .map(|o| taps(op, (o, len_in, len_out, s), crop))
            .collect::<Option<_>>()?;
        data = resample(&data, &shape, axis, &taps);
        shape[axis] = len_out;
    }
    Some(
        tract_ndarray::ArrayD::from_shape_vec(shape, data)
            .map(|a| tvec!(a.into_tvalue()))
            .map_err(Into::into),
    )
}

/// Per-axis scale and output length over the full rank, as the ONNX reference derives them.
fn plan(
    op: &Resize,
    input: &[usize],
    scales: Option<&TValue>,
    sizes: Option<&TValue>,
) -> Option<(Vec<f64>, Vec<usize>)> {
    let axes = op.resized_axes(input.len()).ok()?;
    let (mut per_axis, mut lens) = (vec![1.0; input.len()], input.to_vec());
    if let Some(s) = scales {
        let s = super::decide::f64s(s).filter(|s| s.len() == axes.len())?;
        for (&a, &v) in axes.iter().zip(&s) {
            per_axis[a] = v;
            lens[a] = (v * input[a] as f64) as usize;
        }
        return Some((per_axis, lens));
    }
    let sizes = super::decide::f64s(sizes?).filter(|s| s.len() == axes.len())?;
    let ratios = axes.iter().zip(&sizes).map(|(&a, &v)| v / input[a] as f64);
    let policy = match op.keep_aspect_ratio_policy {
        AspectRatio::Stretch => None,
        AspectRatio::NotLarger => ratios.clone().reduce(f64::min),
        AspectRatio::NotSmaller => ratios.clone().reduce(f64::max),
    };
    for ((&a, &v), r) in axes.iter().zip(&sizes).zip(ratios) {
        per_axis[a] = policy.unwrap_or(r);
        lens[a] = match policy {
            Some(p) => (p * input[a] as f64 + 0.5) as usize,
            None => v as usize,
        };
    }
    Some((per_axis, lens))
}

/// The region of interest per axis of the full rank, `(0, 1)` for the axes left out.
fn roi(op: &Resize, rank: usize, roi: &TValue) -> Option<Vec<(f64, f64)>> {
    let axes = op.resized_axes(rank).ok()?;
    let r = super::decide::f64s(roi).filter(|r| r.len() == 2 * axes.len())?;
    let mut out = vec![(0.0, 1.0); rank];
    for (i, &a) in axes.iter().enumerate() {
        out[a] = (r[i], r[i + axes.len()]);
    }
    Some(out)
}

/// One output position: the input indices it reads (clamped to the edge) and their weights, or the extrapolation
/// value (`tf_crop_and_resize` outside its region).
enum Taps {
    Weighted(Vec<(usize, f64)>),
    Outside(f64),
}

/// The input coordinate output position `o` maps to.
fn coordinate(
    op: &Resize,
    (o, len_in, len_out, s): (usize, usize, usize, f64),
    crop: Option<(f64, f64)>,
) -> f64 {
    let (x, n, width) = (o as f64, len_in as f64, s * len_in as f64);
    match &op.coord_transformer {
        CoordTransform::TfCropAndResize => {
            let (a, b) = crop.unwrap_or((0.0, 1.0));
            let span = (b - a) * (n - 1.0);
            let x = if width == 1.0 {
                span / 2.0
            } else {
                x * span / (width - 1.0)
            };
            x + a * (n - 1.0)
        }
        CoordTransform::Plain(t) => match t {
            CoordTransformer::AlignCorners if width == 1.0 => 0.0,
            CoordTransformer::AlignCorners => x * (n - 1.0) / (width - 1.0),
            CoordTransformer::Asymmetric => x / s,
            CoordTransformer::PytorchHalfPixel if width == 1.0 => -0.5,
            CoordTransformer::HalfPixel | CoordTransformer::PytorchHalfPixel => (x + 0.5) / s - 0.5,
            CoordTransformer::HalfPixelSymmetric => {
                let offset = n / 2.0 * (1.0 - len_out as f64 / width);
                offset + (x + 0.5) / s - 0.5
            }
            CoordTransformer::TfHalfPixelForNn => (x + 0.5) / s,
        },
    }
}

/// The taps of output position `o`, as `_interpolate_1d_with_x` of the ONNX reference computes them.
fn taps(op: &Resize, at: (usize, usize, usize, f64), crop: Option<(f64, f64)>) -> Option<Taps> {
    let (_, len_in, _, s) = at;
    let x = coordinate(op, at, crop);
    if crop.is_some() && (x < 0.0 || x > len_in as f64 - 1.0) {
        return Some(Taps::Outside(op.extrapolation_value() as f64));
    }
    // The neighbour left of x is `base`, and the ratio lies in (0, 1] (an integer x reads its left neighbour at 1).
    let base = if x.fract() == 0.0 { x - 1.0 } else { x.floor() };
    let ratio = x - base;
    let coeffs = coefficients(op, ratio, s)?;
    let n = coeffs.len() as i64;
    let (first, pad) = (base as i64 + 1 - n / 2, (n + 1) / 2);
    if first < -pad || first + n - 1 > len_in as i64 - 1 + pad {
        return None;
    }
    let mut w: Vec<(i64, f64)> = (0..n).map(|j| (first + j, coeffs[j as usize])).collect();
    if op.exclude_outside {
        w.iter_mut()
            .filter(|(i, _)| *i < 0 || *i >= len_in as i64)
            .for_each(|t| t.1 = 0.0);
        let sum: f64 = w.iter().map(|t| t.1).sum();
        w.iter_mut().for_each(|t| t.1 /= sum);
    }
    let clamp = |i: i64| i.clamp(0, len_in as i64 - 1) as usize;
    Some(Taps::Weighted(
        w.into_iter().map(|(i, c)| (clamp(i), c)).collect(),
    ))
}

/// The mode's coefficients for the neighbours around the coordinate (ratio in (0, 1] past the left one).
fn coefficients(op: &Resize, ratio: f64, scale: f64) -> Option<Vec<f64>> {
    Some(match (&op.interpolator, op.antialias && scale < 1.0) {
        (Interpolator::Nearest, _) => {
            let right = ratio == 1.0
                || match op.nearest {
                    Nearest::RoundPreferFloor => ratio > 0.5,
                    Nearest::RoundPreferCeil => ratio >= 0.5,
                    Nearest::Floor => false,
                    Nearest::Ceil => true,
                };
            vec![!right as u8 as f64, right as u8 as f64]
        }
        (Interpolator::Linear, false) => vec![1.0 - ratio, ratio],
        (Interpolator::Linear, true) => {
            antialiased(ratio, scale, |x| (1.0 - x.abs()).clamp(0.0, 1.0))
        }
        (Interpolator::Cubic, false) => cubic(ratio, op.cubic_coeff_a() as f64),
        (Interpolator::Cubic, true) => {
            let a = op.cubic_coeff_a() as f64;
            antialiased_over(2.0, ratio, scale, |x| keys(x.abs(), a))
        }
    })
}

/// Keys' cubic convolution kernel with parameter `a` at distance `x` ≥ 0.
fn keys(x: f64, a: f64) -> f64 {
    match x {
        x if x <= 1.0 => ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
        x if x < 2.0 => ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a,
        _ => 0.0,
    }
}

/// The four cubic coefficients around a coordinate `ratio` past its left neighbour, as the ONNX reference writes
/// them.
fn cubic(ratio: f64, a: f64) -> Vec<f64> {
    vec![
        keys(ratio + 1.0, a),
        keys(ratio, a),
        keys(1.0 - ratio, a),
        keys(2.0 - ratio, a),
    ]
}

/// The linear filter stretched by 1/scale (downsampling), normalised to sum 1.
fn antialiased(ratio: f64, scale: f64, f: impl Fn(f64) -> f64) -> Vec<f64> {
    antialiased_over(1.0, ratio, scale, f)
}

/// A filter of half-width `support` stretched by 1/scale (downsampling), normalised to sum 1.
fn antialiased_over(support: f64, ratio: f64, scale: f64, f: impl Fn(f64) -> f64) -> Vec<f64> {
    let start = (-support / scale).floor() as i64 + 1;
    let c: Vec<f64> = (start..2 - start)
        .map(|i| f(scale * (i as f64 - ratio)))
        .collect();
    let sum: f64 = c.iter().sum();
    c.into_iter().map(|v| v / sum).collect()
}

/// `data` (of `shape`, row-major) resampled along `axis` by `taps`, one per output position.
fn resample(data: &[f64], shape: &[usize], axis: usize, taps: &[Taps]) -> Vec<f64> {
    let inner: usize = shape[axis + 1..].iter().product();
    let (outer, len_in): (usize, usize) = (shape[..axis].iter().product(), shape[axis]);
    let mut out = Vec::with_capacity(outer * taps.len() * inner);
    for o in 0..outer {
        let block = &data[o * len_in * inner..(o + 1) * len_in * inner];
        for t in taps {
            for k in 0..inner {
                out.push(match t {
                    Taps::Outside(v) => *v,
                    Taps::Weighted(w) => w.iter().map(|&(i, c)| c * block[i * inner + k]).sum(),
                });
            }
        }
    }
    out
}
