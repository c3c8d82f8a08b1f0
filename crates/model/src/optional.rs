//! ONNX optional values (`optional(tensor(T))`, opset 15 on), and the element types of sequence inputs and
//! outputs. tract's protobuf types know tensor types only and drop an optional or sequence type when they decode a
//! model, so the optional types of the main graph's inputs, outputs and value_info, and the sequence types of its
//! inputs and outputs, are read here from the model's bytes, with a few messages of phantom's own
//! ([`tensor_types`], [`sequence_types`]). phantom holds an optional that has a value as that tensor; an empty
//! optional it cannot hold yet, and says so. The ONNX backend suite writes an optional input of a test_data_set as
//! an `OptionalProto` ([`held`]) and a sequence input as a `SequenceProto` ([`sequence_of`]).

use std::collections::HashMap;

use prost::Message;
use tract_onnx::pb::{type_proto, TensorProto};

/// `ModelProto` down to the types of its main graph's values, optional types included.
#[derive(Clone, PartialEq, prost::Message)]
struct ModelTypes {
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphTypes>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GraphTypes {
    #[prost(message, repeated, tag = "11")]
    input: Vec<ValueType>,
    #[prost(message, repeated, tag = "12")]
    output: Vec<ValueType>,
    #[prost(message, repeated, tag = "13")]
    value_info: Vec<ValueType>,
}

/// `ValueInfoProto` with the `sequence_type` and `optional_type` of its `TypeProto` (the other types are not read).
#[derive(Clone, PartialEq, prost::Message)]
struct ValueType {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    r#type: Option<OptionalOf>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct OptionalOf {
    #[prost(message, optional, tag = "4")]
    sequence_type: Option<OptionalType>,
    #[prost(message, optional, tag = "9")]
    optional_type: Option<OptionalType>,
}

/// `TypeProto.Optional` and `TypeProto.Sequence`, which share their one field.
#[derive(Clone, PartialEq, prost::Message)]
struct OptionalType {
    #[prost(message, optional, tag = "1")]
    elem_type: Option<ElemType>,
}

/// The `TypeProto` of an optional's or a sequence's element, down to a tensor type and a sequence type (a map's
/// reads as neither).
#[derive(Clone, PartialEq, prost::Message)]
struct ElemType {
    #[prost(message, optional, tag = "1")]
    tensor_type: Option<type_proto::Tensor>,
    #[prost(message, optional, boxed, tag = "4")]
    sequence_type: Option<Box<OptionalType>>,
}

impl OptionalType {
    /// The element type of this sequence when it is a sequence of tensors: the tensor type, or the default (element
    /// type code 0) when none is declared; `None` for a sequence of maps or of sequences.
    fn tensors(&self) -> Option<type_proto::Tensor> {
        match &self.elem_type {
            None => Some(type_proto::Tensor::default()),
            Some(ElemType {
                tensor_type: Some(t),
                ..
            }) => Some(t.clone()),
            Some(_) => None,
        }
    }
}

/// The tensor type of every main-graph value (input, output, value_info) the model declares `optional(tensor)`,
/// by name; empty when the model declares none (or cannot be read this way, which import has already said).
pub fn tensor_types(model: &[u8]) -> HashMap<String, type_proto::Tensor> {
    let Some(g) = ModelTypes::decode(model).ok().and_then(|m| m.graph) else {
        return HashMap::new();
    };
    (g.input.into_iter().chain(g.output).chain(g.value_info))
        .filter_map(|v| {
            let t = v.r#type?.optional_type?.elem_type?.tensor_type?;
            Some((v.name, t))
        })
        .collect()
}

/// The main graph's inputs and outputs `source` declares optional or sequence, with their types.
fn typed_io(source: &[u8]) -> (Vec<ValueType>, Vec<ValueType>) {
    let Some(g) = ModelTypes::decode(source).ok().and_then(|m| m.graph) else {
        return (vec![], vec![]);
    };
    let typed = |v: &ValueType| {
        v.r#type
            .as_ref()
            .is_some_and(|t| t.optional_type.is_some() || t.sequence_type.is_some())
    };
    (
        g.input.into_iter().filter(typed).collect(),
        g.output.into_iter().filter(typed).collect(),
    )
}

/// Declares, in `model`'s main graph, the tensor type of each `OptionalGetElement` output that unwraps an input
/// `source` declares `optional(tensor)`: a pass that rewrites tensor types (a precision conversion) then knows what
/// the unwrapped value is.
pub fn declare_unwrapped(model: &mut tract_onnx::pb::ModelProto, source: &[u8]) {
    let optional = tensor_types(source);
    let Some(g) = model.graph.as_mut() else {
        return;
    };
    let unwrapped: Vec<(String, type_proto::Tensor)> = (g.node.iter())
        .filter(|n| n.op_type == "OptionalGetElement")
        .filter_map(|n| {
            Some((
                n.output.first()?.clone(),
                optional.get(n.input.first()?)?.clone(),
            ))
        })
        .collect();
    for (name, t) in unwrapped {
        if g.value_info.iter().any(|v| v.name == name) {
            continue;
        }
        g.value_info
            .push(super::surgery::value_info(&name, t.elem_type, None));
    }
}

/// `bytes` (a model phantom derived from `source` and encoded with tract's protobuf types) with the optional and
/// sequence types `source` declares on its main graph's inputs and outputs put back: an optional whose tensor type
/// the derived model states is that tensor's optional, any other keeps the type `source` declares. Those inputs and outputs are written again, with their types, after the rest (protobuf
/// merges a repeated field written twice; ONNX Runtime binds inputs by name). `None` where `source` declares no such
/// type (or `bytes` do not decode): the bytes need nothing put back.
pub fn restore(bytes: &[u8], source: &[u8]) -> Option<Vec<u8>> {
    let (inputs, outputs) = typed_io(source);
    if inputs.is_empty() && outputs.is_empty() {
        return None;
    }
    let mut model = crate::import::decode(bytes).ok()?;
    let graph = model.graph.as_mut()?;
    let extra = GraphTypes {
        input: retyped(&mut graph.input, &inputs),
        output: retyped(&mut graph.output, &outputs),
        value_info: vec![],
    };
    let mut out = model.encode_to_vec();
    out.extend(ModelTypes { graph: Some(extra) }.encode_to_vec());
    Some(out)
}

/// Takes the values of `of` out of `values`, typed as [`restore`] says.
fn retyped(values: &mut Vec<tract_onnx::pb::ValueInfoProto>, of: &[ValueType]) -> Vec<ValueType> {
    let mut out = vec![];
    values.retain(|v| {
        let Some(source) = of.iter().find(|o| o.name == v.name) else {
            return true;
        };
        let mut typed = source.clone();
        let tensor = v.r#type.as_ref().and_then(|t| match &t.value {
            Some(type_proto::Value::TensorType(t)) => Some(t.clone()),
            _ => None,
        });
        if let (Some(t), Some(opt)) = (
            tensor,
            typed.r#type.as_mut().and_then(|t| t.optional_type.as_mut()),
        ) {
            opt.elem_type = Some(ElemType {
                tensor_type: Some(t),
                sequence_type: None,
            });
        }
        out.push(typed);
        false
    });
    out
}

/// The element type of every main-graph input and output the model declares `seq(tensor)` or
/// `optional(seq(tensor))`, by name (an element type of code 0 when the model does not declare one; a sequence of
/// maps or of sequences is not listed); empty when there is none. phantom holds an optional sequence that has a
/// value as that sequence.
pub fn sequence_types(model: &[u8]) -> HashMap<String, type_proto::Tensor> {
    let Some(g) = ModelTypes::decode(model).ok().and_then(|m| m.graph) else {
        return HashMap::new();
    };
    (g.input.into_iter().chain(g.output))
        .filter_map(|v| {
            let ty = v.r#type?;
            let seq = match ty.sequence_type {
                Some(s) => s,
                None => *ty.optional_type?.elem_type?.sequence_type?,
            };
            Some((v.name, seq.tensors()?))
        })
        .collect()
}

/// ONNX's `SequenceProto` of tensors.
#[derive(Clone, PartialEq, prost::Message)]
struct SequenceProto {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, repeated, tag = "3")]
    tensor_values: Vec<TensorProto>,
    #[prost(bytes = "vec", repeated, tag = "4")]
    sparse_tensor_values: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "5")]
    sequence_values: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    map_values: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "7")]
    optional_values: Vec<Vec<u8>>,
}

/// The tensors a serialized `SequenceProto` holds, or why phantom cannot pass it.
pub fn sequence_of(bytes: &[u8]) -> Result<Vec<TensorProto>, String> {
    let s =
        SequenceProto::decode(bytes).map_err(|e| format!("not a serialized SequenceProto: {e}"))?;
    if !(s.sparse_tensor_values.is_empty()
        && s.sequence_values.is_empty()
        && s.map_values.is_empty()
        && s.optional_values.is_empty())
    {
        return Err(
            "it holds a sequence of sequences, maps, optionals or sparse tensors: phantom passes \
                    sequences of tensors only"
                .into(),
        );
    }
    Ok(s.tensor_values)
}

/// ONNX's `OptionalProto`; the values other than a tensor are only told apart.
#[derive(Clone, PartialEq, prost::Message)]
struct OptionalProto {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(int32, tag = "2")]
    elem_type: i32,
    #[prost(message, optional, tag = "3")]
    tensor_value: Option<TensorProto>,
    #[prost(bytes = "vec", optional, tag = "4")]
    sparse_tensor_value: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "5")]
    sequence_value: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "6")]
    map_value: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "7")]
    optional_value: Option<Vec<u8>>,
}

/// `OptionalProto.DataType`: TENSOR.
const TENSOR: i32 = 1;

/// What a serialized `OptionalProto` holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// A tensor (named by the optional when it has no name of its own).
    Tensor(Box<TensorProto>),
    /// No value: an empty optional, named.
    Empty(String),
    /// A value phantom cannot hold (a sequence, a map, a sparse tensor, a nested optional), named, and its kind.
    Other(String, &'static str),
}

impl Held {
    /// The tensor held, or why phantom cannot pass this value as an input.
    pub fn into_tensor(self) -> Result<TensorProto, String> {
        let named = |name: &str| match name {
            "" => String::new(),
            n => format!(" `{n}`"),
        };
        match self {
            Held::Tensor(t) => Ok(*t),
            Held::Empty(name) => Err(format!(
                "it holds an empty optional{} (an OptionalProto with no value): phantom cannot pass an empty \
                 optional yet; give the input a tensor",
                named(&name)
            )),
            Held::Other(name, kind) => Err(format!(
                "it holds an optional{} of a {kind}: phantom passes optional tensors only",
                named(&name)
            )),
        }
    }
}

/// What `bytes` hold read as an `OptionalProto`, or `None` when they do not read as one. A `TensorProto` reads as
/// one too (their fields overlap: its dims are the optional's name, its element type the optional's kind), so a
/// caller asks only of bytes that are no plain tensor ([`super::proto::read_tensor_pb`]).
pub fn held(bytes: &[u8]) -> Option<Held> {
    let o = OptionalProto::decode(bytes).ok()?;
    if !(1..=5).contains(&o.elem_type) {
        return None;
    }
    if let Some(mut t) = o.tensor_value.filter(|_| o.elem_type == TENSOR) {
        if t.name.is_empty() {
            t.name = o.name;
        }
        return Some(Held::Tensor(Box::new(t)));
    }
    let kind = [
        (o.sparse_tensor_value.is_some(), "sparse tensor"),
        (o.sequence_value.is_some(), "sequence"),
        (o.map_value.is_some(), "map"),
        (o.optional_value.is_some(), "optional"),
    ]
    .into_iter()
    .find_map(|(has, kind)| has.then_some(kind));
    Some(match kind {
        Some(kind) => Held::Other(o.name, kind),
        None => Held::Empty(o.name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats() -> TensorProto {
        TensorProto {
            name: "x".into(),
            data_type: 1,
            dims: vec![2],
            float_data: vec![1.0, 2.0],
            ..Default::default()
        }
    }

    #[test]
    fn an_optional_tensor_is_its_tensor() {
        let o = OptionalProto {
            name: "x".into(),
            elem_type: TENSOR,
            tensor_value: Some(TensorProto {
                name: String::new(),
                ..floats()
            }),
            ..Default::default()
        };
        assert_eq!(
            held(&o.encode_to_vec()),
            Some(Held::Tensor(Box::new(floats())))
        );
    }

    #[test]
    fn an_empty_optional_is_refused_by_name() {
        let o = OptionalProto {
            name: "x".into(),
            elem_type: TENSOR,
            ..Default::default()
        };
        let h = held(&o.encode_to_vec()).unwrap();
        assert_eq!(h, Held::Empty("x".into()));
        assert!(h.into_tensor().unwrap_err().contains("empty optional `x`"));
    }

    #[test]
    fn a_tensor_proto_is_no_optional_tensor() {
        let h = held(&floats().encode_to_vec());
        assert!(!matches!(h, Some(Held::Tensor(_))), "{h:?}");
    }

    #[test]
    fn optional_tensor_types_are_read_from_the_model_bytes() {
        let tensor = type_proto::Tensor {
            elem_type: 1,
            shape: None,
        };
        let model = ModelTypes {
            graph: Some(GraphTypes {
                input: vec![ValueType {
                    name: "x".into(),
                    r#type: Some(OptionalOf {
                        sequence_type: None,
                        optional_type: Some(OptionalType {
                            elem_type: Some(ElemType {
                                tensor_type: Some(tensor.clone()),
                                sequence_type: None,
                            }),
                        }),
                    }),
                }],
                ..Default::default()
            }),
        };
        let types = tensor_types(&model.encode_to_vec());
        assert_eq!(types.get("x"), Some(&tensor));
        // tract's own types read no type at all there.
        let m = tract_onnx::pb::ModelProto::decode(model.encode_to_vec().as_slice()).unwrap();
        assert!(m.graph.unwrap().input[0]
            .r#type
            .as_ref()
            .unwrap()
            .value
            .is_none());
    }

    #[test]
    fn an_optional_sequence_is_read_as_its_sequence() {
        let tensor = type_proto::Tensor {
            elem_type: 6,
            shape: None,
        };
        let seq = |elem_type| {
            Some(Box::new(OptionalType {
                elem_type: Some(elem_type),
            }))
        };
        let of = |name: &str, elem: ElemType| ValueType {
            name: name.into(),
            r#type: Some(OptionalOf {
                sequence_type: None,
                optional_type: Some(OptionalType {
                    elem_type: Some(ElemType {
                        tensor_type: None,
                        sequence_type: seq(elem),
                    }),
                }),
            }),
        };
        let tensors = ElemType {
            tensor_type: Some(tensor.clone()),
            sequence_type: None,
        };
        let nested = ElemType {
            tensor_type: None,
            sequence_type: seq(tensors.clone()),
        };
        let model = ModelTypes {
            graph: Some(GraphTypes {
                input: vec![of("s", tensors), of("nested", nested)],
                ..Default::default()
            }),
        };
        let types = sequence_types(&model.encode_to_vec());
        assert_eq!(types.get("s"), Some(&tensor));
        assert!(!types.contains_key("nested"), "{types:?}");
        assert!(tensor_types(&model.encode_to_vec()).is_empty());
    }
}
