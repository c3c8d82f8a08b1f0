//! ONNX's `CenterCropPad` (tract has no kernel for it) and the `Pad` nodes tract cannot build: mode `wrap` (tract
//! knows `constant`, `reflect` and `edge` only), and a `constant_value` or `axes` input the graph computes or reads
//! from a graph input (tract needs both as constants when it translates the node: "Pad constant input must be
//! constant"). Every other Pad stays tract's ([`claimed_pads`]): Pad is in most real models.
//!
//! Both ops only move elements, so they work on any element type (floats are the widened model's f64) by mapping
//! each output coordinate, axis by axis, to an input coordinate or to the fill value. As ONNX's reference
//! (onnx/reference/ops/op_center_crop_pad.py, op_pad.py) computes them:
//! - CenterCropPad crops or zero-pads each listed axis to its `shape` entry, centred; an odd difference puts the
//!   extra element at the end (cropping keeps the earlier half, padding adds more after).
//! - Pad's negative pads crop first, as ONNX Runtime does (numpy's reference refuses them); the positive pads then
//!   extend the cropped axis: `constant` with `constant_value` (0 by default; a one-element tensor of any rank, as
//!   ONNX's own functions write it), `edge` repeats the border element, `reflect` mirrors without repeating it
//!   (periodically where the pad exceeds the axis, as numpy does), `wrap` repeats the axis periodically.

use std::collections::HashSet;

use tract_onnx::pb::GraphProto;
use tract_onnx::prelude::tract_data::dispatch_datum;
use tract_onnx::prelude::tract_ndarray::{ArrayD, IxDyn};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, opt, string, values};

/// CenterCropPad, which tract lacks, in any domain; the Pads tract cannot build are claimed by
/// [`claimed_pads`].
pub(super) const TABLE: &[Row] = &[
    Row::any_domain("CenterCropPad", &CenterCropPad),
    Row::new("Pad", &Pad),
];

/// The `Pad` nodes of `g` phantom takes (by position): mode `wrap`, or a `constant_value`/`axes` input that is
/// neither an initializer nor a `Constant` node's output (tract accepts only those).
pub fn claimed_pads(g: &GraphProto) -> HashSet<usize> {
    let constant: HashSet<&str> = (g.initializer.iter().map(|t| t.name.as_str()))
        .chain(
            (g.node.iter())
                .filter(|n| n.op_type == "Constant")
                .flat_map(|n| n.output.iter().map(|o| o.as_str())),
        )
        .collect();
    let runtime = |name: Option<&String>| {
        name.is_some_and(|s| !s.is_empty() && !constant.contains(s.as_str()))
    };
    (g.node.iter().enumerate())
        .filter(|(_, n)| n.op_type == "Pad" && n.domain.is_empty())
        .filter(|(_, n)| {
            let wrap = (n.attribute.iter()).any(|a| a.name == "mode" && a.s == b"wrap");
            wrap || runtime(n.input.get(2)) || runtime(n.input.get(3))
        })
        .map(|(i, _)| i)
        .collect()
}

/// Where each output coordinate of one axis reads the input (`None`: the fill value).
type AxisMap = Vec<Option<usize>>;

/// The maps that leave an input of `shape` as it is (what the ops start from, axis by axis).
fn unchanged(shape: &[usize]) -> Vec<AxisMap> {
    shape.iter().map(|&d| (0..d).map(Some).collect()).collect()
}

/// The flat input index of every output element (row-major), from the per-axis maps of an input of `shape`.
fn sources(maps: &[AxisMap], shape: &[usize]) -> Vec<Option<usize>> {
    let mut flat = vec![Some(0usize)];
    for (map, &len) in maps.iter().zip(shape) {
        flat = (flat.iter())
            .flat_map(|&p| map.iter().map(move |&m| p.zip(m).map(|(p, m)| p * len + m)))
            .collect();
    }
    flat
}

/// The output of `shape` whose elements are `src`'s at `idx`, or `fill` (a one-element tensor of `src`'s type).
fn gather_t<T: Datum>(
    src: &Tensor,
    idx: &[Option<usize>],
    fill: &Tensor,
    shape: &[usize],
) -> TractResult<Tensor> {
    let view = src.to_plain_array_view::<T>()?;
    let data: Vec<&T> = view.iter().collect();
    let fill = (fill.to_plain_array_view::<T>()?.iter().next().cloned())
        .ok_or_else(|| anyhow::anyhow!("an empty fill value"))?;
    let out = idx
        .iter()
        .map(|i| match i {
            Some(i) => (data.get(*i).map(|&v| v.clone()))
                .ok_or_else(|| anyhow::anyhow!("index {i} out of the input")),
            None => Ok(fill.clone()),
        })
        .collect::<TractResult<Vec<T>>>()?;
    Ok(ArrayD::from_shape_vec(IxDyn(shape), out)?.into_tensor())
}

/// `x` with every axis remapped by `maps`, the fill value where a map gives none.
fn remap(x: &Tensor, maps: &[AxisMap], fill: &Tensor) -> TractResult<Tensor> {
    let shape: Vec<usize> = maps.iter().map(|m| m.len()).collect();
    let idx = sources(maps, x.shape());
    let fill = fill.cast_to_dt(x.datum_type())?;
    dispatch_datum!(gather_t(x.datum_type())(x, &idx, &fill, &shape))
}

/// The zero of type `dt` (the empty string for strings), what both ops pad with by default.
fn zero(dt: DatumType) -> TractResult<Tensor> {
    match dt {
        DatumType::String => Ok(Tensor::from(String::new())),
        _ => Ok(Tensor::from(0i64).cast_to_dt(dt)?.into_owned()),
    }
}

/// The axes an attribute or input lists (negative from the end) as positions in a rank-`rank` input; every axis
/// where none are listed.
fn axes_or_all(n: &Node, listed: Option<Vec<i64>>, rank: usize) -> TractResult<Vec<usize>> {
    let Some(listed) = listed else {
        return Ok((0..rank).collect());
    };
    let r = rank as i64;
    let mut out = vec![];
    for a in listed {
        let at = (-r..r).contains(&a).then(|| a.rem_euclid(r) as usize);
        match at {
            Some(a) if !out.contains(&a) => out.push(a),
            _ => anyhow::bail!(
                "{} `{}`: axis {a} is outside rank {rank} or repeated",
                n.op(),
                n.proto.name
            ),
        }
    }
    Ok(out)
}

/// CenterCropPad's map of an axis of `len` cut or zero-padded to `target`, centred.
fn centred(len: usize, target: usize) -> AxisMap {
    match target <= len {
        true => (0..target).map(|o| Some(o + (len - target) / 2)).collect(),
        false => {
            let start = (target - len) / 2;
            (0..target)
                .map(|o| o.checked_sub(start).filter(|&i| i < len))
                .collect()
        }
    }
}

struct CenterCropPad;

impl CenterCropPad {
    /// The per-axis maps of an input of `shape` cropped or padded to `target` (the `shape` input).
    fn maps(n: &Node, shape: &[usize], target: &Tensor) -> TractResult<Vec<AxisMap>> {
        let target = values::<i64>(target)?;
        let axes = axes_or_all(
            n,
            (!n.ints("axes").is_empty()).then(|| n.ints("axes")),
            shape.len(),
        )?;
        anyhow::ensure!(
            target.len() == axes.len(),
            "CenterCropPad `{}`: shape has {} entries for {} axes",
            n.proto.name,
            target.len(),
            axes.len()
        );
        let mut maps = unchanged(shape);
        for (&a, &t) in axes.iter().zip(&target) {
            anyhow::ensure!(
                t >= 0,
                "CenterCropPad `{}`: negative target extent {t}",
                n.proto.name
            );
            maps[a] = centred(shape[a], t as usize);
        }
        Ok(maps)
    }
}

impl Kernel for CenterCropPad {
    fn value_slots(&self) -> &'static [usize] {
        &[1]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        let target = (values.get(1).copied().flatten()).ok_or_else(|| {
            anyhow::anyhow!(
                "CenterCropPad `{}`: its shape input must be known before the run",
                n.proto.name
            )
        })?;
        let maps = Self::maps(n, shape, target)?;
        Ok(vec![(*dt, maps.iter().map(|m| m.len()).collect())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let maps = Self::maps(n, x.shape(), opt(n, ins, 1)?)?;
        Ok(vec![remap(x, &maps, &zero(x.datum_type())?)?])
    }
}

/// How Pad fills what lies beyond the (cropped) input.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

fn mode(n: &Node) -> TractResult<Mode> {
    Ok(match string(n, "mode", "constant").as_str() {
        "constant" => Mode::Constant,
        "reflect" => Mode::Reflect,
        "edge" => Mode::Edge,
        "wrap" => Mode::Wrap,
        other => anyhow::bail!("Pad `{}`: unknown mode `{other}`", n.proto.name),
    })
}

/// Pad's map of an axis of `len` with `begin`/`end` pads: negative pads crop first, then the positive ones extend
/// what is left by `mode`.
fn padded(len: usize, (begin, end): (i64, i64), mode: Mode) -> Result<AxisMap, String> {
    let start = (-begin).max(0);
    let kept = len as i64 - start - (-end).max(0);
    if kept < 0 {
        return Err(format!(
            "pads ({begin}, {end}) crop more than the axis' {len}"
        ));
    }
    let (before, after) = (begin.max(0), end.max(0));
    if kept == 0 && before + after > 0 && mode != Mode::Constant {
        return Err(format!("cannot pad an empty axis in this mode ({mode:?})"));
    }
    let source = |j: i64| -> Option<i64> {
        match mode {
            _ if (0..kept).contains(&j) => Some(j),
            Mode::Constant => None,
            Mode::Edge => Some(j.clamp(0, kept - 1)),
            Mode::Wrap => Some(j.rem_euclid(kept)),
            Mode::Reflect if kept == 1 => Some(0),
            Mode::Reflect => {
                let m = j.rem_euclid(2 * (kept - 1));
                Some(if m < kept { m } else { 2 * (kept - 1) - m })
            }
        }
    };
    Ok((-before..kept + after)
        .map(|j| source(j).map(|i| (i + start) as usize))
        .collect())
}

struct Pad;

impl Pad {
    /// The per-axis maps of an input of `shape`, from the pads (input 1, or the attribute before opset 11) and the
    /// axes they apply to (input 3, all axes by default).
    fn maps(
        n: &Node,
        shape: &[usize],
        pads: Option<&Tensor>,
        axes: Option<&Tensor>,
    ) -> TractResult<Vec<AxisMap>> {
        let pads = match pads {
            Some(t) => values::<i64>(t)?,
            None => n.ints("pads"),
        };
        let axes = axes_or_all(n, axes.map(values::<i64>).transpose()?, shape.len())?;
        anyhow::ensure!(
            pads.len() == 2 * axes.len(),
            "Pad `{}`: {} pads for {} axes",
            n.proto.name,
            pads.len(),
            axes.len()
        );
        let mode = mode(n)?;
        let mut maps = unchanged(shape);
        for (k, &a) in axes.iter().enumerate() {
            maps[a] = padded(shape[a], (pads[k], pads[k + axes.len()]), mode)
                .map_err(|e| anyhow::anyhow!("Pad `{}` on axis {a}: {e}", n.proto.name))?;
        }
        Ok(maps)
    }

    /// The constant fill: input 2 (one element, any rank), the `value` attribute before opset 11, or zero.
    fn fill(n: &Node, x: &Tensor, given: Option<&Tensor>) -> TractResult<Tensor> {
        let Some(v) = given else {
            let value = n.float("value", 0.0);
            return match value == 0.0 {
                true => zero(x.datum_type()),
                false => Ok(Tensor::from(value)),
            };
        };
        anyhow::ensure!(
            v.len() == 1,
            "Pad `{}`: constant_value has {} elements, not one",
            n.proto.name,
            v.len()
        );
        v.clone().into_shape(&[])
    }
}

impl Kernel for Pad {
    fn value_slots(&self) -> &'static [usize] {
        &[1, 3]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let (dt, shape) = fact(n, ins, 0)?;
        let known = |slot: usize| -> TractResult<Option<&Tensor>> {
            match (
                ins.get(slot).copied().flatten(),
                values.get(slot).copied().flatten(),
            ) {
                (Some(_), None) => {
                    anyhow::bail!(
                        "Pad `{}`: its input {slot} must be known before the run",
                        n.proto.name
                    )
                }
                (_, v) => Ok(v),
            }
        };
        let maps = Self::maps(n, shape, known(1)?, known(3)?)?;
        Ok(vec![(*dt, maps.iter().map(|m| m.len()).collect())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let at = |slot: usize| ins.get(slot).copied().flatten();
        let maps = Self::maps(n, x.shape(), at(1), at(3))?;
        Ok(vec![remap(x, &maps, &Self::fill(n, x, at(2))?)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(m: AxisMap) -> Vec<i64> {
        m.into_iter().map(|i| i.map_or(-1, |i| i as i64)).collect()
    }

    #[test]
    fn centring_puts_the_odd_element_at_the_end() {
        assert_eq!(taken(centred(5, 2)), [1, 2]);
        assert_eq!(taken(centred(4, 1)), [1]);
        assert_eq!(taken(centred(2, 5)), [-1, 0, 1, -1, -1]);
        assert_eq!(taken(centred(3, 3)), [0, 1, 2]);
    }

    #[test]
    fn pad_modes_follow_numpy() {
        // [a b c] padded (2, 3).
        assert_eq!(
            taken(padded(3, (2, 3), Mode::Constant).unwrap()),
            [-1, -1, 0, 1, 2, -1, -1, -1]
        );
        assert_eq!(
            taken(padded(3, (2, 3), Mode::Edge).unwrap()),
            [0, 0, 0, 1, 2, 2, 2, 2]
        );
        assert_eq!(
            taken(padded(3, (2, 3), Mode::Reflect).unwrap()),
            [2, 1, 0, 1, 2, 1, 0, 1]
        );
        assert_eq!(
            taken(padded(3, (2, 3), Mode::Wrap).unwrap()),
            [1, 2, 0, 1, 2, 0, 1, 2]
        );
    }

    #[test]
    fn negative_pads_crop_before_padding() {
        // [a b c d] cropped by one at the start, then wrapped over what is left: b c d b c.
        assert_eq!(
            taken(padded(4, (-1, 2), Mode::Wrap).unwrap()),
            [1, 2, 3, 1, 2]
        );
        assert_eq!(taken(padded(4, (-1, -2), Mode::Constant).unwrap()), [1]);
        assert!(padded(2, (-2, -1), Mode::Constant).is_err());
        assert!(padded(0, (1, 0), Mode::Edge).is_err());
    }

    #[test]
    fn remapping_gathers_row_major_and_fills() {
        let x = Tensor::from_shape(&[2, 2], &[1i32, 2, 3, 4]).unwrap();
        let maps = vec![
            padded(2, (0, 1), Mode::Constant).unwrap(),
            padded(2, (1, 0), Mode::Edge).unwrap(),
        ];
        let y = remap(&x, &maps, &Tensor::from(9i64)).unwrap();
        assert_eq!(y.shape(), &[3, 3]);
        assert_eq!(values::<i32>(&y).unwrap(), [1, 1, 2, 3, 3, 4, 9, 9, 9]);
    }
}
