//! f64 matrix products on `matrixmultiply`'s dgemm (AVX2/FMA micro-kernels chosen at run time), split across
//! rayon workers by rows or by columns of the result, whichever is longer. Every product is accumulated in f64:
//! with FMA each term is rounded once, never through a narrower type.

use rayon::prelude::*;

/// A strided matrix operand: element (i, j) is `data[i·rs + j·cs]`.
#[derive(Clone, Copy)]
pub struct Mat<'a> {
    pub data: &'a [f64],
    pub rs: usize,
    pub cs: usize,
}

impl<'a> Mat<'a> {
    /// A row-major matrix with `cols` columns.
    pub fn rows(data: &'a [f64], cols: usize) -> Mat<'a> {
        Mat {
            data,
            rs: cols,
            cs: 1,
        }
    }

    /// Whether every element of a `rows × cols` view lies inside `data`.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// Below this many multiply-adds a product runs on the calling thread (a rayon split costs microseconds).
const PAR_MIN_MACS: usize = 1 << 18;

/// A raw pointer handed to rayon workers that write disjoint columns of one matrix.
#[derive(Clone, Copy)]
struct SendPtr(*mut f64);
// SAFETY: each worker writes only its own columns of the result; the pointer outlives the parallel section.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// The pointer (a method, so closures capture the whole `Send` wrapper, not its raw field).
    fn get(self) -> *mut f64 {
        self.0
    }
}

/// `C = A · B` with `A` m×k, `B` k×n and `C` row-major m×n (overwritten).
pub fn matmul(m: usize, k: usize, n: usize, a: Mat, b: Mat, c: &mut [f64]) {
    assert!(
        a.fits(m, k) && b.fits(k, n) && c.len() >= m * n,
        "operand out of bounds"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c[..m * n].fill(0.0);
        return;
    }
    let workers = rayon::current_num_threads();
    if workers < 2 || m * k * n < PAR_MIN_MACS {
        // SAFETY: bounds checked above; C is m×n row-major.
        unsafe { block(m, k, n, a, b, c.as_mut_ptr(), n) };
        return;
    }
    if m >= n {
        let rows = m.div_ceil(workers * 2).max(8);
        c[..m * n]
            .par_chunks_mut(rows * n)
            .enumerate()
            .for_each(|(i, chunk)| {
                let r0 = i * rows;
                let sub = Mat {
                    data: &a.data[r0 * a.rs..],
                    ..a
                };
                // SAFETY: `sub` starts at row r0 of A (in bounds by the check above); chunk holds its rows of C.
                unsafe { block(chunk.len() / n, k, n, sub, b, chunk.as_mut_ptr(), n) };
            });
    } else {
        let cols = n.div_ceil(workers * 2).max(8);
        let base = SendPtr(c.as_mut_ptr());
        (0..n.div_ceil(cols)).into_par_iter().for_each(|j| {
            let (c0, w) = (j * cols, cols.min(n - j * cols));
            let sub = Mat {
                data: &b.data[c0 * b.cs..],
                ..b
            };
            // SAFETY: columns c0..c0+w of C belong to this worker alone; `sub` starts at column c0 of B.
            unsafe { block(m, k, w, a, sub, base.get().add(c0), n) };
        });
    }
}

/// One dgemm call writing an m×n block of a row-major matrix of row stride `ldc` at `c`.
///
/// # Safety
/// `a` and `b` must hold m×k and k×n elements at their strides (checked by the caller); `c` must point at m rows
/// of `ldc` elements of which the first n are written.
unsafe fn block(m: usize, k: usize, n: usize, a: Mat, b: Mat, c: *mut f64, ldc: usize) {
    matrixmultiply::dgemm(
        m,
        k,
        n,
        1.0,
        a.data.as_ptr(),
        a.rs as isize,
        a.cs as isize,
        b.data.as_ptr(),
        b.rs as isize,
        b.cs as isize,
        0.0,
        c,
        ldc as isize,
        1,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, k: usize, n: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    #[test]
    fn matches_naive_product_in_every_split() {
        for &(m, k, n) in &[
            (3, 5, 7),
            (300, 40, 20),
            (20, 40, 300),
            (64, 0, 9),
            (1, 17, 1),
        ] {
            let a: Vec<f64> = (0..m * k)
                .map(|i| ((i * 7919) % 113) as f64 / 17.0 - 3.0)
                .collect();
            let b: Vec<f64> = (0..k * n)
                .map(|i| ((i * 104_729) % 97) as f64 / 13.0 - 3.5)
                .collect();
            let mut c = vec![f64::NAN; m * n];
            matmul(m, k, n, Mat::rows(&a, k), Mat::rows(&b, n), &mut c);
            for (x, y) in c.iter().zip(naive(m, k, n, &a, &b)) {
                assert!(
                    (x - y).abs() <= 1e-12 * y.abs().max(1.0),
                    "{m}x{k}x{n}: {x} vs {y}"
                );
            }
        }
    }
}
