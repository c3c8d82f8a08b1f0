//! ONNX's `Det` in f64 (tract has no Det): the determinant of each square matrix in the input's last two axes,
//! [*, M, M] → [*]. As numpy's `linalg.det` (ONNX's reference) computes it: an LU factorization with partial
//! pivoting (the largest remaining magnitude in the column), the determinant the product of the pivots, its sign
//! flipped per row swap. An exactly singular matrix gives 0; a 0 × 0 matrix gives 1.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact, float_type, shaped};

/// Claimed in any domain: tract lacks Det.
pub(super) const TABLE: &[Row] = &[Row::any_domain("Det", &Det)];

/// The leading (batch) shape of a stack of square matrices of shape `shape`, checked.
fn batch_shape(n: &Node, shape: &[usize]) -> TractResult<Vec<usize>> {
    let r = shape.len();
    anyhow::ensure!(
        r >= 2 && shape[r - 1] == shape[r - 2],
        "Det `{}`: input of shape {shape:?} is not a stack of square matrices",
        n.proto.name
    );
    Ok(shape[..r - 2].to_vec())
}

/// The determinant of the m × m row-major matrix `a` (overwritten by its LU factors).
fn determinant(a: &mut [f64], m: usize) -> f64 {
    let mut det = 1.0;
    for col in 0..m {
        // The pivot: the largest magnitude at or below the diagonal (the first of equals, as LAPACK's idamax).
        let mut p = col;
        for row in col + 1..m {
            if a[row * m + col].abs() > a[p * m + col].abs() {
                p = row;
            }
        }
        let pivot = a[p * m + col];
        if pivot == 0.0 {
            return 0.0;
        }
        if p != col {
            for k in 0..m {
                a.swap(p * m + k, col * m + k);
            }
            det = -det;
        }
        det *= pivot;
        for row in col + 1..m {
            let f = a[row * m + col] / pivot;
            for k in col + 1..m {
                a[row * m + k] -= f * a[col * m + k];
            }
        }
    }
    det
}

struct Det;

impl Kernel for Det {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let x = fact(n, ins, 0)?;
        Ok(vec![(float_type(n, x)?, batch_shape(n, &x.1)?)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = f64s(n, ins, 0)?;
        let batch = batch_shape(n, x.shape())?;
        let m = x.shape()[x.ndim() - 1];
        let data: Vec<f64> = x.iter().copied().collect();
        let dets = match m {
            // 0 × 0 matrices: the empty product.
            0 => vec![1.0; batch.iter().product()],
            _ => data
                .chunks(m * m)
                .map(|c| determinant(&mut c.to_vec(), m))
                .collect(),
        };
        Ok(vec![shaped(&batch, dets)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn determinants_of_small_matrices() {
        // Pivoting on 3 leaves 2 − 4/3, not exactly representable: equal to −2 within rounding.
        assert!((determinant(&mut [1.0, 2.0, 3.0, 4.0], 2) + 2.0).abs() < 1e-15);
        // A row swap flips the sign: [[0, 1], [1, 0]] has determinant −1.
        assert_eq!(determinant(&mut [0.0, 1.0, 1.0, 0.0], 2), -1.0);
        assert_eq!(determinant(&mut [1.0, 2.0, 2.0, 4.0], 2), 0.0);
        // [[2, 0, 1], [1, 3, 2], [1, 1, 2]]: 2·(6 − 2) + 1·(1 − 3) = 6.
        let mut a = [2.0, 0.0, 1.0, 1.0, 3.0, 2.0, 1.0, 1.0, 2.0];
        assert!((determinant(&mut a, 3) - 6.0).abs() < 1e-12);
    }

    #[test]
    fn stacks_keep_their_batch_axes() {
        let n = Node::new(&tract_onnx::pb::NodeProto {
            op_type: "Det".into(),
            ..Default::default()
        });
        assert_eq!(batch_shape(&n, &[3, 2, 2]).unwrap(), [3]);
        assert!(batch_shape(&n, &[2, 3]).is_err());
    }
}
