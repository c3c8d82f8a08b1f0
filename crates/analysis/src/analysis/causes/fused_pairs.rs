//! The u8×s8 product pairs inside the convolutions and matrix products ONNX Runtime fuses from a QDQ model. Its
//! optimizer rewrites a `Conv`, `Gemm` or `MatMul` whose input and weight are both dequantized from integers into a
//! `QLinearConv`, `QGemm` or `MatMulIntegerToFloat`, whose x86 kernels without VNNI add adjacent u8×s8 products in
//! saturating int16 arithmetic ([`super::conv_pairs`], [`super::quant`]); int8 activations are shifted to uint8 by
//! 128 first. Checked on ONNX Runtime 1.31's fused `QLinearConv` on an AVX2 CPU: four int8 activations of 127 times
//! four weights of 127 come out at 1 level where the exact product is 65, as the shifted pairs saturated predict. The unfused run phantom exposes values from never
//! runs those kernels, so only the fused run's outputs show the saturation: the pairs over int16, counted on the
//! reference's own levels, say whether it can explain them.

use std::collections::HashMap;

use ndarray::ArrayD;

use tract_onnx::pb::NodeProto;

use super::conv_pairs::{pair_saturation, Geometry};
use crate::model::Graph;
use crate::tensor::{DType, Tensor};

/// The pairs checked at most in one product: a whole model's products are summed up, each sampled.
const BUDGET: usize = 1_000_000;

/// One convolution or matrix product ONNX Runtime fuses: its node, the activation levels it reads (a
/// `QuantizeLinear`'s output) with their zero point, and its weight's integer initializer.
pub struct FusedConv {
    pub node: usize,
    conv: bool,
    pub levels: String,
    zero_point: Option<String>,
    weight: String,
}

/// The convolutions and matrix products of `graph` whose input and weight are dequantized from integers (a quantized
/// activation and an integer initializer).
pub fn fused_convs(graph: &Graph) -> Vec<FusedConv> {
    let producers = graph.producers();
    let dq = |value: &str| {
        let n = &graph.nodes[*producers.get(value)?];
        (n.op_type == "DequantizeLinear" && n.domain.is_empty()).then_some(n)
    };
    (graph.nodes.iter())
        .filter(|n| matches!(n.op_type.as_str(), "Conv" | "Gemm" | "MatMul") && n.domain.is_empty())
        .filter_map(|n| {
            let (x, w) = (dq(n.inputs.first()?)?, dq(n.inputs.get(1)?)?);
            let levels = x.inputs.first()?;
            let quantized = &graph.nodes[*producers.get(levels.as_str())?];
            let weight = w.inputs.first()?;
            (quantized.op_type == "QuantizeLinear" && graph.initializers.contains_key(weight)).then(
                || FusedConv {
                    node: n.index,
                    conv: n.op_type == "Conv",
                    levels: levels.clone(),
                    zero_point: x.inputs.get(2).filter(|z| !z.is_empty()).cloned(),
                    weight: weight.clone(),
                },
            )
        })
        .collect()
}

/// What the pairs of the fused convolutions say.
#[derive(Debug, Default, PartialEq)]
pub struct Saturation {
    /// Convolutions checked, and those with a pair over int16.
    pub convs: usize,
    pub saturating: usize,
    /// Pairs over int16, pairs checked, the largest |pair sum|.
    pub over: usize,
    pub checked: usize,
    pub worst: f64,
    /// The convolution with the most pairs over, and how many.
    pub most: Option<(String, usize)>,
}

/// Counts the pairs over int16 of `convs` in `graph` on the reference's activation `levels` (by name).
pub fn saturation(
    graph: &Graph,
    convs: &[FusedConv],
    levels: &HashMap<String, Tensor>,
) -> Saturation {
    let mut skeleton = crate::model::skeleton::Skeleton::of(graph).ok();
    let protos = (skeleton.as_ref())
        .and_then(|s| s.proto.graph.clone())
        .unwrap_or_default()
        .node;
    let mut tensor = |name: &str| {
        let t = skeleton.as_mut()?.take(graph, name)?.ok()?;
        crate::model::proto::tensor_from_proto(&t, graph.path.parent()).ok()
    };
    let mut s = Saturation::default();
    for c in convs {
        let node = &graph.nodes[c.node];
        let (Some(x), Some(w)) = (levels.get(&c.levels), tensor(&c.weight)) else {
            continue;
        };
        if w.dtype() != DType::I8 || !matches!(x.dtype(), DType::I8 | DType::U8) {
            continue;
        }
        // An int8 activation reaches the kernel as uint8: shifted by 128, its zero point too.
        let shift = if x.dtype() == DType::I8 { 128.0 } else { 0.0 };
        let zp = (c.zero_point.as_deref())
            .and_then(&mut tensor)
            .and_then(|z| z.as_f64().iter().next().copied());
        let x = x.as_f64().mapv(|v| v + shift);
        let proto = protos.get(node.source_index);
        let counted = match c.conv {
            true => pair_saturation(&x, &w.as_f64(), &geometry(proto, zp.unwrap_or(0.0) + shift)),
            false => product_pairs(proto, &x, &w.as_f64()),
        };
        let Some((over, worst, checked)) = counted else {
            continue;
        };
        s.convs += 1;
        s.over += over;
        s.checked += checked;
        s.worst = s.worst.max(worst);
        if over > 0 {
            s.saturating += 1;
            if s.most.as_ref().is_none_or(|(_, n)| over > *n) {
                s.most = Some((node.name.clone(), over));
            }
        }
    }
    s
}

/// The pairs of a fused `Gemm` (its weight transposed where `transB` says) or `MatMul`.
fn product_pairs(
    p: Option<&NodeProto>,
    x: &ArrayD<f64>,
    w: &ArrayD<f64>,
) -> Option<(usize, f64, usize)> {
    let trans = p
        .and_then(|p| p.attribute.iter().find(|a| a.name == "transB"))
        .is_some_and(|a| a.i != 0);
    match trans {
        true => super::quant::pair_saturation(x, &w.t().to_owned(), BUDGET),
        false => super::quant::pair_saturation(x, w, BUDGET),
    }
}

impl Saturation {
    /// As the report keeps it: None where no pair saturates.
    pub fn reported(&self) -> Option<crate::report::model::FusedSaturation> {
        let (most, most_pairs) = self.most.clone()?;
        Some(crate::report::model::FusedSaturation {
            products: self.convs,
            saturating: self.saturating,
            pairs_over: self.over,
            pairs_checked: self.checked,
            worst_pair: self.worst,
            most,
            most_pairs,
        })
    }
}

/// The cause of an output ONNX Runtime's fused run moved beyond the faithful variation, where its fused integer
/// kernels saturate pairs (the value's [`crate::report::model::Variation::saturation`]).
pub(super) fn explain(
    _c: &crate::report::model::Culprit,
    _ev: &super::Evidence,
    s: &super::Site,
    out: &mut Vec<crate::report::model::Cause>,
) {
    let Some(f) = (s.vr)
        .and_then(|v| v.variation.as_ref())
        .and_then(|v| v.saturation.as_ref())
    else {
        return;
    };
    out.push(super::cause(
        crate::report::model::CauseKind::QuantizationSaturation,
        format!(
            "ONNX Runtime's fused integer kernels add u8×s8 products in pairs in saturating int16 on this CPU (no \
             VNNI), its unfused run does not: on the reference's levels, {} of {} pairs checked exceed int16 (up to \
             {}) in {} of the {} convolutions and matrix products it fuses, most in `{}` ({})",
            f.pairs_over,
            f.pairs_checked,
            super::num(f.worst_pair),
            f.saturating,
            f.products,
            f.most,
            f.most_pairs
        ),
        &[("pairs_over", f.pairs_over as f64), ("worst_pair", f.worst_pair)],
        crate::report::model::Confidence::Medium,
        "quantize activations with reduce_range=True (7 bits), or run on a CPU with VNNI; --ort-opt-level disable \
         compares the unfused run"
            .into(),
    ));
}

/// The geometry of convolution `p` (its attributes), padding reading `pad_byte`.
fn geometry(p: Option<&NodeProto>, pad_byte: f64) -> Geometry {
    let attr = |name: &str| p.and_then(|p| p.attribute.iter().find(|a| a.name == name));
    let two = |name: &str, default: i64| {
        [0, 1].map(|k| {
            (attr(name)
                .and_then(|a| a.ints.get(k).copied())
                .unwrap_or(default))
            .max(0) as usize
        })
    };
    Geometry {
        channels_last: false,
        group: attr("group").map_or(1, |a| a.i).max(1) as usize,
        strides: two("strides", 1),
        pads: two("pads", 0),
        dilations: two("dilations", 1),
        pad_byte,
        budget: BUDGET,
    }
}
