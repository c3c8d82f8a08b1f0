//! `LabelEncoder` (`ai.onnx.ml` opsets 2 and 4: a lookup from keys to values, ints, floats or strings) for the
//! reference: tract has none. A key that is no key takes the default (`default_*`, or `default_tensor`). Float keys
//! are matched as ONNX Runtime matches them, on the float32 value the model stores: an f64 input is rounded to
//! float32 before the lookup (an exact-match lookup has no f64 meaning of its own), and NaN matches a NaN key.
//! Float values come out in f64; ints and strings in their own type.

use tract_onnx::pb::AttributeProto;
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, opt};

pub(super) const TABLE: &[Row] = &[Row::new("LabelEncoder", &LabelEncoder)];

/// One side of the map (keys or values), or a default, as the attributes give it.
#[derive(Clone, Debug, PartialEq)]
enum Items {
    Ints(Vec<i64>),
    Floats(Vec<f64>),
    Strings(Vec<String>),
}

fn attr<'a>(n: &'a Node, name: &str) -> Option<&'a AttributeProto> {
    n.proto.attribute.iter().find(|a| a.name == name)
}

/// `{side}_int64s`, `_floats`, `_strings` or `_tensor`, whichever the node has.
fn items(n: &Node, side: &str) -> TractResult<Option<Items>> {
    if let Some(a) = attr(n, &format!("{side}_int64s")) {
        return Ok(Some(Items::Ints(a.ints.clone())));
    }
    if let Some(a) = attr(n, &format!("{side}_floats")) {
        return Ok(Some(Items::Floats(
            a.floats.iter().map(|&f| f as f64).collect(),
        )));
    }
    if let Some(a) = attr(n, &format!("{side}_strings")) {
        let s = a
            .strings
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned());
        return Ok(Some(Items::Strings(s.collect())));
    }
    let Some(t) = attr(n, &format!("{side}_tensor")).and_then(|a| a.t.as_ref()) else {
        return Ok(None);
    };
    if t.data_type == 8 {
        let s = t
            .string_data
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned());
        return Ok(Some(Items::Strings(s.collect())));
    }
    let host = crate::model::proto::tensor_from_proto(t, None)
        .map_err(|e| anyhow::anyhow!("{}: {side}_tensor: {e}", n.proto.name))?;
    Ok(Some(match host.dtype().is_float() {
        true => Items::Floats(host.to_f64_array().iter().copied().collect()),
        false => Items::Ints(host.to_f64_array().iter().map(|&v| v as i64).collect()),
    }))
}

/// The default for a value type (`default_*` or `default_tensor`, else ONNX's: -1, -0.0, "_Unused").
fn default(n: &Node, values: &Items) -> TractResult<Items> {
    Ok(match (values, items(n, "default")?) {
        (_, Some(d)) => d,
        (Items::Ints(_), None) => Items::Ints(vec![attr(n, "default_int64").map_or(-1, |a| a.i)]),
        (Items::Floats(_), None) => {
            Items::Floats(vec![attr(n, "default_float").map_or(-0.0, |a| a.f as f64)])
        }
        (Items::Strings(_), None) => Items::Strings(vec![attr(n, "default_string")
            .map_or("_Unused".into(), |a| {
                String::from_utf8_lossy(&a.s).into_owned()
            })]),
    })
}

/// Keys, values and default of `n`.
fn map(n: &Node) -> TractResult<(Items, Items, Items)> {
    let bad = |what: &str| anyhow::anyhow!("LabelEncoder `{}`: {what}", n.proto.name);
    let keys =
        items(n, "keys")?.ok_or_else(|| bad("no keys (opset 1's classes_strings is not read)"))?;
    let values = items(n, "values")?.ok_or_else(|| bad("no values"))?;
    let len = |i: &Items| match i {
        Items::Ints(v) => v.len(),
        Items::Floats(v) => v.len(),
        Items::Strings(v) => v.len(),
    };
    anyhow::ensure!(
        len(&keys) == len(&values),
        bad("keys and values differ in length")
    );
    let d = default(n, &values)?;
    Ok((keys, values, d))
}

/// The position of each input element among the keys (None: not a key).
fn positions(n: &Node, x: &Tensor, keys: &Items) -> TractResult<Vec<Option<usize>>> {
    Ok(match keys {
        Items::Strings(k) => (x.to_plain_array_view::<String>()?.iter())
            .map(|s| k.iter().position(|key| key == s))
            .collect(),
        Items::Ints(k) => (x.cast_to::<i64>()?.to_plain_array_view::<i64>()?.iter())
            .map(|v| k.iter().position(|key| key == v))
            .collect(),
        Items::Floats(k) => (x.cast_to::<f64>()?.to_plain_array_view::<f64>()?.iter())
            .map(|&v| {
                let v = v as f32 as f64;
                k.iter()
                    .position(|&key| key == v || (key.is_nan() && v.is_nan()))
            })
            .collect(),
    })
    .map_err(|e: anyhow::Error| anyhow::anyhow!("LabelEncoder `{}`: {e}", n.proto.name))
}

struct LabelEncoder;

impl Kernel for LabelEncoder {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (_, shape) = fact(n, ins, 0)?;
        let dt = match map(n)?.1 {
            Items::Ints(_) => i64::datum_type(),
            Items::Floats(_) => f64::datum_type(),
            Items::Strings(_) => String::datum_type(),
        };
        Ok(vec![(dt, shape.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let (keys, values, d) = map(n)?;
        let at = positions(n, x, &keys)?;
        let shape = x.shape().to_vec();
        let out = match (values, d) {
            (Items::Ints(v), Items::Ints(d)) => {
                let o: Vec<i64> = at.iter().map(|p| p.map_or(d[0], |k| v[k])).collect();
                tract_ndarray::ArrayD::from_shape_vec(shape, o)?.into_tensor()
            }
            (Items::Floats(v), Items::Floats(d)) => {
                let o: Vec<f64> = at.iter().map(|p| p.map_or(d[0], |k| v[k])).collect();
                tract_ndarray::ArrayD::from_shape_vec(shape, o)?.into_tensor()
            }
            (Items::Strings(v), Items::Strings(d)) => {
                let o: Vec<String> = (at.iter())
                    .map(|p| p.map_or(d[0].clone(), |k| v[k].clone()))
                    .collect();
                tract_ndarray::ArrayD::from_shape_vec(shape, o)?.into_tensor()
            }
            _ => anyhow::bail!(
                "LabelEncoder `{}`: its default is not of its values' type",
                n.proto.name
            ),
        };
        Ok(vec![out])
    }
}
