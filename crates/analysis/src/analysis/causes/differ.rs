//! With `--target-model`: what differs between the two models at a node — the op or its inputs, its attributes,
//! its weights — named as a cause with the numbers. Weights that differ only by rounding to the target
//! initializer's type (a converted model) are not a difference.

use tract_onnx::pb::{GraphProto, NodeProto};

use super::{cause, limits, num};
use crate::model::Graph;
use crate::report::model::{Cause, CauseKind, Confidence};
use crate::tensor::Tensor;

/// Both models decoded once.
pub struct Models {
    reference: GraphProto,
    target: GraphProto,
    ref_dir: Option<std::path::PathBuf>,
    target_dir: Option<std::path::PathBuf>,
}

impl Models {
    pub fn new(reference: &Graph, target: &Graph) -> Models {
        let decode = |g: &Graph| {
            crate::model::import::decode(g.bytes.as_slice())
                .ok()
                .and_then(|m| m.graph)
                .unwrap_or_default()
        };
        Models {
            reference: decode(reference),
            target: decode(target),
            ref_dir: reference.path.parent().map(Into::into),
            target_dir: target.path.parent().map(Into::into),
        }
    }

    /// What differs at the node producing `value`, most specific first (empty when nothing does).
    pub fn explain(&self, value: &str) -> Vec<Cause> {
        let producer = |g: &'_ GraphProto| {
            g.node
                .iter()
                .find(|n| n.output.iter().any(|o| o == value))
                .cloned()
        };
        let (Some(r), Some(t)) = (producer(&self.reference), producer(&self.target)) else {
            return vec![];
        };
        if r.op_type != t.op_type || r.input.len() != t.input.len() {
            return vec![node_differs(value, &r, &t)];
        }
        let mut out = vec![];
        out.extend(attributes(&r, &t));
        out.extend(self.rewired(&r, &t));
        for (k, (ri, ti)) in r.input.iter().zip(&t.input).enumerate() {
            if let Some(c) = self.weights((&r, &t), k, (ri, ti)) {
                out.push(c);
            }
        }
        out
    }

    /// Inputs of `r` that read another computed value in the target model (`t`): values are named alike in both
    /// models (a `--target-model` is renamed to the reference values its values equal, and away from names whose
    /// values it changed, with the suffix `::target`), so a different name is a different value: a rewiring.
    fn rewired(&self, r: &NodeProto, t: &NodeProto) -> Vec<Cause> {
        let constant = |g: &GraphProto, name: &str| g.initializer.iter().any(|i| i.name == name);
        (r.input.iter().zip(&t.input).enumerate())
            .filter(|(_, (ri, ti))| ri != ti && !ri.is_empty() && !ti.is_empty())
            // The same value of the model holding other numbers downstream of a change (renamed away from it).
            .filter(|(_, (ri, ti))| ti.strip_suffix("::target") != Some(ri.as_str()))
            .filter(|(_, (ri, ti))| !constant(&self.reference, ri) && !constant(&self.target, ti))
            .map(|(k, (ri, ti))| {
                cause(
                    CauseKind::NodeDiffers,
                    format!(
                        "input {k} of {} `{}` is `{ti}` in the target model, `{ri}` in the reference",
                        r.op_type, r.name
                    ),
                    &[],
                    Confidence::High,
                    "compare the two graphs at this node: a converter or optimizer rewired it".into(),
                )
            })
            .collect()
    }

    /// Input `k` of node `r` (`t` in the target model), when an initializer in both models whose values differ
    /// beyond the target type's rounding.
    fn weights(
        &self,
        (r, t): (&NodeProto, &NodeProto),
        k: usize,
        (ri, ti): (&str, &str),
    ) -> Option<Cause> {
        let find = |g: &GraphProto, name: &str, dir: Option<&std::path::Path>| {
            let p = g.initializer.iter().find(|t| t.name == name)?;
            crate::model::proto::tensor_from_proto(p, dir).ok()
        };
        let a = find(&self.reference, ri, self.ref_dir.as_deref())?;
        let b = find(&self.target, ti, self.target_dir.as_deref())?;
        let b = match t.domain == crate::model::nchwc::DOMAIN {
            true => nchwc_weight(b, k, &a, t),
            false => b,
        };
        let what = format!(
            "initializer `{ti}` (input {k} of {} `{}`)",
            r.op_type, r.name
        );
        if a.shape() != b.shape() {
            return Some(cause(
                CauseKind::WeightsDiffer,
                format!(
                    "{what} has shape {:?} in the target model, {:?} in the reference",
                    b.shape(),
                    a.shape()
                ),
                &[],
                Confidence::High,
                "use the same weights in both models".into(),
            ));
        }
        weights_differ(&what, &a, &b)
    }
}

/// Input `k` of ONNX Runtime's NCHWc `Conv` `t` as the reference's `a` holds it: the filter (input 1) in OIHW
/// order, the bias (input 2) without the zeros that pad it to the block.
fn nchwc_weight(b: Tensor, k: usize, a: &Tensor, t: &NodeProto) -> Tensor {
    let group = (t.attribute.iter())
        .find(|x| x.name == "group")
        .map_or(1, |x| x.i);
    let block = crate::tensor::nchwc_block_size();
    match k {
        1 => b.unblocked_filter(block, group).unwrap_or(b),
        2 if a.shape().len() == 1 && b.shape().len() == 1 && a.len() < b.len() => {
            let head = b
                .to_f64_array()
                .slice_move(ndarray::s![..a.len()])
                .into_dyn();
            Tensor::from_f64(b.dtype(), head).unwrap_or(b)
        }
        _ => b,
    }
}

fn weights_differ(what: &str, a: &Tensor, b: &Tensor) -> Option<Cause> {
    if a.dtype().is_integer() && b.dtype().is_integer() {
        return integers_differ(what, a, b);
    }
    if !(a.dtype().is_float() && b.dtype().is_float()) {
        return None;
    }
    let (x, y) = (a.to_f64_array(), b.to_f64_array());
    let largest = x.iter().fold(0f64, |m, v| m.max(v.abs()));
    let (diff, count) = differences(&x, &y);
    let relative = if largest > 0.0 { diff / largest } else { diff };
    let rounding = 2.0 * limits(b.dtype()).u;
    if relative.is_nan() || relative <= rounding {
        return None;
    }
    Some(cause(
        CauseKind::WeightsDiffer,
        format!(
            "{what} differs from the reference's: {count} of {} values, by up to {} ({} of its largest value, beyond \
             rounding to {})",
            x.len(),
            num(diff),
            num(relative),
            limits(b.dtype()).name
        ),
        &[("max_abs_diff", diff), ("relative", relative), ("values_differing", count as f64)],
        Confidence::High,
        "check where the target model's weights come from: the export, the converter or the quantizer changed them"
            .into(),
    ))
}

fn node_differs(value: &str, r: &NodeProto, t: &NodeProto) -> Cause {
    cause(
        CauseKind::NodeDiffers,
        format!(
            "the target model computes `{value}` with {} `{}`({}), the reference with {} `{}`({})",
            t.op_type,
            t.name,
            t.input.join(", "),
            r.op_type,
            r.name,
            r.input.join(", ")
        ),
        &[],
        Confidence::High,
        "compare the two graphs at this node: a converter or optimizer rewrote it".into(),
    )
}

fn attributes(r: &NodeProto, t: &NodeProto) -> Vec<Cause> {
    let mut names: Vec<&str> = r
        .attribute
        .iter()
        .chain(&t.attribute)
        .map(|a| a.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter_map(|n| {
            let a = r.attribute.iter().find(|a| a.name == n);
            let b = t.attribute.iter().find(|a| a.name == n);
            (a != b).then(|| {
                let what = match (a.and_then(|a| a.g.as_ref()), b.and_then(|b| b.g.as_ref())) {
                    (Some(ga), Some(gb)) => format!(
                        "the `{n}` graph of {} `{}` differs: {}",
                        r.op_type,
                        r.name,
                        graph_differs(ga, gb)
                    ),
                    _ => format!(
                        "attribute `{n}` of {} `{}` is {} in the target model, {} in the reference",
                        r.op_type,
                        r.name,
                        show(b),
                        show(a)
                    ),
                };
                cause(
                    CauseKind::AttributeDiffers,
                    what,
                    &[],
                    Confidence::High,
                    "use the same attributes in both models".into(),
                )
            })
        })
        .collect()
}

fn show(a: Option<&tract_onnx::pb::AttributeProto>) -> String {
    let Some(a) = a else {
        return "absent".into();
    };
    if let Some(g) = &a.g {
        return format!("a graph of {} node(s)", g.node.len());
    }
    if !a.ints.is_empty() {
        format!("{:?}", a.ints)
    } else if !a.floats.is_empty() {
        format!("{:?}", a.floats)
    } else if !a.s.is_empty() {
        format!("\"{}\"", String::from_utf8_lossy(&a.s))
    } else if a.r#type == 1 {
        num(a.f as f64)
    } else {
        a.i.to_string()
    }
}

/// Where graph `t` (the target model's, of a `Loop`, `If` or `Scan`) first differs from `r`: its nodes, a node, or
/// an initializer, with the numbers where they are few.
fn graph_differs(r: &GraphProto, t: &GraphProto) -> String {
    if r.node.len() != t.node.len() {
        return format!(
            "{} node(s), {} in the reference",
            t.node.len(),
            r.node.len()
        );
    }
    if let Some((a, b)) = r.node.iter().zip(&t.node).find(|(a, b)| a != b) {
        return format!(
            "its node `{}` ({}) is `{}` ({}) in the target model",
            a.name, a.op_type, b.name, b.op_type
        );
    }
    let init = |g: &GraphProto, name: &str| g.initializer.iter().find(|i| i.name == name).cloned();
    for a in &r.initializer {
        let Some(b) = init(t, &a.name).filter(|b| b != a) else {
            continue;
        };
        let decoded = |p| crate::model::proto::tensor_from_proto(&p, None).ok();
        let few = |t: &Tensor| {
            let v: Vec<String> = t.to_f64_array().iter().map(|v| num(*v)).collect();
            v.join(", ")
        };
        return match (decoded(a.clone()), decoded(b)) {
            (Some(x), Some(y)) if x.len() <= 4 && y.len() <= 4 => format!(
                "its initializer `{}` is {} in the target model, {} in the reference",
                a.name,
                few(&y),
                few(&x)
            ),
            _ => format!("its initializer `{}` differs", a.name),
        };
    }
    "its inputs, outputs or names differ".into()
}

/// The largest |x − y| over the elements, and how many differ at all.
fn differences(x: &ndarray::ArrayD<f64>, y: &ndarray::ArrayD<f64>) -> (f64, u64) {
    (x.iter().zip(y.iter()))
        .map(|(p, q)| (p - q).abs())
        .filter(|d| *d > 0.0)
        .fold((0.0, 0), |(m, n), d| (m.max(d), n + 1))
}

/// Integer initializers (zero points, quantized weights, int32 biases) differ at any element: there is no rounding
/// to allow for.
fn integers_differ(what: &str, a: &Tensor, b: &Tensor) -> Option<Cause> {
    let (x, y) = (a.to_f64_array(), b.to_f64_array());
    let (diff, count) = differences(&x, &y);
    (count > 0).then(|| {
        cause(
            CauseKind::WeightsDiffer,
            format!(
                "{what} differs from the reference's: {count} of {} integers, by up to {}",
                x.len(),
                num(diff)
            ),
            &[("max_abs_diff", diff), ("values_differing", count as f64)],
            Confidence::High,
            "check where the target model's weights come from: the export, the converter or the quantizer changed \
             them"
                .into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use tract_onnx::pb::{AttributeProto, NodeProto};

    fn conv(pads: Vec<i64>) -> NodeProto {
        NodeProto {
            name: "c".into(),
            op_type: "Conv".into(),
            attribute: vec![AttributeProto {
                name: "pads".into(),
                r#type: 7,
                ints: pads,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn attributes_that_differ_are_named_with_both_values() {
        let found = super::attributes(&conv(vec![1, 1, 1, 1]), &conv(vec![0, 0, 0, 0]));
        assert_eq!(found.len(), 1);
        assert!(
            found[0]
                .summary
                .contains("`pads` of Conv `c` is [0, 0, 0, 0] in the target model, [1, 1, 1, 1]"),
            "{}",
            found[0].summary
        );
        assert!(super::attributes(&conv(vec![1]), &conv(vec![1])).is_empty());
    }

    #[test]
    fn weights_rounded_to_the_target_type_are_not_a_difference() {
        use crate::tensor::Tensor;
        let a = Tensor::F32(ndarray::ArrayD::from_shape_vec(vec![3], vec![1.0, 0.5, 0.1]).unwrap());
        let rounded = a.cast(crate::tensor::DType::F16).unwrap();
        assert!(super::weights_differ("w", &a, &rounded).is_none());
        let scaled = Tensor::F32(
            ndarray::ArrayD::from_shape_vec(vec![3], vec![1.01, 0.505, 0.101]).unwrap(),
        );
        let c = super::weights_differ("w", &a, &scaled).unwrap();
        assert!(c.summary.contains("3 of 3 values"), "{}", c.summary);
    }

    #[test]
    fn an_integer_initializer_differs_by_any_level() {
        let zp = |v: u8| crate::tensor::Tensor::U8(ndarray::arr1(&[v, 7]).into_dyn());
        let c =
            super::weights_differ("zero point", &zp(3), &zp(4)).expect("one level is a difference");
        assert!(
            c.summary.contains("1 of 2 integers, by up to 1"),
            "{}",
            c.summary
        );
        assert!(super::weights_differ("zero point", &zp(3), &zp(3)).is_none());
    }
}
