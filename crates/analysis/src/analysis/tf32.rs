//! Settling whether TF32 causes a culprit's error. ONNX Runtime's CUDA provider runs float32 MatMul, Gemm and Conv
//! on TF32 tensor cores by default on Ampere and newer GPUs (`use_tf32=1`): the operands are rounded to a 10-bit
//! mantissa, so products carry errors near 2⁻¹¹ of their terms, thousands of times float32's rounding. Seen on an
//! H100: ResNet-18 and ViT-Ti drift with the default and are clean with `use_tf32=0`. A rerun of the target with
//! `use_tf32=0` tells TF32 from a kernel fault: the culprit's value within tolerance there confirms TF32 (and
//! refutes the generic causes found for it); a value that still fails refutes TF32. Culprits of other ops (a PRelu
//! amplifying what a TF32 convolution handed it) and anomalies (within tolerance, beyond rounding) are judged by the
//! same rerun.

use super::causes::num;
use crate::report::model::{
    Anomaly, Cause, CauseKind, Confidence, Culprit, ValueReport, ValueStatus,
};

/// Ops ONNX Runtime's CUDA provider may run on TF32 tensor cores (ONNX and its contrib ops).
pub fn on_tensor_cores(op: &str) -> bool {
    matches!(
        op,
        "MatMul"
            | "Gemm"
            | "Conv"
            | "ConvTranspose"
            | "FusedMatMul"
            | "FusedConv"
            | "FusedGemm"
            | "Attention"
            | "MultiHeadAttention"
            | "GroupQueryAttention"
            | "GRU"
            | "LSTM"
            | "RNN"
    )
}

/// Causes the rerun speaks for: the error it removes is not theirs.
fn refuted_by_tf32(k: CauseKind) -> bool {
    use CauseKind::*;
    matches!(
        k,
        LongReduction | Cancellation | BeyondRounding | Precision | Fusion | Amplification
    )
}

/// How the rerun with `use_tf32=0` judged one culprit.
#[derive(Debug, PartialEq)]
pub enum Settled {
    /// TF32 is the cause (or most of it): a `tf32` cause was put first.
    Confirmed,
    /// The culprit still fails without TF32, with this max |t − r|.
    Refuted(f64),
}

/// Confirms or refutes TF32 for `c` with its value from a run with `use_tf32=0`; `c.max_abs` is its error in the
/// run under test (TF32 on).
pub fn settle(c: &mut Culprit, provider: &str, off: &ValueReport) -> Settled {
    let Some((cause, whole)) = judge(c.max_abs, &c.op_type, provider, off) else {
        return Settled::Refuted(max_abs(off));
    };
    if whole {
        c.causes.retain(|k| !refuted_by_tf32(k.kind));
    }
    c.causes.insert(0, cause);
    c.causes.sort_by_key(|c| c.confidence);
    Settled::Confirmed
}

/// The same for an anomaly: its error alone (TF32 on) against its value in the graph without TF32.
pub fn settle_anomaly(a: &mut Anomaly, provider: &str, off: &ValueReport) -> Settled {
    let Some((cause, _)) = judge(a.max_abs, &a.op_type, provider, off) else {
        return Settled::Refuted(max_abs(off));
    };
    if let Some(head) = a.summary.strip_suffix(super::anomaly::KERNEL_OR_DATA) {
        a.summary = format!("{head}: TF32 tensor cores, as the rerun without them shows");
    }
    a.causes.insert(0, cause);
    Settled::Confirmed
}

fn max_abs(r: &ValueReport) -> f64 {
    r.metrics.as_ref().map(|m| m.max_abs).unwrap_or(f64::NAN)
}

/// The `tf32` cause when the rerun without TF32 removes the error (`whole`: within tolerance and at most a quarter
/// of it left) or most of it (4× less or better); None when the error stays.
fn judge(with: f64, op: &str, provider: &str, off: &ValueReport) -> Option<(Cause, bool)> {
    let without = max_abs(off);
    let most = without.is_finite() && without * 4.0 <= with;
    let whole = most && off.status == ValueStatus::Pass;
    if !most {
        return None;
    }
    let rest = match whole {
        true => "within tolerance: TF32 accounts for the whole error".to_string(),
        false => format!(
            "still out of tolerance: TF32 accounts for {:.0}% of the error, something else for the rest",
            100.0 * (1.0 - without / with)
        ),
    };
    let what = match on_tensor_cores(op) {
        true => format!("runs this float32 {op} on TF32 tensor cores"),
        false => format!(
            "runs float32 MatMul/Gemm/Conv on TF32 tensor cores, and this {op} carries what they computed"
        ),
    };
    let summary = format!(
        "ONNX Runtime's {provider} provider {what} (use_tf32=1, its default on Ampere and newer GPUs: operands rounded \
         to a 10-bit mantissa): max |t − r| {}; rerun with use_tf32=0: {}, {rest}",
        num(with),
        num(without)
    );
    let cause = Cause {
        kind: CauseKind::Tf32,
        summary,
        evidence: [("max_abs".to_string(), with), ("tf32_off_max_abs".to_string(), without)]
            .into_iter()
            .filter(|(_, v)| v.is_finite())
            .collect(),
        confidence: match whole {
            true => Confidence::High,
            false => Confidence::Medium,
        },
        fix: "where float32 accuracy matters, turn TF32 off: --ep-option use_tf32=0 here, the CUDA provider option \
              use_tf32=0 in ONNX Runtime (torch.backends.cuda.matmul.allow_tf32 = False in PyTorch); or accept TF32 \
              and judge this model with a wider --rtol"
            .into(),
        nodes: vec![],
    };
    Some((cause, whole))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::ToleranceSpec;
    use crate::tensor::Tensor;

    fn culprit(max_abs: f64) -> Culprit {
        Culprit {
            node_index: 4,
            node: "Conv_1".into(),
            op_type: "Conv".into(),
            value: "v".into(),
            basis: crate::report::model::Basis::Introduced,
            max_abs,
            noise_ratio: Some(9000.0),
            causes: vec![Cause {
                kind: CauseKind::LongReduction,
                summary: "576 terms".into(),
                evidence: Default::default(),
                confidence: Confidence::Low,
                fix: String::new(),
                nodes: vec![],
            }],
            spoils: vec![],
            path: vec![],
        }
    }

    fn report(target: f32) -> ValueReport {
        let r = Tensor::F32(ndarray::arr1(&[1.0f32, 2.0, 3.0]).into_dyn());
        let t = Tensor::F32(ndarray::arr1(&[1.0f32, 2.0, target]).into_dyn());
        crate::analysis::compare_pair(
            "v",
            Ok(&r),
            Ok(&t),
            &ToleranceSpec::default(),
            1.0,
            false,
            false,
        )
    }

    #[test]
    fn within_tolerance_without_tf32_confirms_it_and_drops_the_generic_causes() {
        let mut c = culprit(0.0044);
        assert_eq!(settle(&mut c, "cuda", &report(3.0)), Settled::Confirmed);
        assert_eq!(c.causes.len(), 1, "{:?}", c.causes);
        let k = &c.causes[0];
        assert_eq!((k.kind, k.confidence), (CauseKind::Tf32, Confidence::High));
        assert!(
            k.summary.contains("use_tf32=0: 0,") || k.summary.contains("use_tf32=0: 0 "),
            "{}",
            k.summary
        );
        assert!(k.fix.contains("--ep-option use_tf32=0"));
        assert_eq!(k.evidence["max_abs"], 0.0044);
    }

    #[test]
    fn most_of_the_error_gone_is_a_partial_cause_and_the_rest_stays_explained() {
        let mut c = culprit(0.1);
        // 3.01 against 3: 0.01 left of 0.1, out of tolerance (atol 1e-4 + rtol 1e-3 · 3).
        assert_eq!(settle(&mut c, "cuda", &report(3.01)), Settled::Confirmed);
        assert_eq!(c.causes.len(), 2);
        assert_eq!(c.causes[0].kind, CauseKind::Tf32);
        assert_eq!(c.causes[0].confidence, Confidence::Medium);
        assert!(
            c.causes[0].summary.contains("something else"),
            "{}",
            c.causes[0].summary
        );
    }

    #[test]
    fn an_anomaly_that_vanishes_without_tf32_is_explained_by_it() {
        let mut a = Anomaly {
            node_index: 20,
            node: "n4".into(),
            op_type: "Conv".into(),
            value: "v".into(),
            max_abs: 0.0061,
            rounding_ratio: 6727.0,
            relative: 6.2e-4,
            noise_ratio: None,
            summary: format!(
                "off by 0.0061 while within tolerance{}",
                super::super::anomaly::KERNEL_OR_DATA
            ),
            causes: vec![],
        };
        assert_eq!(
            settle_anomaly(&mut a, "CUDA", &report(3.0)),
            Settled::Confirmed
        );
        assert_eq!(a.causes[0].kind, CauseKind::Tf32);
        assert!(
            a.summary
                .ends_with("TF32 tensor cores, as the rerun without them shows"),
            "{}",
            a.summary
        );
        let mut kept = a.clone();
        kept.causes.clear();
        kept.max_abs = 0.005;
        assert!(matches!(
            settle_anomaly(&mut kept, "CUDA", &report(3.004)),
            Settled::Refuted(_)
        ));
        assert!(kept.causes.is_empty());
    }

    #[test]
    fn a_culprit_that_carries_tf32_products_is_said_to() {
        let mut c = culprit(0.0014);
        c.op_type = "PRelu".into();
        assert_eq!(settle(&mut c, "CUDA", &report(3.0)), Settled::Confirmed);
        assert!(
            c.causes[0]
                .summary
                .contains("this PRelu carries what they computed"),
            "{}",
            c.causes[0].summary
        );
    }

    #[test]
    fn an_error_that_stays_without_tf32_refutes_it() {
        let mut c = culprit(0.0044);
        let Settled::Refuted(m) = settle(&mut c, "cuda", &report(3.004)) else {
            panic!("TF32 claimed for an error that stays without it");
        };
        assert!((m - 0.004).abs() < 1e-6, "{m}");
        assert!(c.causes.iter().all(|k| k.kind != CauseKind::Tf32));
    }
}
