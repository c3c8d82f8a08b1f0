//! Matrix products: FusedMatMul (alpha and transposes folded into a MatMul) and MatMulNBits (block-quantized
//! weights, dequantized exactly in f64), on phantom's f64 GEMM.

use tract_onnx::prelude::tract_ndarray::{ArrayD, IxDyn};
use tract_onnx::prelude::*;

use super::super::fast::gemm::{matmul, Mat};
use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, f64s_opt, fact, float_type, opt, values};

pub(super) const TABLE: &[Row] = &[
    Row::new("FusedMatMul", &Fused),
    Row::new("MatMulNBits", &NBits),
];

/// A matrix operand: its batch shape and its last two extents after an optional transpose.
struct Operand {
    batch: Vec<usize>,
    rows: usize,
    cols: usize,
    trans: bool,
}

impl Operand {
    fn new(shape: &[usize], trans: bool) -> TractResult<Operand> {
        anyhow::ensure!(shape.len() >= 2, "matrix operand of rank {}", shape.len());
        let (r, c) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        let (rows, cols) = if trans { (c, r) } else { (r, c) };
        Ok(Operand {
            batch: shape[..shape.len() - 2].to_vec(),
            rows,
            cols,
            trans,
        })
    }

    /// The stored matrix at flat offset `off` as a view of its (possibly transposed) rows × cols.
    fn mat<'a>(&self, data: &'a [f64], off: usize) -> Mat<'a> {
        let stored_cols = if self.trans { self.rows } else { self.cols };
        let (rs, cs) = if self.trans {
            (1, stored_cols)
        } else {
            (stored_cols, 1)
        };
        Mat {
            data: &data[off..],
            rs,
            cs,
        }
    }
}

/// numpy's broadcast of two batch shapes.
fn broadcast(a: &[usize], b: &[usize]) -> TractResult<Vec<usize>> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let da = if i + a.len() >= r {
                a[i + a.len() - r]
            } else {
                1
            };
            let db = if i + b.len() >= r {
                b[i + b.len() - r]
            } else {
                1
            };
            match (da, db) {
                (x, y) if x == y => Ok(x),
                (1, y) => Ok(y),
                (x, 1) => Ok(x),
                _ => anyhow::bail!("batch shapes {a:?} and {b:?} do not broadcast"),
            }
        })
        .collect()
}

/// The flat matrix index in a batch of shape `own` that output batch index `flat` (over `out`) reads.
fn source_matrix(flat: usize, out: &[usize], own: &[usize]) -> usize {
    let (mut rest, mut idx, mut stride) = (flat, 0, 1);
    for (i, &d) in out.iter().enumerate().rev() {
        let coord = rest % d.max(1);
        rest /= d.max(1);
        let j = i as isize - (out.len() - own.len()) as isize;
        if j >= 0 {
            let od = own[j as usize];
            idx += if od == 1 { 0 } else { coord } * stride;
            stride *= od;
        }
    }
    idx
}

/// numpy's `matmul(op(a), op(b))` for operands of rank ≥ 2 with broadcast batch axes; `op` transposes the last two
/// axes where asked. Returns the product's shape and row-major data.
pub fn batched(
    a: &[f64],
    a_shape: &[usize],
    ta: bool,
    b: &[f64],
    b_shape: &[usize],
    tb: bool,
) -> TractResult<(Vec<usize>, Vec<f64>)> {
    let (oa, ob) = (Operand::new(a_shape, ta)?, Operand::new(b_shape, tb)?);
    anyhow::ensure!(
        oa.cols == ob.rows,
        "inner extents differ: {a_shape:?}{} · {b_shape:?}{}",
        if ta { "ᵀ" } else { "" },
        if tb { "ᵀ" } else { "" }
    );
    let batch = broadcast(&oa.batch, &ob.batch)?;
    let (m, k, n) = (oa.rows, oa.cols, ob.cols);
    let count: usize = batch.iter().product();
    let mut out = vec![0.0; count * m * n];
    for (i, c) in out.chunks_mut((m * n).max(1)).enumerate().take(count) {
        let ia = source_matrix(i, &batch, &oa.batch) * m * k;
        let ib = source_matrix(i, &batch, &ob.batch) * k * n;
        matmul(m, k, n, oa.mat(a, ia), ob.mat(b, ib), c);
    }
    let mut shape = batch;
    shape.extend([m, n]);
    Ok((shape, out))
}

/// Shape of `op(a)·op(b)` with numpy's 1-D promotion (a vector operand gains an axis that the result drops).
fn product_shape(a: &[usize], ta: bool, b: &[usize], tb: bool) -> TractResult<Vec<usize>> {
    let (pa, pb) = promote(a, b);
    let (oa, ob) = (
        Operand::new(&pa, ta && a.len() > 1)?,
        Operand::new(&pb, tb && b.len() > 1)?,
    );
    anyhow::ensure!(oa.cols == ob.rows, "inner extents differ: {a:?} · {b:?}");
    let mut shape = broadcast(&oa.batch, &ob.batch)?;
    if a.len() > 1 {
        shape.push(oa.rows);
    }
    if b.len() > 1 {
        shape.push(ob.cols);
    }
    Ok(shape)
}

fn promote(a: &[usize], b: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let pa = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let pb = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    (pa, pb)
}

/// FusedMatMul: Y = alpha · op(A) · op(B). transBatchA/B first move an operand's leading axis to just before its
/// last one ([d0, d1, …, dk, e] → [d1, …, dk, d0, e]), as ORT's FusedMatMul does; transA/transB then transpose the
/// last two axes.
struct Fused;

fn trans_batch(shape: &[usize], on: bool) -> Vec<usize> {
    if !on || shape.len() < 3 {
        return shape.to_vec();
    }
    let r = shape.len();
    let mut s: Vec<usize> = shape[1..r - 1].to_vec();
    s.push(shape[0]);
    s.push(shape[r - 1]);
    s
}

fn trans_batch_data(a: ArrayD<f64>, on: bool) -> ArrayD<f64> {
    let r = a.ndim();
    if !on || r < 3 {
        return a;
    }
    let mut perm: Vec<usize> = (1..r - 1).collect();
    perm.extend([0, r - 1]);
    a.permuted_axes(IxDyn(&perm))
        .as_standard_layout()
        .into_owned()
}

impl Kernel for Fused {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (a, b) = (fact(n, ins, 0)?, fact(n, ins, 1)?);
        let dt = float_type(n, a)?;
        let sa = trans_batch(&a.1, n.int("transBatchA", 0) != 0);
        let sb = trans_batch(&b.1, n.int("transBatchB", 0) != 0);
        let shape = product_shape(&sa, n.int("transA", 0) != 0, &sb, n.int("transB", 0) != 0)?;
        Ok(vec![(dt, shape)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let a = trans_batch_data(f64s(n, ins, 0)?, n.int("transBatchA", 0) != 0);
        let b = trans_batch_data(f64s(n, ins, 1)?, n.int("transBatchB", 0) != 0);
        let (ta, tb) = (n.int("transA", 0) != 0, n.int("transB", 0) != 0);
        let want = product_shape(a.shape(), ta, b.shape(), tb)?;
        let (pa, pb) = promote(a.shape(), b.shape());
        let (_, mut y) = batched(
            a.as_slice().expect("standard"),
            &pa,
            ta && a.ndim() > 1,
            b.as_slice().expect("standard"),
            &pb,
            tb && b.ndim() > 1,
        )?;
        let alpha = n.float("alpha", 1.0);
        if alpha != 1.0 {
            y.iter_mut().for_each(|v| *v *= alpha);
        }
        Ok(vec![ArrayD::from_shape_vec(IxDyn(&want), y)?.into_tensor()])
    }
}

/// MatMulNBits: Y = A · Wᵀ (+ bias) with W[n, k] = (q[n, k] − zp[n, block]) · scale[n, block], dequantized exactly
/// in f64. q is packed low bits first along K (`bits` = 2, 4 or 8), each row of B padded to whole blocks; packed
/// uint8 zero points are padded to whole bytes per row, float zero points are used as they are, and the default
/// zero point is 2^(bits−1). `g_idx` maps each k to its block. `accuracy_level` is an implementation choice (level 4
/// quantizes A to int8 on CPU), not part of the product, so the reference ignores it.
struct NBits;

/// The [N, K] dequantized weight ([`phantom_precision::nbits`]).
fn dequantize(n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<f64>> {
    use phantom_precision::nbits::{Packed, ZeroPoints};
    let b = values::<u8>(opt(n, ins, 1)?)?;
    let scales = f64s(n, ins, 2)?;
    let zp = ins.get(3).copied().flatten();
    let (float_zp, packed_zp) = match zp {
        Some(t) if t.datum_type().is_float() => (Some(f64s(n, ins, 3)?), None),
        Some(t) => (None, Some(values::<u8>(t)?)),
        None => (None, None),
    };
    let zero_points = match (&float_zp, &packed_zp) {
        (Some(z), _) => ZeroPoints::Float(z.as_slice().expect("standard")),
        (_, Some(z)) => ZeroPoints::Packed(z),
        _ => ZeroPoints::Default,
    };
    let g_idx = match ins.get(4).copied().flatten() {
        Some(t) => Some(values::<i64>(t)?),
        None => None,
    };
    let packed = Packed {
        k: n.req_int("K")? as usize,
        n: n.req_int("N")? as usize,
        bits: n.int("bits", 4) as usize,
        block: n.req_int("block_size")? as usize,
        b: &b,
        scales: scales.as_slice().expect("standard"),
        zero_points,
        g_idx: g_idx.as_deref(),
    };
    packed.dequantize().map_err(|e| anyhow::anyhow!(e))
}

impl Kernel for NBits {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let a = fact(n, ins, 0)?;
        let dt = float_type(n, a)?;
        let k = n.req_int("K")? as usize;
        anyhow::ensure!(
            a.1.last() == Some(&k),
            "A's last axis is {:?}, K = {k}",
            a.1.last()
        );
        let mut shape = a.1.clone();
        *shape.last_mut().expect("checked") = n.req_int("N")? as usize;
        Ok(vec![(dt, shape)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let a = f64s(n, ins, 0)?;
        let (k, nn) = (n.req_int("K")? as usize, n.req_int("N")? as usize);
        let w = dequantize(n, ins)?;
        let m = a.len() / k.max(1);
        let mut y = vec![0.0; m * nn];
        let wt = Mat {
            data: &w,
            rs: 1,
            cs: k,
        };
        matmul(
            m,
            k,
            nn,
            Mat::rows(a.as_slice().expect("standard"), k),
            wt,
            &mut y,
        );
        if let Some(bias) = f64s_opt(ins, 5)? {
            anyhow::ensure!(bias.len() == nn, "bias has {} values, N = {nn}", bias.len());
            for row in y.chunks_mut(nn.max(1)) {
                row.iter_mut().zip(bias.iter()).for_each(|(v, b)| *v += b);
            }
        }
        let mut shape = a.shape().to_vec();
        *shape.last_mut().expect("A has rank ≥ 1") = nn;
        Ok(vec![ArrayD::from_shape_vec(IxDyn(&shape), y)?.into_tensor()])
    }
}
