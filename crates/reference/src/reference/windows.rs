//! Pooling windows that do not fit their input: ONNX Runtime refuses a MaxPool, AveragePool or LpPool whose
//! (dilated) kernel spans more than its padded input ("Calculated output dimension is negative"), where tract
//! computes a 1×1 output. Checked on the typed reference model, where every value's shape is known, before any
//! value is computed, so the model is refused on every target.

use std::collections::HashMap;

use tract_onnx::pb::{GraphProto, NodeProto};
use tract_onnx::prelude::*;

use crate::model::Graph;

const POOLS: &[&str] = &["MaxPool", "AveragePool", "LpPool"];

/// The shape of every value the typed model computes (`names[i]` is its i-th output) and of every graph input.
pub fn shapes<'a>(
    typed: &TypedModel,
    names: &'a [String],
    inputs: impl Iterator<Item = (&'a str, Vec<usize>)>,
) -> HashMap<&'a str, Vec<usize>> {
    let mut out: HashMap<&str, Vec<usize>> = inputs.collect();
    for (name, outlet) in names.iter().zip(typed.output_outlets().unwrap_or(&[])) {
        let concrete = typed
            .outlet_fact(*outlet)
            .ok()
            .and_then(|f| f.shape.as_concrete().map(|s| s.to_vec()));
        if let Some(s) = concrete {
            out.insert(name.as_str(), s);
        }
    }
    out
}

/// The pooling nodes of `graph` fit their inputs; the error names the node, the axis and the attributes to check.
pub fn pools_fit(
    graph: &Graph,
    proto: &GraphProto,
    shapes: &HashMap<&str, Vec<usize>>,
) -> Result<(), String> {
    for n in graph
        .nodes
        .iter()
        .filter(|n| n.domain.is_empty() && POOLS.contains(&n.op_type.as_str()))
    {
        let (Some(p), Some(x)) = (
            proto.node.get(n.source_index),
            n.inputs.first().and_then(|i| shapes.get(i.as_str())),
        ) else {
            continue;
        };
        fits(p, x).map_err(|why| format!("node `{}` ({}): {why}", n.name, n.op_type))?;
    }
    Ok(())
}

/// One pool's window against its input's spatial dims (those after N and C).
fn fits(p: &NodeProto, x: &[usize]) -> Result<(), String> {
    let ints = |name: &str| {
        p.attribute
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.ints.clone())
    };
    let same = p
        .attribute
        .iter()
        .any(|a| a.name == "auto_pad" && a.s.starts_with(b"SAME"));
    let (Some(k), false) = (ints("kernel_shape"), same) else {
        return Ok(());
    };
    let spatial = x.get(2..).unwrap_or(&[]);
    if k.len() != spatial.len() {
        return Ok(());
    }
    let r = k.len();
    let pads = ints("pads")
        .filter(|p| p.len() == 2 * r)
        .unwrap_or(vec![0; 2 * r]);
    let dil = ints("dilations")
        .filter(|d| d.len() == r)
        .unwrap_or(vec![1; r]);
    for i in 0..r {
        let span = (k[i] - 1).saturating_mul(dil[i]).saturating_add(1);
        let have = spatial[i] as i64 + pads[i] + pads[i + r];
        if span > have {
            return Err(format!(
                "its kernel spans {span} on spatial axis {i}, but the input has {} there ({have} with pads): ONNX \
                 Runtime refuses it (the output dimension would be negative); check `kernel_shape`, `pads`, \
                 `dilations` and the input size",
                spatial[i]
            ));
        }
    }
    Ok(())
}
