//! What is kept of one value to pair it with another graph's: its shape, its scale and a fixed sample of its
//! elements in logical order (all of them up to [`SAMPLE`]), so that two graphs' values are compared without
//! holding both runs in memory. Equal samples at the same positions and equal scales stand for equal values; a
//! reshape keeps logical order, so values that differ only by their shape still pair.

use crate::tensor::Tensor;

/// Elements kept per value: every element of a smaller value, evenly spaced ones of a larger.
pub const SAMPLE: usize = 4096;

/// One value, as the pairing compares it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sketch {
    pub shape: Vec<usize>,
    /// The element type the run holds it in (floats are f64 in the reference; integers keep their width).
    pub dtype: crate::tensor::DType,
    pub len: usize,
    /// Root mean square of the finite elements: the scale differences are measured against.
    pub rms: f64,
    pub sample: Vec<f64>,
    /// The same value read channels-first ([`Tensor::channels_first`]), for a value that may be held
    /// channels-last (NHWC) where the other graph holds it channels-first; None where that reads the same.
    pub channels_first: Option<Box<Sketch>>,
    /// The same value without the channels ONNX Runtime pads an NCHWc block with ([`Tensor::channels_cropped`]),
    /// one per channel count the other graph holds a value of; empty for a value not blocked.
    pub cropped: Vec<Sketch>,
}

impl Sketch {
    /// The sketch of `t`. Strings are sampled as a 53-bit hash of each element with no scale, so that only equal
    /// strings agree.
    pub fn of(t: &Tensor) -> Option<Sketch> {
        if let Some(s) = t.strings() {
            return Some(Sketch::of_strings(s, t.dtype()));
        }
        let a = t.as_f64();
        let len = a.len();
        let step = len.div_ceil(SAMPLE).max(1);
        let (mut sq, mut n) = (0.0, 0usize);
        let mut sample = Vec::with_capacity(len.min(SAMPLE));
        for (i, &v) in a.iter().enumerate() {
            if v.is_finite() {
                sq += v * v;
                n += 1;
            }
            if i % step == 0 {
                sample.push(v);
            }
        }
        Some(Sketch {
            shape: t.shape().to_vec(),
            dtype: t.dtype(),
            len,
            rms: (sq / n.max(1) as f64).sqrt(),
            sample,
            channels_first: None,
            cropped: vec![],
        })
    }

    /// [`Sketch::of`], with the value's channels-first reading where it differs (ranks 3 to 5).
    pub fn of_either_layout(t: &Tensor) -> Option<Sketch> {
        let mut s = Sketch::of(t)?;
        let cf = t.channels_first().and_then(|c| Sketch::of(&c));
        s.channels_first = cf.filter(|c| c.sample != s.sample).map(Box::new);
        Some(s)
    }

    /// [`Sketch::of_either_layout`] of an unblocked NCHWc value `t` [N, C, H, W], with its readings cropped to each
    /// channel count that `shapes` (the other graph's) holds of [N, c, H, W] where the padding of one block of
    /// `block` channels could account for the rest (C − `block` < c < C).
    pub fn of_padded(
        t: &Tensor,
        block: usize,
        shapes: &std::collections::HashSet<Vec<usize>>,
    ) -> Option<Sketch> {
        let mut s = Sketch::of_either_layout(t)?;
        let dims = t.shape();
        if dims.len() != 4 {
            return Some(s);
        }
        let padding = |c: usize| c < dims[1] && c + block > dims[1];
        let mut counts: Vec<usize> = (shapes.iter())
            .filter(|d| d.len() == 4 && d[0] == dims[0] && d[2..] == dims[2..] && padding(d[1]))
            .map(|d| d[1])
            .collect();
        counts.sort_unstable();
        s.cropped = (counts.iter())
            .filter_map(|&c| t.channels_cropped(c).and_then(|v| Sketch::of(&v)))
            .collect();
        Some(s)
    }

    /// The sketch of a string tensor: each sampled element's hash (exact in f64), scale zero.
    fn of_strings(a: &ndarray::ArrayD<String>, dtype: crate::tensor::DType) -> Sketch {
        use std::hash::{Hash, Hasher};
        let len = a.len();
        let step = len.div_ceil(SAMPLE).max(1);
        let sample = a
            .iter()
            .step_by(step)
            .map(|v| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                v.hash(&mut h);
                (h.finish() >> 11) as f64
            })
            .collect();
        Sketch {
            shape: a.shape().to_vec(),
            dtype,
            len,
            rms: 0.0,
            sample,
            channels_first: None,
            cropped: vec![],
        }
    }

    /// Whether the value says anything about where it came from: not when every element is the same (a zero
    /// tensor equals every other zero tensor of its size, whatever computed it).
    pub fn informative(&self) -> bool {
        self.sample
            .iter()
            .any(|v| v.to_bits() != self.sample[0].to_bits())
    }

    /// Whether `self` and `other` hold the same values within `tol` of their scale: every sampled element within
    /// `tol × rms` (NaN with NaN, an infinity with the same infinity), and the scales within it too.
    pub fn agrees(&self, other: &Sketch, tol: f64) -> bool {
        if self.len != other.len || self.sample.len() != other.sample.len() {
            return false;
        }
        let scale = self.rms.max(other.rms);
        let bound = tol * scale;
        if (self.rms - other.rms).abs() > bound {
            return false;
        }
        self.sample
            .iter()
            .zip(&other.sample)
            .all(|(&a, &b)| same(a, b, bound))
    }

    /// How far apart two sketches of one size are, as a fraction of their scale (the largest sampled difference);
    /// None when the sizes differ or non-finite elements disagree.
    pub fn distance(&self, other: &Sketch) -> Option<f64> {
        if self.len != other.len || self.sample.len() != other.sample.len() {
            return None;
        }
        let scale = self.rms.max(other.rms);
        let mut worst: f64 = 0.0;
        for (&a, &b) in self.sample.iter().zip(&other.sample) {
            if a.is_finite() && b.is_finite() {
                worst = worst.max((a - b).abs());
            } else if !same(a, b, 0.0) {
                return None;
            }
        }
        Some(match scale > 0.0 {
            true => worst / scale,
            false if worst == 0.0 => 0.0,
            false => f64::INFINITY,
        })
    }
}

/// Two elements equal within `bound`: NaN with NaN, an infinity with itself.
fn same(a: f64, b: f64, bound: f64) -> bool {
    if a.is_finite() && b.is_finite() {
        (a - b).abs() <= bound
    } else {
        a == b || (a.is_nan() && b.is_nan())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::ArrayD;

    fn t(v: Vec<f64>, shape: &[usize]) -> Tensor {
        Tensor::F64(ArrayD::from_shape_vec(shape.to_vec(), v).unwrap())
    }

    #[test]
    fn a_channels_last_value_agrees_through_its_channels_first_reading() {
        let nchw: Vec<f64> = (0..24).map(f64::from).collect();
        let a = Tensor::F64(ArrayD::from_shape_vec(vec![1, 2, 3, 4], nchw).unwrap());
        let nhwc = Tensor::F64(
            a.to_f64_array()
                .permuted_axes(vec![0, 2, 3, 1])
                .as_standard_layout()
                .into_owned(),
        );
        let (r, t) = (
            Sketch::of(&a).unwrap(),
            Sketch::of_either_layout(&nhwc).unwrap(),
        );
        assert!(!r.agrees(&t, 1e-9));
        assert!(r.agrees(t.channels_first.as_ref().unwrap(), 1e-9));
        // One channel reads the same either way: no second reading.
        let one = Tensor::F64(
            ArrayD::from_shape_vec(vec![1, 2, 2, 1], vec![1.0, 2.0, 3.0, 4.0]).unwrap(),
        );
        assert!(Sketch::of_either_layout(&one)
            .unwrap()
            .channels_first
            .is_none());
    }

    #[test]
    fn equal_strings_agree_and_one_changed_string_does_not() {
        let s = |v: &[&str]| {
            let a =
                ArrayD::from_shape_vec(vec![v.len()], v.iter().map(|x| x.to_string()).collect());
            Sketch::of(&Tensor::Str(a.unwrap())).unwrap()
        };
        let (a, b) = (s(&["the", "cat", "sat"]), s(&["the", "cat", "sat"]));
        assert!(a.agrees(&b, 1e-4) && a.informative());
        assert_eq!(a.distance(&b), Some(0.0));
        let c = s(&["the", "cat", "sits"]);
        assert!(!a.agrees(&c, 1e-4));
        assert_eq!(a.distance(&c), Some(f64::INFINITY));
    }

    #[test]
    fn a_reshape_agrees_and_a_changed_element_does_not() {
        let a = Sketch::of(&t(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])).unwrap();
        let b = Sketch::of(&t(vec![1.0, 2.0, 3.0, 4.0 + 1e-9], &[4])).unwrap();
        let c = Sketch::of(&t(vec![1.0, 2.0, 3.0, 4.1], &[4])).unwrap();
        assert!(a.agrees(&b, 1e-6));
        assert!(!a.agrees(&c, 1e-6));
        assert!((a.distance(&c).unwrap() - 0.1 / c.rms).abs() < 1e-12);
    }

    #[test]
    fn large_values_are_sampled_evenly() {
        let a = Sketch::of(&t((0..10_000).map(f64::from).collect(), &[10_000])).unwrap();
        assert_eq!(a.sample.len(), 3334);
        assert_eq!(a.sample[1], 3.0);
    }

    #[test]
    fn nan_and_infinity_pair_with_themselves() {
        let a = Sketch::of(&t(vec![f64::NAN, f64::NEG_INFINITY, 1.0], &[3])).unwrap();
        let b = Sketch::of(&t(vec![f64::NAN, f64::INFINITY, 1.0], &[3])).unwrap();
        assert!(a.agrees(&a.clone(), 0.0));
        assert!(!a.agrees(&b, 1e-3));
    }
}
