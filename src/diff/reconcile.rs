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
