//! Unit tests of the expected noise and the introduced error.

use super::*;
use crate::compare::{Metrics, Tolerance};
use crate::tensor::DType;

pub(crate) fn failing(max_abs: f64) -> ValueReport {
    ValueReport {
        name: "v".into(),
        status: ValueStatus::Fail,
        reason: None,
        shape: vec![4],
        target_dtype: Some(DType::F16),
        judged_in: None,
        tolerance: Some(Tolerance {
            atol: 1e-2,
            rtol: 1e-2,
            floor: 0.0,
        }),
        metrics: Some(Metrics {
            max_abs,
            ..Default::default()
        }),
        reference_stats: None,
        target_stats: None,
        worst: None,
        detail: None,
        noise: None,
        rounding: None,
        introduced: None,
        is_output: false,
        sample: None,
        adopted: None,
        variation: None,
    }
}

pub(crate) fn noise(max_abs: f64, used: f64) -> Noise {
    Noise {
        max_abs,
        rms: max_abs,
        tolerance_used: used,
        nonfinite: 0,
        near_overflow: 0,
        rounding: 0.0,
        ratio: None,
        excused: false,
    }
}

#[test]
fn the_dispatched_noise_pass_is_bit_identical_to_the_baseline() {
    let r: Vec<f64> = (0..3000)
        .map(|i| ((i * 7919) % 1013) as f64 / 7.0 - 70.0)
        .collect();
    let mut e: Vec<half::f16> = r.iter().map(|&v| half::f16::from_f64(v * 1.001)).collect();
    e[1500] = half::f16::INFINITY;
    let tol = Tolerance {
        atol: 1e-3,
        rtol: 1e-3,
        floor: 0.0,
    };
    let (a, b) = (
        noise_chunk(&r, &e, tol, 2.0, DType::F16),
        noise_chunk_in(&r, &e, tol, 2.0, DType::F16),
    );
    let bits = |p: NoisePass| [p.max_abs, p.sq, p.used, p.rounding, p.largest].map(f64::to_bits);
    assert_eq!(bits(a), bits(b));
    assert_eq!((a.n, a.nonfinite), (b.n, b.nonfinite));
    assert_eq!((a.n, a.nonfinite), (2999, 1));
}

#[test]
fn elements_within_the_noise_of_fp16_overflow_are_counted() {
    let r = Tensor::F64(ndarray::arr1(&[65000.0, 65500.0, 70000.0, 1.0, -65490.0]).into_dyn());
    let e = r.cast(DType::F16).unwrap();
    let tol = Tolerance {
        atol: 1e-2,
        rtol: 1e-2,
        floor: 0.0,
    };
    let n = super::noise(&r, &e, tol, 1.0).unwrap();
    // 70000 overflows in the ideal run; 65500 and −65490 round to ±65504 (errors 4 and 14), within 8× the
    // ideal run's error (14) of 65520; 65000 (64992 in fp16) is 520 away.
    assert_eq!(n.nonfinite, 1);
    assert_eq!(n.max_abs, 14.0);
    assert_eq!(n.near_overflow, 2);
    // A target with two more infinities than the ideal run: precision while they are the near ones.
    let mut v = failing(12.0);
    v.metrics.as_mut().unwrap().nonfinite_mismatch = 3;
    v.noise = Some(n.clone());
    assert!(crate::analysis::anomaly::precision_explains(&v));
    v.metrics.as_mut().unwrap().nonfinite_mismatch = 4;
    assert!(!crate::analysis::anomaly::precision_explains(&v));
    let far = Tensor::F64(ndarray::arr1(&[60000.0, 1.0]).into_dyn());
    let n = super::noise(&far, &far.cast(DType::F16).unwrap(), tol, 1.0).unwrap();
    assert_eq!(n.near_overflow, 0);
}

#[test]
fn noise_excuses_only_errors_near_an_acceptable_noise() {
    let defaults = ToleranceSpec::default();
    // 5× a noise that meets the tolerance: expected rounding.
    let mut v = failing(0.05);
    apply_noise(&mut v, noise(0.01, 0.9), &defaults);
    assert_eq!(v.status, ValueStatus::Pass);
    assert!(v.noise.as_ref().unwrap().excused);
    assert_eq!(v.noise.as_ref().unwrap().ratio, Some(5.0));
    // 20× the noise: drift.
    let mut v = failing(0.2);
    apply_noise(&mut v, noise(0.01, 0.9), &defaults);
    assert_eq!(v.status, ValueStatus::Fail);
    // The noise itself fails the tolerance: the precision is too coarse, not excused.
    let mut v = failing(0.05);
    apply_noise(&mut v, noise(0.04, 1.5), &defaults);
    assert_eq!(v.status, ValueStatus::Fail);
    // Explicit tolerances are never relaxed.
    let mut v = failing(0.05);
    let explicit = ToleranceSpec {
        atol: Some(1e-2),
        ..Default::default()
    };
    apply_noise(&mut v, noise(0.01, 0.9), &explicit);
    assert_eq!(v.status, ValueStatus::Fail);
}

/// A zero point off by one (the zoo's QDQ ConvNeXt): one quantum at half of the elements, where the ideal run
/// flips one quantum at two of 31,360. The largest errors are alike; the RMS is 88× the ideal run's.
#[test]
fn an_error_as_large_as_the_noise_but_everywhere_is_not_excused() {
    let quantum = 0.0020225;
    let ideal = Noise {
        rms: 1.615e-5,
        ..noise(quantum, 22.8)
    };
    let mut v = failing(quantum);
    v.metrics.as_mut().unwrap().rmse = 0.00143;
    v.noise = Some(ideal.clone());
    assert!(!crate::analysis::anomaly::precision_explains(&v));
    v.metrics.as_mut().unwrap().rmse = 1.6e-5;
    assert!(crate::analysis::anomaly::precision_explains(&v));
    // The same where the ideal run meets the tolerance: excused only while the RMS is within the noise too.
    let within = Noise {
        tolerance_used: 0.9,
        ..ideal
    };
    let mut v = failing(quantum);
    v.metrics.as_mut().unwrap().rmse = 0.00143;
    apply_noise(&mut v, within.clone(), &ToleranceSpec::default());
    assert_eq!(v.status, ValueStatus::Fail);
    let mut v = failing(quantum);
    v.metrics.as_mut().unwrap().rmse = 1.0e-4;
    apply_noise(&mut v, within, &ToleranceSpec::default());
    assert_eq!(v.status, ValueStatus::Pass);
}

#[test]
fn introduced_error_is_measured_against_correct_rounding() {
    let r = Tensor::F64(ndarray::ArrayD::from_shape_vec(vec![2], vec![1.0, 1000.3]).unwrap());
    let mut iso = failing(0.5);
    iso.status = ValueStatus::Pass;
    let i = introduced(&iso, &r, Some(DType::F16)).unwrap();
    // 1000.3 rounds to 1000.5 in fp16 (spacing 0.5 there): 0.2 is the error of correct rounding.
    assert!((i.expected - 0.2).abs() < 1e-9, "{}", i.expected);
    assert!((i.ratio.unwrap() - 2.5).abs() < 1e-9);
}

/// The screen before attribution: the noise pass measures correct rounding (as the introduced error does), and
/// a node is run alone only when its error in the graph reaches 1/8 of both anomaly thresholds.
#[test]
fn nodes_run_alone_only_where_the_graph_error_leaves_room_for_an_anomaly() {
    use crate::analysis::anomaly::{may_be_anomalous, Operands, ROUNDING_FACTOR, SCREEN};
    let r = Tensor::F64(ndarray::arr1(&[1.0, 1000.3, -3.0]).into_dyn());
    let e = r.cast(DType::F16).unwrap();
    let tol = Tolerance {
        atol: 1e-2,
        rtol: 1e-2,
        floor: 0.0,
    };
    let n = super::noise(&r, &e, tol, 1.0).unwrap();
    assert!((n.rounding - 0.2).abs() < 1e-9, "{}", n.rounding);
    let mut v = failing(0.0);
    v.status = ValueStatus::Pass;
    v.noise = Some(n);
    let at = |err: f64, v: &mut ValueReport, scale: f64| {
        let m = v.metrics.as_mut().unwrap();
        (m.max_abs, m.scale) = (err, scale);
        may_be_anomalous(v, Operands::default(), true)
    };
    let bound = SCREEN * ROUNDING_FACTOR * 0.2;
    assert!(!at(bound * 0.99, &mut v, 1.0));
    assert!(at(bound * 1.01, &mut v, 1.0));
    // The relative threshold holds it back on a large scale (64 fp16 epsilons of 1e4 is 625).
    assert!(!at(bound * 1.01, &mut v, 1e4));
    // Discrete decisions the reference adopted, and values with no float type, are never anomalous.
    v.adopted = Some(Default::default());
    assert!(!at(1e9, &mut v, 1.0));
    v.adopted = None;
    v.target_dtype = Some(DType::I64);
    assert!(!at(1e9, &mut v, 1.0));
    // Without expected noise there is nothing to clear it by: it runs alone.
    v.target_dtype = Some(DType::F16);
    v.noise = None;
    assert!(at(0.0, &mut v, 1.0));
}
