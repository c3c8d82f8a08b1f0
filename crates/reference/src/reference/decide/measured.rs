//! The noise measured on the values decisions are taken on, which widens their windows.

use std::collections::HashMap;

use super::rms;

/// The expected noise measured on the values decisions are taken on: the largest absolute difference between the
/// correctly rounded run (every value rounded to the target's type) and the reference, recorded as the reference
/// hands each value over, before any node reading it runs. A decision whose input carries more noise than its fixed
/// window widens to [`Measured::FACTOR`] times it: a deep or cancelling computation leaves its result noisier than a
/// few units in the last place, and two choices within that noise are both faithful.
#[derive(Default)]
pub struct Measured {
    wanted: std::collections::HashSet<String>,
    /// Value → (the largest difference, the RMS of the reference's value).
    by_value: std::sync::Mutex<HashMap<String, (f64, f64)>>,
}

impl Measured {
    /// The multiple of the measured noise a decision's input may lie within of a boundary (the same multiple that
    /// lets the expected noise excuse a value's error).
    pub const FACTOR: f64 = 8.0;

    /// Noise to be measured on these values (the inputs decisions are taken on).
    pub fn on(values: impl IntoIterator<Item = String>) -> Measured {
        Measured {
            wanted: values.into_iter().collect(),
            ..Default::default()
        }
    }

    /// Measures the noise on `name`, when a decision is taken on it, from the expected-noise run's value of it
    /// (`noise`, waited for when it is still arriving).
    pub fn observe(
        &self,
        name: &str,
        reference: &crate::tensor::Tensor,
        noise: &dyn crate::spill::Values,
    ) {
        if !self.wanted.contains(name) {
            return;
        }
        let Some(e) = noise.tensor(name).filter(|e| e.len() == reference.len()) else {
            return;
        };
        let (r, e) = (reference.as_f64(), e.as_f64());
        let differ = (r.iter().zip(e.iter()))
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .map(|(a, b)| (a - b).abs());
        let max_abs = differ.fold(0.0, f64::max);
        let rms = rms(r
            .as_slice()
            .unwrap_or(&r.iter().copied().collect::<Vec<_>>()));
        let mut m = self.by_value.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(name.to_string(), (max_abs, rms));
    }

    /// The noise measured on `name`, and the RMS of its value, if it was.
    pub fn get(&self, name: &str) -> Option<(f64, f64)> {
        let m = self.by_value.lock().unwrap_or_else(|p| p.into_inner());
        m.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Decision, Kept};
    use super::*;
    use std::sync::Arc;

    fn tensor(v: &[f64]) -> crate::tensor::Tensor {
        crate::tensor::Tensor::F64(
            tract_onnx::prelude::tract_ndarray::ArrayD::from_shape_vec(vec![v.len()], v.to_vec())
                .unwrap(),
        )
    }

    #[test]
    fn a_window_widens_to_the_noise_measured_on_its_input_and_only_there() {
        let m = Arc::new(Measured::on(["x".to_string()]));
        let d = Decision::new(Kept::Memory(Arc::new(tensor(&[0.0]))), 0.0, 1e-6);
        let on_x = d.measured_on("x", &m);
        assert_eq!(
            on_x.noise_atol(),
            0.0,
            "nothing measured yet: the fixed window"
        );
        let noise: std::collections::HashMap<String, crate::tensor::Tensor> =
            [("x".to_string(), tensor(&[1.0 + 1e-3, -1.0, f64::NAN]))].into();
        m.observe("x", &tensor(&[1.0, -1.0 - 2e-3, f64::NAN]), &noise);
        assert!((on_x.noise_atol() - Measured::FACTOR * 2e-3).abs() < 1e-12);
        assert!(on_x.widened(), "8 × 2e-3 is beyond 1e-6 of an RMS of 1");
        assert_eq!(
            d.noise_atol(),
            0.0,
            "the same decision without the measurement keeps its window"
        );
        assert!(!d.widened());
        // A value no decision reads is not measured.
        m.observe("y", &tensor(&[1.0]), &noise);
        assert!(m.get("y").is_none());
    }
}
