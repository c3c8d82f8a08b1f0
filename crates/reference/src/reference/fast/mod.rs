//! phantom's fast f64 kernels for the heavy ops, in place of tract's generic f64 loops: convolution
//! ([`conv`]), transposed convolution ([`deconv`]) and two-operand contractions ([`einsum`]: MatMul, Gemm, Einsum,
//! attention products), both on a parallel f64 GEMM ([`gemm`]), and element-wise arithmetic on large values
//! ([`binary`]) on both cores, and ONNX `ConvInteger` ([`qconv`]: integer codes, exact on the f64 GEMM). They take
//! a tract node only when its operands are f64 (integer codes for `ConvInteger`) and its form is one they cover;
//! anything else (requantized outputs, other layouts, reductions over one operand) stays with tract.

pub(super) mod binary;
mod conv;
mod deconv;
mod einsum;
pub mod gemm;
mod qconv;
mod sdpa;

use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::binary::TypedBinOp;
use tract_onnx::tract_core::ops::cnn::{Conv, Deconv, KernelFormat, PoolSpec};
use tract_onnx::tract_core::ops::einsum::EinSum;
use tract_onnx::tract_core::ops::nn::DataFormat;
use tract_transformers::ops::sdpa::Sdpa;

pub use conv::Geometry;
pub use einsum::Roles;

/// `PHANTOM_TRACT_KERNELS=1` leaves every node to tract (to time the difference, or to rule these kernels out);
/// each node's reference kind in the report says which ran.
fn tract_only() -> bool {
    static ONLY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONLY.get_or_init(|| std::env::var_os("PHANTOM_TRACT_KERNELS").is_some_and(|v| v == "1"))
}

/// A fast kernel's entry: the node evaluated when its op is the one the kernel covers (`None`: tract keeps it).
type Eval = fn(&TypedNode, &TVec<TValue>) -> Option<TractResult<TVec<TValue>>>;

/// The heavy ops with a fast kernel, one row each: the tract op, whether its operands must all be f64, and its
/// kernel. The first row whose kernel takes the node evaluates it.
const TABLE: &[(&str, bool, Eval)] = &[
    ("Sdpa", false, |n, i| sdpa_node(n.op_as::<Sdpa>()?, i)),
    ("ConvInteger", false, |n, i| {
        qconv::node(n.op_as::<Conv>().filter(|c| c.q_params.is_some())?, i)
    }),
    ("Conv", true, |n, i| {
        conv_node(n.op_as::<Conv>().filter(|c| c.q_params.is_none())?, i)
    }),
    ("EinSum", true, |n, i| einsum_node(n.op_as::<EinSum>()?, i)),
    ("Deconv", true, |n, i| deconv_node(n.op_as::<Deconv>()?, i)),
];

/// Evaluates `node` on a fast kernel when it is one ([`TABLE`]); `None` means tract keeps it.
pub fn eval(node: &TypedNode, inputs: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    if tract_only() {
        return None;
    }
    let wide = inputs.iter().all(|i| i.datum_type() == f64::datum_type());
    (TABLE.iter())
        .filter(|(_, f64_only, _)| wide || !f64_only)
        .find_map(|(_, _, eval)| eval(node, inputs))
}

/// Evaluates an element-wise f64 node on both cores when it is large enough ([`binary`]), reusing an operand only
/// it holds, and f64 `Min`/`Max` at any size (even under `PHANTOM_TRACT_KERNELS=1`: tract's drop NaN); `None`
/// means tract keeps it (and `inputs` are as they were).
pub fn eval_binary(
    node: &TypedNode,
    inputs: &mut TVec<TValue>,
) -> Option<TractResult<TVec<TValue>>> {
    let op = node.op_as::<TypedBinOp>()?;
    if tract_only() && !binary::is_extremum(op) {
        return None;
    }
    binary::binary_node(op, inputs)
}

/// The geometry of a float `Conv` on NCHW data with an OIHW kernel, 1 to 3 spatial axes.
pub fn geometry(c: &Conv, x: &[usize], w: &[usize]) -> Option<Geometry> {
    if c.q_params.is_some() {
        return None;
    }
    any_geometry(c, x, w)
}

/// The geometry of a `Conv`, float or quantized, on NCHW data with an OIHW kernel, 1 to 3 spatial axes.
fn any_geometry(c: &Conv, x: &[usize], w: &[usize]) -> Option<Geometry> {
    if c.kernel_fmt != KernelFormat::OIHW || w.len() < 2 {
        return None;
    }
    let (hw, c_in) = spatial(&c.pool_spec, x, w)?;
    let pads = c.pool_spec.computed_padding(&hw);
    let out: Vec<(usize, usize)> = pads.iter().map(|p| (p.convoluted, p.pad_before)).collect();
    let g = laid_out(&c.pool_spec, x, w, c.group, (c_in, w[0]), &out)?;
    (w[1] * c.group == c_in).then_some(g)
}

/// The geometry of a float `Deconv` (ONNX `ConvTranspose`, its kernel regrouped by tract-onnx to
/// [C_out, C_in/group, *kernel]).
pub fn deconv_geometry(d: &Deconv, x: &[usize], w: &[usize]) -> Option<Geometry> {
    if d.kernel_format != KernelFormat::OIHW || w.len() < 2 {
        return None;
    }
    let (hw, c_in) = spatial(&d.pool_spec, x, w)?;
    let ps = &d.pool_spec;
    let pads = (ps.padding)
        .compute_for_deconv(
            &hw,
            &ps.kernel_shape,
            &ps.dilations(),
            &ps.strides(),
            &d.adjustments,
        )
        .ok()?;
    let out: Vec<(usize, usize)> = pads
        .iter()
        .map(|p| (p.deconvoluted, p.pad_before))
        .collect();
    let g = laid_out(ps, x, w, d.group, (c_in, w[0]), &out)?;
    (w[1] * d.group == c_in && ps.output_channels == g.c_out).then_some(g)
}

/// The spatial extents of `x` and its channel count, for NCHW data and a kernel of the matching rank (1–3).
fn spatial(ps: &PoolSpec, x: &[usize], w: &[usize]) -> Option<(Vec<usize>, usize)> {
    if !matches!(ps.data_format, DataFormat::NCHW | DataFormat::CHW) {
        return None;
    }
    let shape = ps.data_format.shape(x.to_vec()).ok()?;
    let hw = shape.hw_dims().to_vec();
    let rank = hw.len();
    let ok = (1..=3).contains(&rank) && w.len() == rank + 2 && ps.kernel_shape.len() == rank;
    ok.then(|| (hw, *shape.c()))
}

/// A [`Geometry`] with the spatial axes padded to three; `out` holds each axis' (output extent, pad before).
fn laid_out(
    ps: &PoolSpec,
    x: &[usize],
    w: &[usize],
    group: usize,
    (c_in, c_out): (usize, usize),
    out: &[(usize, usize)],
) -> Option<Geometry> {
    if group == 0 || c_in % group != 0 || c_out % group != 0 {
        return None;
    }
    let rank = out.len();
    let pad3 = |f: &dyn Fn(usize) -> usize, fill: usize| {
        let mut a = [fill; 3];
        (0..rank).for_each(|i| a[3 - rank + i] = f(i));
        a
    };
    let (strides, dilations) = (ps.strides(), ps.dilations());
    Some(Geometry {
        batch: if x.len() == rank + 2 { x[0] } else { 1 },
        c_in,
        c_out,
        group,
        input: pad3(&|i| x[x.len() - rank + i], 1),
        kernel: pad3(&|i| w[2 + i], 1),
        output: pad3(&|i| out[i].0, 1),
        stride: pad3(&|i| strides[i], 1),
        dilation: pad3(&|i| dilations[i], 1),
        pad_before: pad3(&|i| out[i].1, 0),
    })
}

fn conv_node(c: &Conv, inputs: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    let [x, w, _] = &inputs[..] else {
        return None;
    };
    let g = geometry(c, x.shape(), w.shape())?;
    spatial_node(g, inputs, conv::conv)
}

fn deconv_node(d: &Deconv, inputs: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    let [x, w, _] = &inputs[..] else {
        return None;
    };
    let g = deconv_geometry(d, x.shape(), w.shape())?;
    spatial_node(g, inputs, deconv::deconv)
}

/// A convolution-like kernel: (geometry, x, w, bias) → y, written into a zeroed y.
type SpatialKernel = fn(&Geometry, &[f64], &[f64], &[f64], &mut [f64]);

/// Runs a convolution-like kernel on (x, w, bias) and shapes its result like x with the channel count and
/// spatial extents of `g`.
fn spatial_node(
    g: Geometry,
    inputs: &TVec<TValue>,
    kernel: SpatialKernel,
) -> Option<TractResult<TVec<TValue>>> {
    let [x, w, bias] = &inputs[..] else {
        return None;
    };
    if bias.len() > 1 && bias.len() != g.c_out {
        return None;
    }
    let out_shape = out_shape(&g, x.shape(), w.rank());
    Some((|| {
        let (x, w, bias) = (
            x.try_as_plain_ram()?,
            w.try_as_plain_ram()?,
            bias.try_as_plain_ram()?,
        );
        // Written in place: a kernel's own vector would be copied into tract's tensor.
        let mut y = Tensor::zero::<f64>(&out_shape)?;
        {
            let mut plain = y.try_as_plain_ram_mut()?;
            kernel(
                &g,
                x.as_slice::<f64>()?,
                w.as_slice::<f64>()?,
                bias.as_slice::<f64>()?,
                plain.as_slice_mut::<f64>()?,
            );
        }
        Ok(tvec!(y.into_tvalue()))
    })())
}

/// [N,] C_out, *output: the input's layout with the channel and spatial extents of `g`.
fn out_shape(g: &Geometry, x: &[usize], w_rank: usize) -> Vec<usize> {
    let mut out = x.to_vec();
    let (rank, spatial) = (out.len(), w_rank - 2);
    out[rank - spatial - 1] = g.c_out;
    out[rank - spatial..].copy_from_slice(&g.output[3 - spatial..]);
    out
}

/// The roles of each axis of a two-operand float `EinSum`, or `None` for forms the GEMM does not cover (an axis
/// repeated in one operand, or summed over one operand alone).
pub fn roles(e: &EinSum) -> Option<Roles> {
    if e.q_params.is_some() || e.axes.input_count() != 2 || e.axes.output_count() != 1 {
        return None;
    }
    let mut r = Roles::default();
    for axis in e.axes.iter_all_axes() {
        let one = |v: &TVec<usize>| {
            if v.len() > 1 {
                Err(())
            } else {
                Ok(v.first().copied())
            }
        };
        let (a, b, o) = (
            one(&axis.inputs[0]).ok()?,
            one(&axis.inputs[1]).ok()?,
            one(&axis.outputs[0]).ok()?,
        );
        match (a, b, o) {
            (Some(a), Some(b), None) => r.k.push((a, b)),
            (Some(a), None, Some(o)) => r.m.push((a, o)),
            (None, Some(b), Some(o)) => r.n.push((b, o)),
            (a, b, Some(o)) => r.batch.push((a, b, o)),
            _ => return None,
        }
    }
    Some(r)
}

fn einsum_node(e: &EinSum, inputs: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    let [a, b] = &inputs[..] else {
        return None;
    };
    let r = roles(e)?;
    let (a, b) = (
        a.to_plain_array_view::<f64>().ok()?,
        b.to_plain_array_view::<f64>().ok()?,
    );
    let y = einsum::contract(a, b, &r)?;
    Some(Ok(tvec!(y.into_tvalue())))
}

fn sdpa_node(s: &Sdpa, inputs: &TVec<TValue>) -> Option<TractResult<TVec<TValue>>> {
    let f64s = |vs: &[TValue]| vs.iter().all(|v| v.datum_type() == f64::datum_type());
    if inputs.len() < 3 || !f64s(&inputs[..3]) || (s.is_causal && inputs.len() > 3) {
        return None;
    }
    let (q, k, v) = (inputs[0].shape(), inputs[1].shape(), inputs[2].shape());
    let rank = q.len();
    if !(rank == 3 || rank == 4) || k.len() != rank || v.len() != rank {
        return None;
    }
    // Rank 3 is one head: [B, M, D].
    let at = |s: &[usize], i: usize| {
        if rank == 4 {
            s[i]
        } else if i == 1 {
            1
        } else {
            s[i - 1]
        }
    };
    let d = sdpa::Dims {
        batch: q[0],
        q_heads: at(q, 1),
        kv_heads: at(k, 1),
        rows: at(q, 2),
        cols: at(k, 2),
        depth: at(q, 3),
        v_depth: at(v, 3),
    };
    let consistent = k[0] == d.batch
        && v[0] == d.batch
        && d.kv_heads > 0
        && d.q_heads.is_multiple_of(d.kv_heads);
    if !consistent || at(k, 3) != d.depth || at(v, 1) != d.kv_heads || at(v, 2) != d.cols {
        return None;
    }
    let scale = match &s.scale {
        Some(t) => t.cast_to_scalar::<f64>().ok()?,
        None => 1.0 / (d.depth as f64).sqrt(),
    };
    Some((|| {
        let plain: Vec<_> = inputs
            .iter()
            .map(|i| i.try_as_plain_ram())
            .collect::<TractResult<_>>()?;
        let mask = match inputs.get(3) {
            None if s.is_causal => sdpa::Mask::Causal,
            None => sdpa::Mask::None,
            Some(m) => {
                let Some(strides) = mask_strides(m.shape(), &d) else {
                    anyhow::bail!(
                        "attention mask of shape {:?} does not broadcast to the scores",
                        m.shape()
                    )
                };
                match m.datum_type() {
                    DatumType::Bool => sdpa::Mask::Keep(plain[3].as_slice::<bool>()?, strides),
                    DatumType::F64 => sdpa::Mask::Add(plain[3].as_slice::<f64>()?, strides),
                    other => anyhow::bail!("attention mask of type {other:?}"),
                }
            }
        };
        let (qs, ks, vs) = (
            plain[0].as_slice::<f64>()?,
            plain[1].as_slice::<f64>()?,
            plain[2].as_slice::<f64>()?,
        );
        let y = sdpa::attention(d, qs, ks, vs, &mask, scale);
        let mut shape = q.to_vec();
        shape[rank - 1] = d.v_depth;
        Ok(tvec!(
            tract_ndarray::ArrayD::from_shape_vec(shape, y)?.into_tvalue()
        ))
    })())
}

/// Element strides of a mask broadcast over the scores [B, Hq, M, N] (a rank-3 mask has no head axis); `None`
/// when an extent is neither 1 nor the scores'.
fn mask_strides(shape: &[usize], d: &sdpa::Dims) -> Option<[usize; 4]> {
    let full = [d.batch, d.q_heads, d.rows, d.cols];
    let shape: Vec<usize> = match shape.len() {
        4 => shape.to_vec(),
        3 => vec![shape[0], 1, shape[1], shape[2]],
        _ => return None,
    };
    let mut strides = [0; 4];
    let mut step = 1;
    for a in (0..4).rev() {
        if shape[a] == full[a] && full[a] != 1 {
            strides[a] = step;
        } else if shape[a] != 1 {
            return None;
        }
        step *= shape[a];
    }
    Some(strides)
}

#[cfg(test)]
mod tests;
