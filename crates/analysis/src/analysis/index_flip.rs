//! Index flips from rounding to integers: a `Floor`, `Ceil`, `Round` or float-to-integer `Cast` whose float input,
//! stored in the target's precision, crosses an integer (or, for `Round`, half-integer) boundary. The integers it
//! makes are often indices (Gather, Slice, Resize sizes), so one flipped value moves whole rows downstream. A
//! `Cast` of an already-integral value (`Floor` then `Cast`) is traced back to the rounding node that made it.

use ndarray::ArrayD;

use ndarray::Axis;

use super::causes::{cause, limits, num, spacing, Evidence, Limits, Site};
use crate::report::model::Culprit;
use crate::report::model::{Cause, CauseKind, Confidence};
use crate::tensor::narrow::round_one;
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
        CauseKind::IndexFlip,
        format!(
            "`{rounder}` rounds `{input}` to integers ({kind}), and {near} of {n} of its f64 values lie within one {} \
             spacing of a rounding boundary (closest {} spacings): rounding them to {} can carry them across, so the \
             integer moves by one{feeds}",
            l.name,
            num(closest),
            l.name
        ),
        &[("near_boundary", near as f64), ("values", n as f64), ("closest_in_spacings", closest)],
        if near * 100 >= n { Confidence::High } else { Confidence::Medium },
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
    if op == "Resize" {
        out.extend(resize_coordinates(ev, i));
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
                        CauseKind::IndexFlip,
                        format!(
                            "the top two candidates differ by only {} {} spacing(s) in f64: rounding decides which wins",
                            num(margin), li.name
                        ),
                        &[("margin_in_spacings", margin)],
                        Confidence::High,
                        "compare the scores in fp32, or accept ties as equivalent".into(),
                    ));
                }
            }
        }
    }
}

/// Source coordinate of output index `x` along an axis of `len_in` → `len_out` at scale `s`.
fn source_coordinate(mode: &str, x: f64, s: f64, len_in: usize, len_out: usize) -> Option<f64> {
    Some(match mode {
        "half_pixel" => (x + 0.5) / s - 0.5,
        "pytorch_half_pixel" if len_out > 1 => (x + 0.5) / s - 0.5,
        "pytorch_half_pixel" => 0.0,
        "asymmetric" => x / s,
        "align_corners" if len_out > 1 => x * (len_in as f64 - 1.0) / (len_out as f64 - 1.0),
        "align_corners" => 0.0,
        _ => return None,
    })
}

/// Nearest source index of coordinate `c` under `nearest_mode`, clamped to the axis.
fn nearest(c: f64, rule: &str, len_in: usize) -> i64 {
    let i = match rule {
        "round_prefer_ceil" => (c + 0.5).floor(),
        "floor" => c.floor(),
        "ceil" => c.ceil(),
        _ => (c - 0.5).ceil(),
    };
    (i as i64).clamp(0, len_in as i64 - 1)
}

/// Resize whose float `scales` the target stores differently from f64 (a computed scale rounded to fp16): the
/// output size changes, or nearest sampling reads a neighbouring source index at some output positions.
fn resize_coordinates(ev: &Evidence, i: usize) -> Option<Cause> {
    let node = &ev.graph.nodes[i];
    let at = if node.inputs.len() >= 3 { 2 } else { 1 };
    let name = node.inputs.get(at).filter(|n| !n.is_empty())?;
    // Initializer scales stay float32 on every target (the converter keeps the slot float32; wgpu reads the host
    // copy): only a scale the graph computes is stored in the low precision.
    ev.producer(name)?;
    let x = ev.value(node.inputs.first()?)?;
    let scales: Vec<f64> = ev.value(name)?.iter().copied().collect();
    if scales.len() != x.ndim() {
        return None;
    }
    let d = ev.dtype(name);
    let how = Sampling::of(ev, i);
    let effects = ScaleEffects::of(&scales, x.shape(), d, &how)?;
    let makers = arithmetic_upstream(ev, name);
    let mut c = scale_cause(name, &scales, limits(d), &how, &effects, &makers)?;
    c.nodes = std::iter::once(node.name.clone()).chain(makers).collect();
    Some(c)
}

/// How a Resize samples: its `mode`, `coordinate_transformation_mode` and `nearest_mode`, defaults filled in.
struct Sampling {
    mode: String,
    coord: String,
    rule: String,
}

impl Sampling {
    /// The sampling of Resize node `i`.
    fn of(ev: &Evidence, i: usize) -> Sampling {
        Sampling {
            mode: ev.attr_s(i, "mode").unwrap_or_else(|| "nearest".into()),
            coord: ev
                .attr_s(i, "coordinate_transformation_mode")
                .unwrap_or_else(|| "half_pixel".into()),
            rule: ev
                .attr_s(i, "nearest_mode")
                .unwrap_or_else(|| "round_prefer_floor".into()),
        }
    }

    /// Output positions, of `len_out` along an axis of `len_in`, where nearest sampling at scale `s` and at scale
    /// `stored` reads different source indices; `None` for an unknown coordinate mode.
    fn flips(&self, s: f64, stored: f64, len_in: usize, len_out: usize) -> Option<usize> {
        let mut here = 0;
        for o in 0..len_out {
            let c = source_coordinate(&self.coord, o as f64, s, len_in, len_out)?;
            let c2 = source_coordinate(&self.coord, o as f64, stored, len_in, len_out)?;
            if nearest(c, &self.rule, len_in) != nearest(c2, &self.rule, len_in) {
                here += 1;
            }
        }
        Some(here)
    }
}

/// What storing the scales in the target type changes.
struct ScaleEffects {
    /// One entry per axis whose output size moves: `axis a: n → m elements`.
    resized: Vec<String>,
    /// Output positions that read another source index, over the axes checked.
    flipped: usize,
    /// Output positions checked.
    positions: usize,
    /// The axis with the most flipped positions: (axis, flipped positions, stored scale).
    worst: Option<(usize, f64, f64)>,
}

impl ScaleEffects {
    /// The effects of storing `scales` (of an input of `shape`) as `d`; `None` for an unknown coordinate mode.
    fn of(scales: &[f64], shape: &[usize], d: DType, how: &Sampling) -> Option<ScaleEffects> {
        let mut fx = ScaleEffects {
            resized: vec![],
            flipped: 0,
            positions: 0,
            worst: None,
        };
        for (a, &s) in scales.iter().enumerate() {
            let stored = round_one(s, d);
            let len_in = shape[a];
            if stored == s || s <= 0.0 || stored <= 0.0 || len_in == 0 {
                continue;
            }
            // Runtimes compute the output size in float32: floor(len · scale).
            let size = |s: f64| (len_in as f32 * s as f32).floor() as f64;
            let (out, out_stored) = (size(s), size(stored));
            if out != out_stored {
                fx.resized
                    .push(format!("axis {a}: {out} → {out_stored} elements"));
                continue;
            }
            let len_out = out as usize;
            if how.mode != "nearest" {
                continue;
            }
            let here = how.flips(s, stored, len_in, len_out)?;
            fx.positions += len_out;
            fx.flipped += here;
            if here > 0 && fx.worst.is_none_or(|w| here as f64 > w.1) {
                fx.worst = Some((a, here as f64, stored));
            }
        }
        Some(fx)
    }
}

/// The cause for scales `name` (stored as `l`, computed by `makers`): output sizes that move, else nearest sampling
/// that flips on the worst axis; `None` when neither happens.
fn scale_cause(
    name: &str,
    scales: &[f64],
    l: Limits,
    how: &Sampling,
    fx: &ScaleEffects,
    makers: &[String],
) -> Option<Cause> {
    let by = match makers.first() {
        Some(p) => format!(" (computed by `{p}`)"),
        None => String::new(),
    };
    let fix = match makers.is_empty() {
        false => format!(
            "compute the scales in fp32 (--keep-fp32 '{}'), or give Resize `sizes` instead of scales",
            makers.join(",")
        ),
        true => "give Resize `sizes` instead of scales".to_string(),
    };
    if !fx.resized.is_empty() {
        return Some(cause(
            CauseKind::IndexFlip,
            format!(
                "`{name}`{by} holds scales {} that {} stores differently, and the output size moves: {}",
                scales.iter().map(|v| num(*v)).collect::<Vec<_>>().join(", "),
                l.name,
                fx.resized.join("; ")
            ),
            &[("axes_resized", fx.resized.len() as f64)],
            Confidence::High,
            fix,
        ));
    }
    let (a, _, stored) = fx.worst?;
    let (coord, rule, flipped, positions) = (&how.coord, &how.rule, fx.flipped, fx.positions);
    Some(cause(
        CauseKind::IndexFlip,
        format!(
            "`{name}`{by} holds scale {} on axis {a}, which {} stores as {}: nearest sampling ({coord}, {rule}) then \
             reads a neighbouring source index at {flipped} of {positions} output positions",
            num(scales[a]),
            l.name,
            num(stored)
        ),
        &[
            ("flipped_positions", flipped as f64),
            ("positions", positions as f64),
            ("scale", scales[a]),
            ("scale_stored", stored),
        ],
        Confidence::High,
        fix,
    ))
}

/// The float arithmetic nodes that compute `value`, nearest first, looking through Concat, Cast and reshaping ops
/// (at most eight nodes back).
fn arithmetic_upstream(ev: &Evidence, value: &str) -> Vec<String> {
    const PASS: &[&str] = &[
        "Concat",
        "Cast",
        "Unsqueeze",
        "Squeeze",
        "Reshape",
        "Identity",
        "Flatten",
    ];
    let mut out = vec![];
    let mut todo = std::collections::VecDeque::from([value.to_string()]);
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = todo.pop_front() {
        let Some(p) = ev.producer(&v) else {
            continue;
        };
        if !seen.insert(p) || seen.len() > 8 {
            continue;
        }
        let n = &ev.graph.nodes[p];
        if matches!(n.op_type.as_str(), "Shape" | "Size" | "Constant") {
            continue;
        }
        if !PASS.contains(&n.op_type.as_str()) {
            out.push(n.name.clone());
        }
        todo.extend(n.inputs.iter().filter(|i| !i.is_empty()).cloned());
    }
    out
}
