//! Settling a `fusion` cause. A culprit that fails in the graph while passing on its own (fed with reference
//! inputs) is either fused by ONNX Runtime with its neighbours, or amplifies small errors its inputs carry within
//! tolerance. Rerunning the target with graph optimizations disabled tells them apart: within tolerance unfused
//! confirms fusion; still failing refutes it.

use super::causes::num;
use crate::report::model::{CauseKind, Confidence, Culprit, ValueReport, ValueStatus};

/// Confirms or refutes `c`'s fusion cause with its value from a run with `--ort-opt-level disable`.
pub fn settle(c: &mut Culprit, unfused: &ValueReport) {
    let Some(k) = c.causes.iter().position(|x| x.kind == CauseKind::Fusion) else {
        return;
    };
    let m = unfused
        .metrics
        .as_ref()
        .map(|m| m.max_abs)
        .unwrap_or(f64::NAN);
    let cause = &mut c.causes[k];
    cause.evidence.insert("unfused_max_abs".into(), m);
    if unfused.status == ValueStatus::Pass {
        cause.confidence = Confidence::High;
        cause.summary = format!(
            "{}; confirmed: with --ort-opt-level disable the node is within tolerance (max |t − r| {})",
            cause.summary,
            num(m)
        );
        cause.fix = "keep this node out of the fused kernel: run with a lower --ort-opt-level, or keep the fused \
                     group in fp32"
            .into();
    } else {
        cause.kind = CauseKind::Amplification;
        cause.confidence = Confidence::Medium;
        cause.summary = format!(
            "not fusion: with --ort-opt-level disable the node still fails (max |t − r| {}) while alone it passes, \
             so it amplifies errors its inputs carry within tolerance",
            num(m)
        );
        cause.fix =
            "raise the precision of its inputs (keep their producers in fp32) or of this node"
                .into();
    }
    c.causes.sort_by_key(|c| c.confidence);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::ToleranceSpec;
    use crate::report::model::Cause;
    use crate::tensor::Tensor;

    fn culprit() -> Culprit {
        Culprit {
            node_index: 3,
            node: "n".into(),
            op_type: "Mul".into(),
            value: "v".into(),
            basis: crate::report::model::Basis::Cumulative,
            max_abs: 1.0,
            noise_ratio: None,
            causes: vec![Cause {
                kind: CauseKind::Fusion,
                summary: "alone it passes".into(),
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
    fn passing_unfused_confirms_fusion() {
        let mut c = culprit();
        settle(&mut c, &report(3.0));
        assert_eq!(c.causes[0].kind, CauseKind::Fusion);
        assert_eq!(c.causes[0].confidence, Confidence::High);
        assert!(c.causes[0].summary.contains("confirmed"));
        assert_eq!(c.causes[0].evidence["unfused_max_abs"], 0.0);
    }

    #[test]
    fn failing_unfused_refutes_fusion() {
        let mut c = culprit();
        settle(&mut c, &report(3.5));
        assert_eq!(c.causes[0].kind, CauseKind::Amplification);
        assert!(c.causes[0].summary.starts_with("not fusion"));
        assert_eq!(c.causes[0].evidence["unfused_max_abs"], 0.5);
    }
}
