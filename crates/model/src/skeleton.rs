//! A model read without its weights: the bytes are walked at the protobuf wire level, the top graph's initializers
//! are set aside as byte ranges (their names and element types kept), and only the rest is decoded. A derived model
//! that reads a few initializers decodes just those ([`Skeleton::take`]), so a model's weights are never copied
//! whole to build a part of it. Bytes the walk does not expect (groups, a truncated field) are decoded whole
//! instead, with the same result.

use std::collections::HashMap;
use std::ops::Range;

use prost::Message;
use tract_onnx::pb::{ModelProto, TensorProto};

use super::Graph;
use crate::error::{Error, Result};

/// `ModelProto.graph` and `GraphProto.initializer`.
const MODEL_GRAPH: u64 = 7;
const GRAPH_INITIALIZER: u64 = 5;
/// `TensorProto.data_type` and `TensorProto.name`.
const TENSOR_DATA_TYPE: u64 = 2;
const TENSOR_NAME: u64 = 8;
/// Protobuf wire types.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;
const FIXED32: u64 = 5;

/// The model without the top graph's initializers, and where to read each.
pub struct Skeleton {
    /// The model, its top graph without initializers.
    pub proto: ModelProto,
    /// The element type (ONNX code) of each top-graph initializer.
    pub types: HashMap<String, i32>,
    store: Store,
}

enum Store {
    /// Each initializer's encoded `TensorProto`, by name, in the model's bytes.
    Ranges(HashMap<String, Range<usize>>),
    /// The bytes were decoded whole: the initializers themselves.
    Decoded(HashMap<String, TensorProto>),
}

impl Skeleton {
    /// `g`'s model without its weights (decoded whole where the walk meets bytes it does not expect).
    pub fn of(g: &Graph) -> Result<Skeleton> {
        if let Some(s) = walk(&g.bytes).and_then(|(bytes, ranges)| decoded(&bytes, ranges)) {
            return Ok(s);
        }
        let mut proto = super::surgery::decode(g)?;
        let inits = proto
            .graph
            .as_mut()
            .map(|g| std::mem::take(&mut g.initializer))
            .unwrap_or_default();
        let types = inits
            .iter()
            .map(|t| (t.name.clone(), t.data_type))
            .collect();
        let inits = inits.into_iter().map(|t| (t.name.clone(), t)).collect();
        Ok(Skeleton {
            proto,
            types,
            store: Store::Decoded(inits),
        })
    }

    /// The initializer `name` of `g` (the graph this skeleton is of), decoded; `None` when there is none. Each is
    /// handed out once.
    pub fn take(&mut self, g: &Graph, name: &str) -> Option<Result<TensorProto>> {
        match &mut self.store {
            Store::Decoded(m) => m.remove(name).map(Ok),
            Store::Ranges(m) => {
                let r = m.remove(name)?;
                Some(
                    TensorProto::decode(&g.bytes[r]).map_err(|e| Error::MalformedModel {
                        path: g.path.clone(),
                        reason: format!("initializer `{name}`: {e}"),
                    }),
                )
            }
        }
    }
}

/// The skeleton decoded from the walked bytes.
fn decoded(bytes: &[u8], ranges: Vec<(String, i32, Range<usize>)>) -> Option<Skeleton> {
    // The model without its top graph's weights: not a full decode ([`crate::work::Work::Decode`]).
    let proto = ModelProto::decode(bytes).ok()?;
    let types = ranges.iter().map(|(n, t, _)| (n.clone(), *t)).collect();
    let ranges = ranges.into_iter().map(|(n, _, r)| (n, r)).collect();
    Some(Skeleton {
        proto,
        types,
        store: Store::Ranges(ranges),
    })
}

/// One field of an encoded message: its number, wire type, the whole entry's bytes and its payload's (a
/// length-delimited field's contents; a number's bytes).
struct Field {
    number: u64,
    wire: u64,
    entry: Range<usize>,
    payload: Range<usize>,
}

/// The fields of the message encoded in `buf[range]`, in order; `None` at bytes the walk does not read.
fn fields(buf: &[u8], range: Range<usize>) -> Option<Vec<Field>> {
    let mut out = vec![];
    let mut at = range.start;
    while at < range.end {
        let start = at;
        let key = varint(buf, &mut at, range.end)?;
        let (number, wire) = (key >> 3, key & 7);
        let payload = match wire {
            VARINT => {
                let s = at;
                varint(buf, &mut at, range.end)?;
                s..at
            }
            FIXED64 => at..at.checked_add(8)?,
            FIXED32 => at..at.checked_add(4)?,
            LEN => {
                let len = usize::try_from(varint(buf, &mut at, range.end)?).ok()?;
                at..at.checked_add(len)?
            }
            _ => return None,
        };
        if payload.end > range.end {
            return None;
        }
        at = payload.end;
        out.push(Field {
            number,
            wire,
            entry: start..at,
            payload,
        });
    }
    Some(out)
}

fn varint(buf: &[u8], at: &mut usize, end: usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).filter(|_| *at < end)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `bytes` (an encoded `ModelProto`) with the top graph's initializers left out, and each one's name, element
/// type and range in `bytes`.
type Walked = (Vec<u8>, Vec<(String, i32, Range<usize>)>);

fn walk(bytes: &[u8]) -> Option<Walked> {
    let mut out = Vec::new();
    let mut ranges = vec![];
    for f in fields(bytes, 0..bytes.len())? {
        if (f.number, f.wire) != (MODEL_GRAPH, LEN) {
            out.extend_from_slice(&bytes[f.entry]);
            continue;
        }
        let mut graph = Vec::new();
        for g in fields(bytes, f.payload)? {
            match (g.number, g.wire) {
                (GRAPH_INITIALIZER, LEN) => ranges.push(initializer(bytes, g.payload)?),
                _ => graph.extend_from_slice(&bytes[g.entry]),
            }
        }
        put_varint(&mut out, (MODEL_GRAPH << 3) | LEN);
        put_varint(&mut out, graph.len() as u64);
        out.extend_from_slice(&graph);
    }
    Some((out, ranges))
}

/// The name and element type of the `TensorProto` encoded in `bytes[range]`, with the range.
fn initializer(bytes: &[u8], range: Range<usize>) -> Option<(String, i32, Range<usize>)> {
    let (mut name, mut dtype) = (String::new(), 0);
    for f in fields(bytes, range.clone())? {
        match (f.number, f.wire) {
            (TENSOR_NAME, LEN) => name = String::from_utf8(bytes[f.payload].to_vec()).ok()?,
            (TENSOR_DATA_TYPE, VARINT) => {
                let mut at = f.payload.start;
                dtype = varint(bytes, &mut at, f.payload.end)? as i32;
            }
            _ => {}
        }
    }
    Some((name, dtype, range))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::GraphProto;

    fn model(inits: Vec<TensorProto>) -> ModelProto {
        ModelProto {
            ir_version: 8,
            producer_name: "test".into(),
            opset_import: vec![tract_onnx::pb::OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            }],
            graph: Some(GraphProto {
                name: "g".into(),
                initializer: inits,
                node: vec![tract_onnx::pb::NodeProto {
                    op_type: "Add".into(),
                    input: vec!["a".into(), "b".into()],
                    output: vec!["c".into()],
                    ..Default::default()
                }],
                output: vec![crate::surgery::value_info("c", 1, None)],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn tensor(name: &str, dtype: i32, raw: Vec<u8>) -> TensorProto {
        TensorProto {
            name: name.into(),
            data_type: dtype,
            dims: vec![raw.len() as i64 / 4],
            raw_data: raw,
            ..Default::default()
        }
    }

    #[test]
    fn the_skeleton_is_the_model_without_its_initializers() {
        let (a, b) = (tensor("a", 1, vec![1; 4000]), tensor("b", 1, vec![2; 8]));
        let full = model(vec![a.clone(), b.clone()]);
        let bytes = full.encode_to_vec();
        let (walked, _) = walk(&bytes).unwrap();
        let g = crate::import::from_bytes(std::path::Path::new("t.onnx"), bytes).unwrap();
        let mut s = Skeleton::of(&g).unwrap();
        assert!(
            matches!(s.store, Store::Ranges(_)),
            "walked, not decoded whole"
        );
        assert_eq!(s.proto, model(vec![]));
        assert_eq!(s.types, HashMap::from([("a".into(), 1), ("b".into(), 1)]));
        assert_eq!(s.take(&g, "b").unwrap().unwrap(), b);
        assert_eq!(s.take(&g, "a").unwrap().unwrap(), a);
        assert!(
            s.take(&g, "a").is_none(),
            "each initializer is handed out once"
        );
        assert!(
            walked.len() < 200,
            "the weights are not in the skeleton's bytes"
        );
    }

    #[test]
    fn bytes_the_walk_does_not_read_are_refused() {
        let bytes = model(vec![tensor("a", 1, vec![1; 40])]).encode_to_vec();
        assert!(walk(&bytes[..bytes.len() - 3]).is_none(), "truncated");
        assert!(walk(&[0x0b, 0x0c]).is_none(), "a group");
        assert!(walk(&[0x80; 11]).is_none(), "a varint past 64 bits");
    }

    /// Every model of this repository that imports (tests/data, models): its skeleton and each initializer taken
    /// are its full decode, field for field.
    #[test]
    fn the_repositorys_models_walk_to_their_full_decode() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut stack = vec![repo.join("tests/data"), repo.join("models")];
        let mut walked = 0;
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let Some(g) = (p.extension().is_some_and(|x| x == "onnx"))
                    .then(|| crate::import::load(&p).ok())
                    .flatten()
                else {
                    continue;
                };
                let mut full = super::super::surgery::decode(&g).unwrap();
                let mut s = Skeleton::of(&g).unwrap();
                walked += matches!(s.store, Store::Ranges(_)) as usize;
                let inits = std::mem::take(&mut full.graph.as_mut().unwrap().initializer);
                // Compared encoded: a NaN attribute is not equal to itself.
                let same = s.proto.encode_to_vec() == full.encode_to_vec();
                assert!(same, "{}", p.display());
                for t in inits {
                    assert_eq!(s.types[&t.name], t.data_type, "{}", p.display());
                    assert_eq!(s.take(&g, &t.name).unwrap().unwrap(), t, "{}", p.display());
                }
            }
        }
        assert!(walked > 500, "{walked} models walked");
    }
}
