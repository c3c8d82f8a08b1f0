//! ORT's `GatherBlockQuantized` on a table stored in a narrow format (int4, uint4, float8, float4), held by the
//! reference in its carrier (one value per element, [`super::super::formats`]), as ORT's CPU kernel computes it:
//! any `gather_axis` and `quantize_axis`; `(q − zero_point) · scale` with the scale of each element's block along
//! `quantize_axis` (`block_size`; for the float formats 0 means the whole axis, and a scale dimension of 1
//! broadcasts), zero points of the table's format shaped like the scales (default 0; the float formats take
//! none); an index outside the table gives zeros. Only the gathered elements are dequantized.

use tract_onnx::prelude::*;

use super::node::{Fact, Node};
use super::util::{f64s, fact, opt, shaped, strides, values};
use crate::tensor::formats::Format;

/// Normalizes `axis` for rank `rank`.
fn axis(n: &Node, name: &str, default: i64, rank: usize) -> TractResult<usize> {
    let a = n.int(name, default);
    let k = if a < 0 { a + rank as i64 } else { a };
    usize::try_from(k)
        .ok()
        .filter(|&k| k < rank)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "GatherBlockQuantized `{}`: {name} {a} outside rank {rank}",
                n.proto.name
            )
        })
}

/// The output shape: the table's with its gather axis replaced by the indices' shape.
fn out_shape(data: &[usize], idx: &[usize], g: usize) -> Vec<usize> {
    let mut s = data[..g].to_vec();
    s.extend_from_slice(idx);
    s.extend_from_slice(&data[g + 1..]);
    s
}

pub fn facts(n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
    let (data, idx, scales) = (fact(n, ins, 0)?, fact(n, ins, 1)?, fact(n, ins, 2)?);
    let g = axis(n, "gather_axis", 0, data.1.len())?;
    Ok(vec![(scales.0, out_shape(&data.1, &idx.1, g))])
}

/// The scale index of the element at `at` (a multi-index of the table); `st` are the scales' strides.
fn scale_index(at: &[usize], scales: &[usize], st: &[usize], q: usize, block: usize) -> usize {
    at.iter()
        .enumerate()
        .map(|(a, &i)| {
            let j = match (a == q, scales[a] == 1) {
                (true, _) => i / block,
                (false, true) => 0,
                (false, false) => i,
            };
            j * st[a]
        })
        .sum()
}

/// Checks the scales (and zero points) against the table, returning the block size.
fn block_of(n: &Node, f: Format, data: &[usize], scales: &[usize], q: usize) -> TractResult<usize> {
    let b = n.int("block_size", 128).max(0) as usize;
    let block = match (f.is_float(), b) {
        (true, 0) => data[q].max(1),
        (_, 0) => anyhow::bail!("GatherBlockQuantized `{}`: block_size 0", n.proto.name),
        (_, b) => b,
    };
    let fits = scales.len() == data.len()
        && (0..data.len()).all(|a| match a == q {
            true => scales[a] == data[a].div_ceil(block),
            false => scales[a] == data[a] || (f.is_float() && scales[a] == 1),
        });
    anyhow::ensure!(
        fits,
        "GatherBlockQuantized `{}`: scales of shape {scales:?} do not fit a table of shape {data:?} (quantize_axis \
         {q}, block_size {block})",
        n.proto.name
    );
    Ok(block)
}

pub fn eval(n: &Node, f: Format, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
    let data = f64s(n, ins, 0)?;
    let shape = data.shape().to_vec();
    let (g, q) = (
        axis(n, "gather_axis", 0, shape.len())?,
        axis(n, "quantize_axis", 1, shape.len())?,
    );
    let scales = f64s(n, ins, 2)?;
    let block = block_of(n, f, &shape, scales.shape(), q)?;
    let zp = match ins.get(3).copied().flatten() {
        Some(z) => {
            anyhow::ensure!(
                !f.is_float(),
                "GatherBlockQuantized `{}`: {} tables take no zero points",
                n.proto.name,
                f.name()
            );
            anyhow::ensure!(
                z.shape() == scales.shape(),
                "GatherBlockQuantized `{}`: zero points of shape {:?}, scales {:?}",
                n.proto.name,
                z.shape(),
                scales.shape()
            );
            Some(values::<f64>(z)?)
        }
        None => None,
    };
    let (d, s) = (
        data.as_slice().expect("standard"),
        scales.as_slice().expect("standard"),
    );
    let indices = values::<i64>(opt(n, ins, 1)?)?;
    let out_dims = out_shape(&shape, opt(n, ins, 1)?.shape(), g);
    let (inner, rows) = (shape[g + 1..].iter().product::<usize>(), shape[g] as i64);
    let outer: usize = shape[..g].iter().product();
    let (dst, sst) = (strides(&shape), strides(scales.shape()));
    let mut out = Vec::with_capacity(out_dims.iter().product());
    let mut at = vec![0usize; shape.len()];
    for o in 0..outer {
        for &i in &indices {
            let j = if i < 0 { i + rows } else { i };
            if !(0..rows).contains(&j) {
                out.extend(std::iter::repeat_n(0.0, inner));
                continue;
            }
            let base = o * rows as usize * inner + j as usize * inner;
            for (e, &v) in d.iter().enumerate().skip(base).take(inner) {
                let mut rest = e;
                for (a, st) in dst.iter().enumerate() {
                    at[a] = rest / st;
                    rest %= st;
                }
                let k = scale_index(&at, scales.shape(), &sst, q, block);
                let z = zp.as_ref().map_or(0.0, |z| z[k]);
                out.push((v - z) * s[k]);
            }
        }
    }
    Ok(vec![shaped(&out_dims, out)?])
}
