//! Shapes that differ for a reason, made to agree before comparing — each step said on the pair it touched:
//! tensor-parallel shards joined along the axis that gives the other side's shape (last axis first, then 0, 1…),
//! a transposition of the leading axes (the last axis kept), and with `--truncate` the extra rows along the one
//! axis where the sides differ (vocabulary padding on rank 0, say).

use ndarray::{ArrayD, Axis, Slice};

use crate::tensor::Tensor;

/// Joins shards (in rank order) along the first axis, in the order tried (last, then 0, 1…), where they fit and,
/// when `want` is given, the result has that shape. Returns the joined tensor and the axis.
pub fn join(parts: &[Tensor], want: Option<&[usize]>) -> Result<(Tensor, usize), String> {
    let rank = parts[0].shape().len();
    if parts.iter().any(|p| p.shape().len() != rank) || rank == 0 {
        return Err("the shards differ in rank (or are scalars): they cannot be joined".into());
    }
    let mut axes: Vec<usize> = vec![rank - 1];
    axes.extend(0..rank - 1);
    for &axis in &axes {
        let fits = parts.iter().all(|p| {
            p.shape()
                .iter()
                .enumerate()
                .all(|(i, &d)| i == axis || d == parts[0].shape()[i])
        });
        if !fits {
            continue;
        }
        let mut shape = parts[0].shape().to_vec();
        shape[axis] = parts.iter().map(|p| p.shape()[axis]).sum();
        if want.is_some_and(|w| w != shape.as_slice()) {
            continue;
        }
        let views: Vec<ArrayD<f64>> = parts.iter().map(|p| p.to_f64_array()).collect();
        let views: Vec<_> = views.iter().map(|a| a.view()).collect();
        let joined = ndarray::concatenate(Axis(axis), &views).map_err(|e| e.to_string())?;
        let t = Tensor::from_f64(parts[0].dtype(), joined)
            .ok_or("the shards' element type cannot be joined")?;
        return Ok((t, axis));
    }
    Err(format!(
        "no axis joins the {} shards of shape {:?} into {:?}",
        parts.len(),
        parts[0].shape(),
        want.unwrap_or(&[])
    ))
}

/// Shards that each already have the other side's shape are not shards: every rank holds the whole tensor, either a
/// copy (*replicated*, after an all-reduce: the residual stream, attention and MLP outputs) or a share of a sum not
/// yet reduced (*partial sums*). Returns the tensor to compare and what was decided: ranks all equal → rank 0; ranks
/// that differ → their sum when it is closer to the other side than rank 0 is, else rank 0 with the ranks'
/// disagreement said (itself a finding). `None` when the parts do not all have `other`'s shape.
pub fn whole_on_every_rank(parts: &[Tensor], other: &Tensor) -> Option<(Tensor, String)> {
    if parts.len() < 2 || parts.iter().any(|p| p.shape() != other.shape()) {
        return None;
    }
    let arrays: Vec<ArrayD<f64>> = parts.iter().map(|p| p.to_f64_array()).collect();
    let max_diff = |x: &ArrayD<f64>, y: &ArrayD<f64>| {
        x.iter()
            .zip(y)
            .map(|(a, b)| (a - b).abs())
            .fold(
                0.0f64,
                |m, d| if d.is_nan() { f64::INFINITY } else { m.max(d) },
            )
    };
    let spread = arrays[1..]
        .iter()
        .map(|a| max_diff(&arrays[0], a))
        .fold(0.0f64, f64::max);
    let n = parts.len();
    if spread == 0.0 {
        return Some((
            parts[0].clone(),
            format!("{n} ranks hold identical copies (replicated): rank 0 compared"),
        ));
    }
    let o = other.to_f64_array();
    let sum = arrays[1..].iter().fold(arrays[0].clone(), |acc, a| acc + a);
    let (d_sum, d_one) = (max_diff(&sum, &o), max_diff(&arrays[0], &o));
    if d_sum < d_one {
        let t = Tensor::from_f64(parts[0].dtype(), sum)?;
        return Some((
            t,
            format!(
                "{n} ranks summed (partial sums: the sum is off the other side by {d_sum:.3e}, rank 0 alone by \
                 {d_one:.3e})"
            ),
        ));
    }
    Some((
        parts[0].clone(),
        format!(
            "{n} ranks hold the whole tensor but differ by up to {spread:.3e} (replicated values should be equal): \
             rank 0 compared"
        ),
    ))
}

/// The permutation of the leading axes (last axis kept) that turns shape `from` into `to`, if any but identity.
pub fn transposition(from: &[usize], to: &[usize]) -> Option<Vec<usize>> {
    let r = from.len();
    if r != to.len() || r < 3 || from[r - 1] != to[r - 1] || from == to {
        return None;
    }
    fn search(from: &[usize], to: &[usize], used: &mut Vec<bool>, perm: &mut Vec<usize>) -> bool {
        if perm.len() == to.len() {
            return true;
        }
        for i in 0..from.len() {
            if !used[i] && from[i] == to[perm.len()] {
                used[i] = true;
                perm.push(i);
                if search(from, to, used, perm) {
                    return true;
                }
                perm.pop();
                used[i] = false;
            }
        }
        false
    }
    let lead = r - 1;
    let mut perm = vec![];
    search(
        &from[..lead],
        &to[..lead],
        &mut vec![false; lead],
        &mut perm,
    )
    .then(|| {
        perm.push(lead);
        perm
    })
}

/// `t` with its axes permuted.
pub fn transpose(t: &Tensor, perm: &[usize]) -> Tensor {
    let a = t.to_f64_array().permuted_axes(perm.to_vec());
    let a = a.as_standard_layout().into_owned();
    Tensor::from_f64(t.dtype(), a).unwrap_or_else(|| t.clone())
}

/// The one axis where two shapes of equal rank differ, if exactly one does.
pub fn single_difference(a: &[usize], b: &[usize]) -> Option<usize> {
    if a.len() != b.len() {
        return None;
    }
    let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    (diff.len() == 1).then(|| diff[0])
}

/// `t` cut to its first `n` entries along `axis`.
pub fn truncate(t: &Tensor, axis: usize, n: usize) -> Tensor {
    let a = t.to_f64_array();
    let cut = a.slice_axis(Axis(axis), Slice::from(0..n)).to_owned();
    Tensor::from_f64(t.dtype(), cut).unwrap_or_else(|| t.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_join_along_the_axis_that_fits() {
        let a = Tensor::F32(
            ArrayD::from_shape_vec(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap(),
        );
        let (j, axis) = join(&[a.clone(), a.clone()], Some(&[4, 3])).unwrap();
        assert_eq!((j.shape(), axis), (&[4usize, 3][..], 0));
        let (j, axis) = join(&[a.clone(), a], Some(&[2, 6])).unwrap();
        assert_eq!((j.shape(), axis), (&[2usize, 6][..], 1));
    }

    #[test]
    fn a_transposition_keeps_the_last_axis() {
        assert_eq!(transposition(&[4, 2, 8], &[2, 4, 8]), Some(vec![1, 0, 2]));
        assert_eq!(transposition(&[4, 2, 8], &[4, 8, 2]), None);
    }
}
