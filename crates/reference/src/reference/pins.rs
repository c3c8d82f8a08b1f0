//! Decisions tract folds into constants at import (a T5 encoder's relative-position buckets depend on the sequence
//! length only, so `log`, scale and the `Cast` to int64 are computed before the run starts, and so is everything
//! downstream of them). The reference cannot adopt the target's decision there while running: the folded values
//! downstream were computed from its own. So the folded decisions are reconciled first ([`super::decide`]); where the
//! reference adopts any element, the decision is pinned as a `Constant` in the model and the model is parsed again,
//! so tract folds what follows from the adopted decision.

use std::collections::HashMap;

use tract_onnx::pb::{attribute_proto::AttributeType, AttributeProto, GraphProto};
use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::konst::Const;

use super::decide::{self, Adopted, Decisions};
use crate::model::Graph;

/// Decided values pinned to the adopted decisions, by ONNX name.
pub type Pins = HashMap<String, crate::tensor::Tensor>;

/// The element-wise rounding of an ONNX op that decides by rounding one float input alone.
fn rounding(op: &str) -> Option<fn(f64) -> f64> {
    match op {
        "Cast" => Some(f64::trunc),
        "Floor" => Some(f64::floor),
        "Ceil" => Some(f64::ceil),
        "Round" => Some(f64::round_ties_even),
        _ => None,
    }
}

/// The folded decisions of `model` (whose outputs are `names`) reconciled with the target's `d`: the values to pin
/// and what was adopted on each.
pub fn folded(
    graph: &Graph,
    model: &TypedModel,
    names: &[String],
    d: &Decisions,
) -> (Pins, Vec<(String, Adopted)>) {
    let consts: HashMap<&str, TValue> = (model.outputs.iter().zip(names))
        .filter_map(|(o, n)| {
            let k = model.node(o.node).op_as::<Const>()?;
            (o.slot == 0).then(|| (n.as_str(), k.val().clone().into_tvalue()))
        })
        .collect();
    let producers = graph.producers();
    let (mut pins, mut adopted) = (Pins::new(), vec![]);
    for (name, value) in consts.iter().filter(|(n, _)| d.contains_key(**n)) {
        let Some(node) = producers.get(name).and_then(|&i| graph.nodes.get(i)) else {
            continue;
        };
        let (Some(f), Some(x)) = (
            rounding(&node.op_type),
            node.inputs.first().and_then(|i| consts.get(i.as_str())),
        ) else {
            continue;
        };
        // A shape-typed (TDim) decision is reconciled as int64: tract's TDim casts narrow to 32 bits.
        let Ok(value) = value.cast_to_dt(i64_or(value.datum_type())) else {
            continue;
        };
        let value = value.into_owned().into_tvalue();
        let ins: TVec<TValue> = tvec![x.clone()];
        let mut out: TVec<TValue> = tvec![value.clone()];
        let like = value.clone();
        let run = |xs: TVec<TValue>| -> TractResult<TVec<TValue>> {
            let v = decide::f64s(&xs[0]).ok_or_else(|| anyhow::anyhow!("not numeric"))?;
            Ok(tvec![decide::shaped_like(
                &like,
                v.into_iter().map(f).collect()
            )?])
        };
        let names = [(0, name.to_string())];
        let found = decide::adopt_monotone(
            d,
            &names,
            (&ins, node.op_type == "Cast", None),
            &mut out,
            run,
        );
        if !found.iter().any(|(_, a)| a.flips + a.undefined > 0) {
            adopted.extend(found);
            continue;
        }
        if let Some(t) = crate::model::tract::from_tract(&out[0]) {
            pins.insert(name.to_string(), t);
            adopted.extend(found);
        }
    }
    (pins, adopted)
}

/// int64 for a shape type, else `dt`.
fn i64_or(dt: DatumType) -> DatumType {
    match dt {
        DatumType::TDim => DatumType::I64,
        dt => dt,
    }
}

/// Replaces the node that computes each pinned value with a `Constant` holding it (the node keeps its name).
pub fn pin(g: &mut GraphProto, pins: &Pins) {
    for n in g.node.iter_mut() {
        let [out] = n.output.as_slice() else { continue };
        let Some(t) = pins.get(out) else { continue };
        n.op_type = "Constant".into();
        n.domain.clear();
        n.input.clear();
        n.attribute = vec![AttributeProto {
            name: "value".into(),
            r#type: AttributeType::Tensor as i32,
            t: Some(crate::model::proto::tensor_to_proto(out, t)),
            ..Default::default()
        }];
    }
}
