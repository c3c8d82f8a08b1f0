//! f64 contractions of two operands (tract's `EinSum`, behind ONNX `MatMul`, `Gemm`, `Einsum` and the attention
//! products) as batched GEMMs: each operand is laid out as [batch…, rows, depth] or [batch…, depth, cols]
//! (copied only when its axes are not already in that order), batch axes broadcast where an operand has extent 1,
//! and the result is permuted back to the output's axis order.

use ndarray::{ArrayD, ArrayViewD, CowArray, IxDyn};
use rayon::prelude::*;

use super::gemm::{matmul, Mat};

/// Where each axis of a contraction sits: positions in `a`, `b` and the output.
#[derive(Clone, Debug, Default)]
pub struct Roles {
    /// In the output and in one or both operands (absent operand, or extent 1: broadcast).
    pub batch: Vec<(Option<usize>, Option<usize>, usize)>,
    /// In `a` and the output only.
    pub m: Vec<(usize, usize)>,
    /// In `b` and the output only.
    pub n: Vec<(usize, usize)>,
    /// In both operands, summed over.
    pub k: Vec<(usize, usize)>,
}

/// `a` with its axes in the order `order`, contiguous: the operand itself where it already is (a weight matrix
/// read as stored), a copy only where it is not.
fn arranged<'a>(a: &ArrayViewD<'a, f64>, order: &[usize]) -> CowArray<'a, f64, IxDyn> {
    let v = a.clone().permuted_axes(IxDyn(order));
    match v.is_standard_layout() {
        true => CowArray::from(v),
        false => CowArray::from(v.as_standard_layout().into_owned()),
    }
}

fn extent(shape: &[usize], axes: impl Iterator<Item = usize>) -> usize {
    axes.map(|i| shape[i]).product()
}

/// The contraction `out = Σ_k a·b` described by `roles`; `None` when the operands' extents disagree.
pub fn contract(a: ArrayViewD<f64>, b: ArrayViewD<f64>, r: &Roles) -> Option<ArrayD<f64>> {
    let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
    let m = extent(&sa, r.m.iter().map(|x| x.0));
    let n = extent(&sb, r.n.iter().map(|x| x.0));
    let k = extent(&sa, r.k.iter().map(|x| x.0));
    if k != extent(&sb, r.k.iter().map(|x| x.1)) || r.k.iter().any(|&(i, j)| sa[i] != sb[j]) {
        return None;
    }
    // Batch extents of the output, and the element stride of each operand's batch block (0 when broadcast).
    let mut sizes = Vec::new();
    for &(ia, ib, _) in &r.batch {
        let (da, db) = (ia.map_or(1, |i| sa[i]), ib.map_or(1, |i| sb[i]));
        if da != db && da != 1 && db != 1 {
            return None;
        }
        sizes.push(da.max(db));
    }
    let order_a: Vec<usize> = r
        .batch
        .iter()
        .filter_map(|x| x.0)
        .chain(r.m.iter().map(|x| x.0))
        .chain(r.k.iter().map(|x| x.0))
        .collect();
    let order_b: Vec<usize> = r
        .batch
        .iter()
        .filter_map(|x| x.1)
        .chain(r.k.iter().map(|x| x.1))
        .chain(r.n.iter().map(|x| x.0))
        .collect();
    let (pa, pb) = (arranged(&a, &order_a), arranged(&b, &order_b));
    let (pa, pb) = (pa.as_slice()?, pb.as_slice()?);
    let steps_a = batch_steps(&r.batch, &sizes, |x| x.0.map(|i| sa[i]), m * k);
    let steps_b = batch_steps(&r.batch, &sizes, |x| x.1.map(|i| sb[i]), k * n);
    let batches: usize = sizes.iter().product();
    let mut out = vec![0.0; batches * m * n];
    let offset = |steps: &[usize], mut idx: usize| {
        let mut off = 0;
        for (d, s) in sizes.iter().zip(steps).rev() {
            off += (idx % d) * s;
            idx /= d;
        }
        off
    };
    let product = |bi: usize, c: &mut [f64]| {
        let (oa, ob) = (offset(&steps_a, bi), offset(&steps_b, bi));
        matmul(
            m,
            k,
            n,
            Mat::rows(&pa[oa..oa + m * k], k),
            Mat::rows(&pb[ob..ob + k * n], n),
            c,
        );
    };
    if m * n == 0 {
        // Nothing to compute; the shape below still describes the empty result.
    } else if batches > 1 {
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(bi, c)| product(bi, c));
    } else {
        product(0, &mut out);
    }
    let mut shape: Vec<usize> = sizes;
    shape.extend(r.m.iter().map(|x| sa[x.0]));
    shape.extend(r.n.iter().map(|x| sb[x.0]));
    let positions: Vec<usize> = r
        .batch
        .iter()
        .map(|x| x.2)
        .chain(r.m.iter().map(|x| x.1))
        .chain(r.n.iter().map(|x| x.1))
        .collect();
    let mut perm = vec![0; positions.len()];
    for (ours, &theirs) in positions.iter().enumerate() {
        perm[theirs] = ours;
    }
    let result = ArrayD::from_shape_vec(IxDyn(&shape), out).ok()?;
    let result = result.permuted_axes(IxDyn(&perm));
    Some(match result.is_standard_layout() {
        true => result,
        false => result.as_standard_layout().into_owned(),
    })
}

/// Element strides of an operand's batch axes in its arranged layout (0 on axes where it is broadcast).
fn batch_steps(
    batch: &[(Option<usize>, Option<usize>, usize)],
    sizes: &[usize],
    extent_of: impl Fn(&(Option<usize>, Option<usize>, usize)) -> Option<usize>,
    block: usize,
) -> Vec<usize> {
    let mut steps = vec![0; batch.len()];
    let mut stride = block;
    for (i, x) in batch.iter().enumerate().rev() {
        if let Some(d) = extent_of(x) {
            steps[i] = if d == 1 && sizes[i] != 1 { 0 } else { stride };
            stride *= d;
        }
    }
    steps
}
