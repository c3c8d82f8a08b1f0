//! Sizes the model states itself, before any guess from a dim's name ([`super::dims::choose`]): an image input's
//! channels from the weight of the convolution that reads it; its height and width from the
//! `preprocessor_config.json` Hugging Face exports put beside the model, else from a vision transformer's patch grid
//! (a patch-embedding convolution whose kernel is its stride, and a position table of one row per patch, with or
//! without a class token); a sequence's length bounded by a text model's position table (CLIP's 77 rows); a KV
//! cache's head count and size from onnxruntime-genai's `genai_config.json` ([`super::dims_genai`]).

use std::collections::HashMap;
use std::path::Path;

use prost::Message;
use tract_onnx::pb::NodeProto;

use super::dims::Chosen;
use super::{Dim, Graph, ValueInfo};

/// Ops an image may pass through before its first convolution (casts and per-channel normalization).
const PREPARING: [&str; 7] = ["Cast", "Identity", "Sub", "Div", "Mul", "Add", "Clip"];

/// What the model states about its inputs' sizes.
#[derive(Clone, Debug, Default)]
pub struct FromModel {
    /// (input, axis) → the size the model states and where.
    pub by_axis: HashMap<(String, usize), Chosen>,
    /// Inputs a convolution reads as NCHW images: their (height, width) axes.
    pub spatial: HashMap<String, (usize, usize)>,
    /// The rows of the text position table, which bound a sequence's length, and where that comes from.
    pub max_len: Option<(usize, String)>,
}

#[derive(Clone, PartialEq, Message)]
struct NodesOnly {
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphNodes>,
}

#[derive(Clone, PartialEq, Message)]
struct GraphNodes {
    #[prost(message, repeated, tag = "1")]
    node: Vec<NodeProto>,
}

impl FromModel {
    /// Reads `graph`'s convolutions, position tables and the files beside it.
    pub fn of(graph: &Graph) -> FromModel {
        let protos = NodesOnly::decode(graph.bytes.as_slice()).unwrap_or_default();
        let protos: HashMap<&[String], &NodeProto> = (protos.graph.iter())
            .flat_map(|g| g.node.iter())
            .map(|n| (n.output.as_slice(), n))
            .collect();
        let mut m = FromModel {
            max_len: text_positions(graph),
            ..Default::default()
        };
        let preprocessor = graph
            .path
            .parent()
            .and_then(|d| preprocessor_size(&d.join("preprocessor_config.json")));
        for info in graph.inputs.iter().filter(|i| rank4_float(i)) {
            let Some(conv) = first_conv(graph, &info.name) else {
                continue;
            };
            let proto = protos.get(conv.outputs.as_slice()).copied();
            m.image(graph, info, conv, proto, preprocessor.as_ref());
        }
        m.by_axis.extend(super::dims_genai::cache_dims(graph));
        m
    }

    /// What the convolution `conv` reading image `info` says of its channels and, with the preprocessor's size or
    /// a patch grid, of its height and width.
    fn image(
        &mut self,
        graph: &Graph,
        info: &ValueInfo,
        conv: &super::Node,
        proto: Option<&NodeProto>,
        preprocessor: Option<&(usize, usize, String)>,
    ) {
        let Some(w) = conv.inputs.get(1).and_then(|w| graph.initializers.get(w)) else {
            return;
        };
        let [out_c, in_c, kh, kw] = w.dims[..] else {
            return;
        };
        self.spatial.insert(info.name.clone(), (2, 3));
        let group = proto.and_then(|p| int_attr(p, "group")).unwrap_or(1);
        let from = format!("the input channels of Conv `{}`'s weight", conv.name);
        self.set(info, 1, (in_c * group) as usize, from);
        let size = match preprocessor {
            Some((h, w, from)) => Some((*h, *w, from.clone())),
            None => {
                let stride = proto.and_then(|p| ints_attr(p, "strides"));
                let patch = (stride.as_deref() == Some(&[kh, kw])).then_some(kh);
                patch
                    .filter(|&p| p > 1 && kh == kw)
                    .and_then(|p| grid(graph, out_c, p as usize))
            }
        };
        if let Some((h, w, from)) = size {
            self.set(info, 2, h, from.clone());
            self.set(info, 3, w, from);
        }
    }

    /// Records `value` for `axis` of `info` when the model leaves that axis symbolic or unknown.
    fn set(&mut self, info: &ValueInfo, axis: usize, value: usize, from: String) {
        let open = (info.dims.as_ref())
            .and_then(|d| d.get(axis))
            .is_some_and(|d| matches!(d, Dim::Symbolic(_)) || matches!(d, Dim::Fixed(v) if *v < 0));
        if open && value > 0 {
            self.by_axis
                .insert((info.name.clone(), axis), Chosen { value, from });
        }
    }
}

fn rank4_float(info: &ValueInfo) -> bool {
    info.dims.as_ref().is_some_and(|d| d.len() == 4) && info.dtype.is_some_and(|d| d.is_float())
}

/// The convolution that reads `input` as its image, through at most four preparing ops.
fn first_conv<'g>(graph: &'g Graph, input: &str) -> Option<&'g super::Node> {
    let mut value = input.to_string();
    for _ in 0..5 {
        let readers: Vec<&super::Node> = (graph.nodes.iter())
            .filter(|n| n.inputs.iter().any(|i| i == &value))
            .collect();
        if let Some(conv) = readers
            .iter()
            .find(|n| n.op_type == "Conv" && n.inputs.first() == Some(&value))
        {
            return Some(conv);
        }
        let next = readers
            .iter()
            .find(|n| PREPARING.contains(&n.op_type.as_str()) && n.domain.is_empty())?;
        value = next.outputs.first()?.clone();
    }
    None
}

/// The image side a position table of one row per patch (of `dim` columns, `patch` pixels each; one more row for
/// a class token) implies: (height, width, where from).
fn grid(graph: &Graph, dim: i64, patch: usize) -> Option<(usize, usize, String)> {
    let mut tables: Vec<(&String, usize)> = (graph.initializers.iter())
        .filter(|(_, t)| t.dtype.is_float() && t.dims.last() == Some(&dim))
        .filter_map(|(name, t)| match t.dims[..] {
            [1, n, _] | [n, _] => Some((name, n as usize)),
            _ => None,
        })
        .filter(|(_, n)| *n >= 4)
        .collect();
    // Position tables first, then by name: the same choice on every run.
    tables.sort_by_key(|(name, _)| (!name.to_lowercase().contains("pos"), name.to_string()));
    tables.into_iter().find_map(|(name, rows)| {
        let side = [rows, rows - 1].into_iter().find_map(square_root)?;
        let from = format!(
            "the patch grid of position table `{name}` ({side}×{side} patches of {patch} pixels)"
        );
        Some((side * patch, side * patch, from))
    })
}

fn square_root(n: usize) -> Option<usize> {
    let s = (n as f64).sqrt().round() as usize;
    (s >= 2 && s * s == n).then_some(s)
}

/// The rows of a text model's position table (`…position_embedding…`, `wpe`): a 2-D float initializer.
fn text_positions(graph: &Graph) -> Option<(usize, String)> {
    let mut found: Vec<(&String, usize)> = (graph.initializers.iter())
        .filter(|(name, t)| {
            let n = name.to_lowercase();
            let named = (n.contains("position") && n.contains("embed")) || n.contains("wpe");
            named && t.dtype.is_float() && t.dims.len() == 2 && t.dims[0] >= 2
        })
        .map(|(name, t)| (name, t.dims[0] as usize))
        .collect();
    found.sort();
    let (name, rows) = found.into_iter().next()?;
    Some((
        rows,
        format!("bounded by the position table `{name}` ({rows} rows)"),
    ))
}

/// The image size a Hugging Face `preprocessor_config.json` gives: `crop_size` when the processor crops, else
/// `size` (height and width, a shortest edge, or one number).
fn preprocessor_size(path: &Path) -> Option<(usize, usize, String)> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let crops = v.get("do_center_crop").and_then(|c| c.as_bool()) != Some(false);
    let (key, size) = match v.get("crop_size").filter(|_| crops) {
        Some(c) => ("crop_size", c),
        None => ("size", v.get("size")?),
    };
    let n = |x: &serde_json::Value| {
        x.as_u64()
            .filter(|&s| (1..=16384).contains(&s))
            .map(|s| s as usize)
    };
    let (h, w) = match (
        size.get("height"),
        size.get("width"),
        size.get("shortest_edge"),
    ) {
        (Some(h), Some(w), _) => (n(h)?, n(w)?),
        (_, _, Some(s)) => (n(s)?, n(s)?),
        _ => (n(size)?, n(size)?),
    };
    Some((
        h,
        w,
        format!("`{key}` of the preprocessor_config.json beside the model"),
    ))
}

fn int_attr(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

fn ints_attr(n: &NodeProto, name: &str) -> Option<Vec<i64>> {
    n.attribute
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.ints.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_grids_with_and_without_a_class_token() {
        assert_eq!(square_root(196), Some(14));
        assert_eq!(square_root(197), None);
        assert_eq!([197usize, 196].into_iter().find_map(square_root), Some(14));
        assert_eq!(square_root(1), None);
    }

    #[test]
    fn a_preprocessor_config_gives_the_crop_or_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("preprocessor_config.json");
        let cases = [
            (
                r#"{"crop_size": {"height": 224, "width": 224}, "size": {"shortest_edge": 256}}"#,
                224,
            ),
            (
                r#"{"do_center_crop": false, "crop_size": 224, "size": {"height": 384, "width": 384}}"#,
                384,
            ),
            (r#"{"size": {"shortest_edge": 256}}"#, 256),
            (r#"{"crop_size": 518}"#, 518),
        ];
        for (json, side) in cases {
            std::fs::write(&p, json).unwrap();
            let (h, w, _) = preprocessor_size(&p).unwrap();
            assert_eq!((h, w), (side, side), "{json}");
        }
        std::fs::write(&p, "{}").unwrap();
        assert!(preprocessor_size(&p).is_none());
    }
}
