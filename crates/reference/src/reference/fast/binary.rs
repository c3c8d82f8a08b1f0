//! Element-wise f64 arithmetic on both cores: tract's `Add`, `Sub` (and its reversed `SubF`), `Mul`, `Div`, `Min`
//! and `Max` on f64 operands, from [`PARALLEL_FROM`] output elements. Each arithmetic element is the one IEEE
//! operation tract computes, so those values are bit-identical; what changes is that the work is split over the
//! cores, into an operand only this node holds or else a fresh output, where tract runs on one core and first
//! copies its left operand whenever another node still reads it. `Min` and `Max` are taken at every size: they
//! propagate NaN as ONNX does ([`super::super::extrema`]), where tract's `f64::min`/`f64::max` drop it.

use rayon::prelude::*;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::binary::TypedBinOp;
use tract_onnx::tract_core::ops::math::{Add, Div, Max, Min, Mul, Sub, SubF};

use super::super::extrema;

/// Below this many output elements tract keeps the node: splitting costs more than it saves.
pub const PARALLEL_FROM: usize = 1 << 15;
/// Output elements per parallel task.
const CHUNK: usize = 1 << 14;

/// Whether `op` is `Min` or `Max`, whose f64 form phantom always evaluates (tract's drops NaN).
pub fn is_extremum(op: &TypedBinOp) -> bool {
    op.0.is::<Min>() || op.0.is::<Max>()
}

/// Evaluates an f64 `TypedBinOp` that is one of the ops above with at least [`PARALLEL_FROM`] output elements (or
/// `Min`/`Max` at any size); `None` leaves it to tract.
pub fn binary_node(
    op: &TypedBinOp,
    inputs: &mut TVec<TValue>,
) -> Option<TractResult<TVec<TValue>>> {
    if op.1.is_some_and(|dt| dt != f64::datum_type()) {
        return None;
    }
    let [a, b] = &inputs[..] else { return None };
    // Storage other than plain memory stays with tract (f64 values are plain; this keeps a failure there tract's).
    if [a, b]
        .iter()
        .any(|v| v.datum_type() != f64::datum_type() || v.try_as_plain_ram().is_err())
    {
        return None;
    }
    let layout = Layout::of(a.shape(), b.shape())?;
    if layout.len < PARALLEL_FROM && !is_extremum(op) {
        return None;
    }
    let m = &op.0;
    Some(if m.is::<Add>() {
        apply(&layout, inputs, |x, y| x + y)
    } else if m.is::<Sub>() {
        apply(&layout, inputs, |x, y| x - y)
    } else if m.is::<SubF>() {
        apply(&layout, inputs, |x, y| y - x)
    } else if m.is::<Mul>() {
        apply(&layout, inputs, |x, y| x * y)
    } else if m.is::<Div>() {
        apply(&layout, inputs, |x, y| x / y)
    } else if m.is::<Min>() {
        apply(&layout, inputs, extrema::min)
    } else if m.is::<Max>() {
        apply(&layout, inputs, extrema::max)
    } else {
        return None;
    })
}

/// The broadcast output shape and both operands' strides over it, adjacent axes merged where both operands allow:
/// the last merged axis is the inner loop, contiguous (stride 1) or broadcast (stride 0) in each operand.
#[derive(Debug, PartialEq)]
pub struct Layout {
    pub shape: Vec<usize>,
    /// The merged axes' lengths, outermost first (never empty).
    pub dims: Vec<usize>,
    pub strides: [Vec<usize>; 2],
    pub len: usize,
}

impl Layout {
    /// `None` when the ranks differ or an axis neither matches nor broadcasts (tract reports those).
    pub fn of(a: &[usize], b: &[usize]) -> Option<Layout> {
        if a.len() != b.len() {
            return None;
        }
        let shape: Vec<usize> = a
            .iter()
            .zip(b)
            .map(|(&x, &y)| (x == y || x == 1 || y == 1).then_some(x.max(y)))
            .collect::<Option<_>>()?;
        let len = shape.iter().product();
        let (sa, sb) = (strides(a, &shape), strides(b, &shape));
        let (mut dims, mut st): (Vec<usize>, [Vec<usize>; 2]) = (vec![], [vec![], vec![]]);
        for (k, &n) in shape.iter().enumerate().filter(|(_, &n)| n != 1) {
            let merges = dims.last().is_some_and(|_| {
                let last = st[0].len() - 1;
                st[0][last] == sa[k] * n && st[1][last] == sb[k] * n
            });
            if merges {
                let last = dims.len() - 1;
                dims[last] *= n;
                st[0][last] = sa[k];
                st[1][last] = sb[k];
            } else {
                dims.push(n);
                st[0].push(sa[k]);
                st[1].push(sb[k]);
            }
        }
        if dims.is_empty() {
            dims.push(1);
            st = [vec![0], vec![0]];
        }
        Some(Layout {
            shape,
            dims,
            strides: st,
            len,
        })
    }

    /// The inner axis's length and each operand's offset of the start of inner row `row`.
    fn row_start(&self, row: usize) -> (usize, usize) {
        let mut rest = row;
        let (mut oa, mut ob) = (0, 0);
        for k in (0..self.dims.len() - 1).rev() {
            let i = rest % self.dims[k];
            rest /= self.dims[k];
            oa += i * self.strides[0][k];
            ob += i * self.strides[1][k];
        }
        (oa, ob)
    }
}

/// Row-major strides of `dims` read as broadcast to `shape`: 0 along a broadcast axis.
fn strides(dims: &[usize], shape: &[usize]) -> Vec<usize> {
    let mut s = vec![0; dims.len()];
    let mut step = 1;
    for k in (0..dims.len()).rev() {
        s[k] = if dims[k] == 1 && shape[k] != 1 {
            0
        } else {
            step
        };
        step *= dims[k];
    }
    s
}

fn apply<F>(l: &Layout, inputs: &mut TVec<TValue>, f: F) -> TractResult<TVec<TValue>>
where
    F: Fn(f64, f64) -> f64 + Sync,
{
    // An operand only this node holds, shaped like the output, becomes the output (as tract reuses it).
    let reuse = (0..2).find(|&i| inputs[i].is_exclusive() && inputs[i].shape() == &l.shape[..]);
    let mut c = match reuse {
        Some(i) => std::mem::replace(&mut inputs[i], tensor0(0f64).into_tvalue()).into_tensor(),
        // SAFETY: every element is written below before the tensor is read.
        None => unsafe { Tensor::uninitialized::<f64>(&l.shape)? },
    };
    {
        let (a, b) = (inputs[0].try_as_plain_ram()?, inputs[1].try_as_plain_ram()?);
        let (a, b) = (a.as_slice::<f64>()?, b.as_slice::<f64>()?);
        let (a, b) = match reuse {
            Some(0) => (None, Some(b)),
            Some(_) => (Some(a), None),
            None => (Some(a), Some(b)),
        };
        let mut plain = c.try_as_plain_ram_mut()?;
        let out = plain.as_slice_mut::<f64>()?;
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, chunk)| fill(l, (a, b), i * CHUNK, chunk, &f));
    }
    Ok(tvec!(c.into_tvalue()))
}

/// One operand's part of an inner row: the output's own element (the operand became the output), one value
/// broadcast along the row, or a slice.
#[derive(Clone, Copy)]
enum Row<'a> {
    Own,
    One(f64),
    Many(&'a [f64]),
}

impl<'a> Row<'a> {
    /// Operand `src` (None: the output itself) at offset `at` of a row whose inner stride is `step`.
    #[inline(always)]
    fn of(src: Option<&'a [f64]>, at: usize, step: usize, len: usize) -> Row<'a> {
        match src {
            None => Row::Own,
            Some(s) if step == 0 => Row::One(s[at]),
            Some(s) => Row::Many(&s[at..at + len]),
        }
    }
}

/// Writes output elements `from..from + out.len()`, one inner row (or the part of it in range) at a time; a `None`
/// operand is the output itself.
#[inline(always)]
fn fill<F: Fn(f64, f64) -> f64>(
    l: &Layout,
    (a, b): (Option<&[f64]>, Option<&[f64]>),
    from: usize,
    out: &mut [f64],
    f: &F,
) {
    let n = *l.dims.last().expect("a layout has an axis");
    let last = l.dims.len() - 1;
    let (ia, ib) = (l.strides[0][last], l.strides[1][last]);
    let mut done = 0;
    while done < out.len() {
        let at = from + done;
        let (r, col) = (at / n, at % n);
        let take = (n - col).min(out.len() - done);
        let (oa, ob) = l.row_start(r);
        let x = Row::of(a, oa + col * ia, ia, take);
        let y = Row::of(b, ob + col * ib, ib, take);
        row(&mut out[done..done + take], x, y, f);
        done += take;
    }
}

#[inline(always)]
fn row<F: Fn(f64, f64) -> f64>(dst: &mut [f64], x: Row, y: Row, f: &F) {
    match (x, y) {
        (Row::One(x), Row::One(y)) => dst.fill(f(x, y)),
        (Row::One(x), Row::Many(ys)) => dst.iter_mut().zip(ys).for_each(|(c, &y)| *c = f(x, y)),
        (Row::Many(xs), Row::One(y)) => dst.iter_mut().zip(xs).for_each(|(c, &x)| *c = f(x, y)),
        (Row::Many(xs), Row::Many(ys)) => dst
            .iter_mut()
            .zip(xs.iter().zip(ys))
            .for_each(|(c, (&x, &y))| *c = f(x, y)),
        (Row::Own, Row::One(y)) => dst.iter_mut().for_each(|c| *c = f(*c, y)),
        (Row::Own, Row::Many(ys)) => dst.iter_mut().zip(ys).for_each(|(c, &y)| *c = f(*c, y)),
        (Row::One(x), Row::Own) => dst.iter_mut().for_each(|c| *c = f(x, *c)),
        (Row::Many(xs), Row::Own) => dst.iter_mut().zip(xs).for_each(|(c, &x)| *c = f(x, *c)),
        // Both operands cannot be the output; were they, this is what it would mean.
        (Row::Own, Row::Own) => dst.iter_mut().for_each(|c| *c = f(*c, *c)),
    }
}
