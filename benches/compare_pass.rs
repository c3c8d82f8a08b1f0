//! The comparison of one value at memory bandwidth (issue 34, item 4): bytes per second of phantom's per-value work
//! — `compare_pair` (metrics, both sides' statistics, histogram, worst elements) and the expected-noise pass — on an
//! f64 reference and an f32 target, against a plain parallel read of the same two arrays (the floor: every byte
//! read once). Prints GB/s of each and the ratio.
//!
//! `cargo bench --bench compare_pass [-- ELEMENTS]` (release; default 2²⁵ elements: 256 MiB of f64, 128 MiB of f32).

use std::time::Instant;

use ndarray::ArrayD;
use phantom::analysis::{attribution, compare_pair};
use phantom::compare::{Tolerance, ToleranceSpec};
use phantom::tensor::Tensor;
use rayon::prelude::*;

/// Deterministic values of RMS about 1 (xorshift).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 3.4 - 1.7
        })
        .collect()
}

/// The fastest of `reps` runs of `f`, in seconds.
fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// One parallel read of both arrays: the sum of every element in eight interleaved accumulators per array (one
/// chain of additions would measure the adder's latency, not the memory), so nothing is optimized away.
fn read(r: &[f64], t: &[f32]) -> f64 {
    const CHUNK: usize = 1 << 16;
    r.par_chunks(CHUNK)
        .zip(t.par_chunks(CHUNK))
        .map(|(a, b)| sum8(a, |&x| x) + sum8(b, |&x| x as f64))
        .sum()
}

/// A sum over eight accumulators, element `i` into accumulator `i % 8`.
fn sum8<T>(xs: &[T], f: impl Fn(&T) -> f64) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut eights = xs.chunks_exact(8);
    for e in &mut eights {
        for k in 0..8 {
            acc[k] += f(&e[k]);
        }
    }
    acc.iter().sum::<f64>() + eights.remainder().iter().map(f).sum::<f64>()
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1 << 25);
    let r64 = values(n, 1);
    // The target: f32 rounding plus a small error, as a faithful kernel makes.
    let t32: Vec<f32> = r64.iter().map(|&v| (v * (1.0 + 1e-7)) as f32).collect();
    let e32: Vec<f32> = r64.iter().map(|&v| v as f32).collect();
    let bytes = (n * (8 + 4)) as f64;
    let gbs = |s: f64| bytes / s / 1e9;

    let floor = best(5, || {
        std::hint::black_box(read(&r64, &t32));
    });
    let r = Tensor::F64(ArrayD::from_shape_vec(vec![n], r64.clone()).unwrap());
    let t = Tensor::F32(ArrayD::from_shape_vec(vec![n], t32).unwrap());
    let e = Tensor::F32(ArrayD::from_shape_vec(vec![n], e32).unwrap());
    let spec = ToleranceSpec::default();
    let cmp = best(3, || {
        std::hint::black_box(compare_pair("v", Ok(&r), Ok(&t), &spec, 1.0, false, false));
    });
    let tol = Tolerance {
        atol: 1e-4,
        rtol: 1e-3,
        floor: 0.0,
    };
    let noise = best(3, || {
        std::hint::black_box(attribution::noise(&r, &e, tol, 1.0));
    });
    println!(
        "elements {n}, threads {}: read {:.2} GB/s · compare_pair {:.2} GB/s ({:.0}% of read) · expected-noise pass \
         {:.2} GB/s ({:.0}% of read)",
        rayon::current_num_threads(),
        gbs(floor),
        gbs(cmp),
        100.0 * floor / cmp,
        gbs(noise),
        100.0 * floor / noise
    );
}
