//! ONNX's optional ops on tensors (`Optional`, `OptionalHasElement`, `OptionalGetElement`), which tract cannot
//! type. The reference holds an optional that has a value as that tensor ([`crate::model::optional`]), so
//! `Optional(x)` and `OptionalGetElement(x)` are `x` itself and `OptionalHasElement(x)` is `true`; an
//! `OptionalHasElement` given no input (none, or an empty name) is `false`, a constant ([`settle`] makes it one
//! before tract parses). An empty optional (`Optional` without an input) the reference cannot hold: its node is
//! refused by name. tract's protobuf types drop an `optional(tensor)` graph input's type, so [`settle`] also gives
//! each such input a stand-in tensor type tract can parse; the reference sets every graph input's element type and
//! shape from the run's input before it types the model, so that stand-in never decides anything.

use tract_onnx::pb::{
    attribute_proto::AttributeType, type_proto, AttributeProto, GraphProto, NodeProto, TensorProto,
    TypeProto,
};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::fact;

/// Claimed in any domain: tract cannot type the optional ops.
pub(super) const TABLE: &[Row] = &[
    Row::any_domain("Optional", &Same),
    Row::any_domain("OptionalHasElement", &Has),
    Row::any_domain("OptionalGetElement", &Same),
];

/// `Optional` and `OptionalGetElement` of a tensor: the tensor.
struct Same;

/// `OptionalHasElement` of a tensor: `true`.
struct Has;

/// The tensor an optional op holds (its only input).
fn held<'a>(n: &Node, ins: &[Option<&'a Tensor>]) -> TractResult<&'a Tensor> {
    ins.first().copied().flatten().ok_or_else(|| empty(n))
}

/// The refusal of an optional op without a value.
fn empty(n: &Node) -> anyhow::Error {
    anyhow::anyhow!(
        "{} `{}` makes or reads an empty optional (no input): phantom's reference cannot hold an empty optional yet",
        n.op(),
        n.proto.name
    )
}

impl Kernel for Same {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        if ins.first().copied().flatten().is_none() {
            return Err(empty(n));
        }
        Ok(vec![fact(n, ins, 0)?.clone()])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        Ok(vec![held(n, ins)?.clone()])
    }
}

impl Kernel for Has {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        fact(n, ins, 0)?;
        Ok(vec![(bool::datum_type(), vec![])])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        held(n, ins)?;
        Ok(vec![tensor0(true)])
    }
}

/// Readies `g`, the main graph, for tract (see the module doc): each graph input whose type tract could not read
/// (an optional's) takes a stand-in tensor type, and each input-less `OptionalHasElement`, here and in subgraphs,
/// becomes the constant `false`.
pub fn settle(g: &mut GraphProto) {
    for i in g.input.iter_mut() {
        if let Some(t @ TypeProto { value: None, .. }) = i.r#type.as_mut() {
            t.value = Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: tract_onnx::pb::tensor_proto::DataType::Float as i32,
                shape: None,
            }));
        }
    }
    constants(g)
}

/// Makes every input-less `OptionalHasElement` of `g` and its subgraphs the constant `false`.
fn constants(g: &mut GraphProto) {
    for n in g.node.iter_mut() {
        for a in n.attribute.iter_mut() {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                constants(sub);
            }
        }
        if has_nothing(n) {
            *n = NodeProto {
                name: std::mem::take(&mut n.name),
                op_type: "Constant".into(),
                output: std::mem::take(&mut n.output),
                attribute: vec![false_value()],
                ..Default::default()
            };
        }
    }
}

/// Whether `n` is an `OptionalHasElement` given no input (none, or an empty name): an empty optional.
fn has_nothing(n: &NodeProto) -> bool {
    n.op_type == "OptionalHasElement" && n.domain.is_empty() && n.input.iter().all(|i| i.is_empty())
}

/// A Constant's `value` attribute: the boolean scalar `false`.
fn false_value() -> AttributeProto {
    AttributeProto {
        name: "value".into(),
        r#type: AttributeType::Tensor as i32,
        t: Some(TensorProto {
            data_type: tract_onnx::pb::tensor_proto::DataType::Bool as i32,
            int32_data: vec![0],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, inputs: &[&str]) -> NodeProto {
        NodeProto {
            name: "n".into(),
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec!["y".into()],
            ..Default::default()
        }
    }

    #[test]
    fn a_held_tensor_is_itself_and_is_there() {
        let x = tensor1(&[1.0f64, -2.0]);
        let get = Node::new(&node("OptionalGetElement", &["x"]));
        let got = Same.eval(&get, &[Some(&x)]).unwrap();
        assert_eq!(got, vec![x.clone()]);
        let has = Node::new(&node("OptionalHasElement", &["x"]));
        assert_eq!(Has.eval(&has, &[Some(&x)]).unwrap(), vec![tensor0(true)]);
        let f = (f64::datum_type(), vec![2]);
        assert_eq!(
            Has.facts(&has, &[Some(&f)]).unwrap(),
            vec![(bool::datum_type(), vec![])]
        );
        assert_eq!(Same.facts(&get, &[Some(&f)]).unwrap(), vec![f]);
    }

    #[test]
    fn an_empty_optional_is_refused_by_name() {
        let n = Node::new(&node("Optional", &[]));
        let e = Same.facts(&n, &[]).unwrap_err().to_string();
        assert!(
            e.contains("Optional `n`") && e.contains("empty optional"),
            "{e}"
        );
    }

    #[test]
    fn an_input_less_has_element_becomes_false() {
        let mut g = GraphProto {
            node: vec![
                node("OptionalHasElement", &[""]),
                node("OptionalHasElement", &[]),
                node("OptionalHasElement", &["x"]),
            ],
            input: vec![tract_onnx::pb::ValueInfoProto {
                name: "x".into(),
                r#type: Some(TypeProto::default()),
                ..Default::default()
            }],
            ..Default::default()
        };
        settle(&mut g);
        for n in &g.node[..2] {
            assert_eq!((n.op_type.as_str(), n.name.as_str()), ("Constant", "n"));
            assert_eq!(n.output, vec!["y".to_string()]);
            let t = n.attribute[0].t.as_ref().unwrap();
            let v = crate::model::proto::tensor_from_proto(t, None).unwrap();
            assert_eq!(v.dtype(), crate::tensor::DType::Bool);
            assert_eq!(v.shape(), &[] as &[usize]);
        }
        assert_eq!(g.node[2].op_type, "OptionalHasElement");
        let typed = g.input[0].r#type.as_ref().unwrap();
        assert!(matches!(
            typed.value,
            Some(type_proto::Value::TensorType(_))
        ));
    }
}
