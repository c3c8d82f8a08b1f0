//! Index flips from rounding to integers: a `Floor`, `Ceil`, `Round` or float-to-integer `Cast` whose float input,
//! stored in the target's precision, crosses an integer (or, for `Round`, half-integer) boundary. The integers it
//! makes are often indices (Gather, Slice, Resize sizes), so one flipped value moves whole rows downstream. A
//! `Cast` of an already-integral value (`Floor` then `Cast`) is traced back to the rounding node that made it.

use ndarray::ArrayD;

use ndarray::Axis;

use super::causes::{cause, limits, num, spacing, Evidence, Site};
use crate::report::model::Cause;
use crate::report::model::Culprit;
use crate::tensor::DType;

/// Ops whose integer inputs select elements.
const INDEXING: &[&str] = &[
    "Gather",
    "GatherElements",
    "GatherND",
    "Slice",
    "Resize",
    "ScatterElements",
    "ScatterND",
    "OneHot",
    "Expand",
    "Reshape",
    "Tile",
    "Range",
];

/// The rounding node behind node `i` and its op: `i` itself, or the Floor/Ceil/Round feeding a float-to-int Cast.
fn rounding_node(ev: &Evidence, i: usize) -> Option<(usize, &'static str)> {
    let node = &ev.graph.nodes[i];
    let kind = |op: &str| match op {
        "Floor" => Some("floor"),
        "Ceil" => Some("ceil"),
        "Round" => Some("round"),
        _ => None,
    };
    if let Some(k) = kind(&node.op_type) {
        return Some((i, k));
    }
    if node.op_type != "Cast" {
        return None;
    }
    let to = DType::from_onnx(ev.attr_i(i, "to")? as i32);
    if to.is_float() {
        return None;
    }
    match ev.producer(node.inputs.first()?) {
        Some(p) if kind(&ev.graph.nodes[p].op_type).is_some() => {
            Some((p, kind(&ev.graph.nodes[p].op_type)?))
        }
        _ => Some((i, "truncate")),
    }
}

/// Distance from `v` to the nearest value where `kind` rounding changes its result.
fn to_boundary(v: f64, kind: &str) -> f64 {
    match kind {
        "round" => (v - v.floor() - 0.5).abs(),
        _ => (v - v.round()).abs(),
    }
}

/// The cause, when culprit node `i` rounds values that sit within one target spacing of a rounding boundary.
pub fn rounding_to_integers(ev: &Evidence, i: usize) -> Option<Cause> {
    let (r, kind) = rounding_node(ev, i)?;
    let input = ev.graph.nodes[r].inputs.first()?.clone();
    let x: ArrayD<f64> = ev.value(&input)?;
    let l = limits(ev.dtype(&input));
    let mut near = 0usize;
    let mut closest = f64::INFINITY;
    let mut n = 0usize;
    for &v in x.iter().filter(|v| v.is_finite()) {
        n += 1;
        let m = to_boundary(v, kind) / spacing(v.abs(), l);
        closest = closest.min(m);
        if m <= 1.0 {
            near += 1;
        }
    }
    if near == 0 {
        return None;
    }
    let out = ev.graph.nodes[i].outputs.first()?.clone();
    let users: Vec<String> = ev
        .graph
        .nodes
        .iter()
        .filter(|m| m.inputs.contains(&out) && INDEXING.contains(&m.op_type.as_str()))
        .map(|m| m.name.clone())
        .collect();
    let feeds = match users.is_empty() {
        true => String::new(),
        false => format!(
            "; they feed {} as indices/sizes",
            users
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let rounder = &ev.graph.nodes[r].name;
    let mut c = cause(
        "index_flip",
        format!(
            "`{rounder}` rounds `{input}` to integers ({kind}), and {near} of {n} of its f64 values lie within one {} \
             spacing of a rounding boundary (closest {} spacings): rounding them to {} can carry them across, so the \
             integer moves by one{feeds}",
            l.name,
            num(closest),
            l.name
        ),
        &[("near_boundary", near as f64), ("values", n as f64), ("closest_in_spacings", closest)],
        if near * 100 >= n { "high" } else { "medium" },
        format!("compute the index arithmetic in fp32 (--keep-fp32 {rounder} and its producers) or in integers"),
    );
    c.nodes = std::iter::once(rounder.clone()).chain(users).collect();
    Some(c)
}

/// Index flips: rounding to integers that feed indices, and ArgMax/ArgMin/TopK whose top two candidates are
/// within a spacing or two.
pub(super) fn explain(_c: &Culprit, ev: &Evidence, s: &Site, out: &mut Vec<Cause>) {
    let (i, node, op) = (s.i, s.node, s.op);
    // Index flips.
    if let Some(f) = rounding_to_integers(ev, i) {
        out.push(f);
    }
    if matches!(op, "ArgMax" | "ArgMin" | "TopK") {
        let li = limits(ev.dtype(&node.inputs[0]));
        if let Some(x) = node.inputs.first().and_then(|n| ev.value(n)) {
            let axis = ev
                .attr_i(i, "axis")
                .unwrap_or(if op == "TopK" { -1 } else { 0 });
            let ax = if axis < 0 {
                x.ndim() as i64 + axis
            } else {
                axis
            } as usize;
            if ax < x.ndim() {
                let margin = x
                    .lanes(Axis(ax))
                    .into_iter()
                    .map(|lane| {
                        let mut v: Vec<f64> =
                            lane.iter().copied().filter(|v| v.is_finite()).collect();
                        v.sort_by(|a, b| b.total_cmp(a));
                        if op == "ArgMin" {
                            v.reverse();
                        }
                        if v.len() < 2 {
                            f64::INFINITY
                        } else {
                            (v[0] - v[1]).abs() / spacing(v[0].abs(), li)
                        }
                    })
                    .fold(f64::INFINITY, f64::min);
                if margin < 2.0 {
                    out.push(cause(
                        "index_flip",
                        format!(
                            "the top two candidates differ by only {} {} spacing(s) in f64: rounding decides which wins",
                            num(margin), li.name
                        ),
                        &[("margin_in_spacings", margin)],
                        "high",
                        "compare the scores in fp32, or accept ties as equivalent".into(),
                    ));
                }
            }
        }
    }
}
