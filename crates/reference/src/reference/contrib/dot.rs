//! ONNX's `MatMul` of two vectors (numpy's `matmul` of 1-D by 1-D): their dot product, a scalar. tract types every
//! other MatMul but refuses this one (its MatMulInference wants one operand of rank 2 or more), so phantom claims
//! the MatMul nodes whose operands the model declares 1-D ([`claimed_dots`]) and computes them here: floats summed
//! in f64, integers in their own type (wrapping, as ONNX Runtime's integer GEMM does).

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::{type_proto, GraphProto};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row, INVALID};
use super::node::{Fact, Node};
use super::util::{fact, opt, values};

/// The MatMuls of two vectors, which tract refuses, are claimed by [`claimed_dots`].
pub(super) const TABLE: &[Row] = &[Row::new("MatMul", &Dot)];

/// The default-domain MatMul nodes of `g` whose two operands `g` declares of rank 1 (graph inputs, value infos,
/// initializers and Constant outputs), by node index.
pub fn claimed_dots(g: &GraphProto) -> HashSet<usize> {
    let declared = (g.input.iter().chain(&g.value_info)).filter_map(|v| {
        let Some(type_proto::Value::TensorType(t)) = v.r#type.as_ref()?.value.as_ref() else {
            return None;
        };
        Some((v.name.as_str(), t.shape.as_ref()?.dim.len()))
    });
    let constants = (g.node.iter())
        .filter(|n| n.op_type == "Constant")
        .filter_map(|n| {
            Some((
                n.output.first()?.as_str(),
                n.attribute.first()?.t.as_ref()?.dims.len(),
            ))
        });
    let ranks: HashMap<&str, usize> = declared
        .chain(
            g.initializer
                .iter()
                .map(|t| (t.name.as_str(), t.dims.len())),
        )
        .chain(constants)
        .collect();
    let vector = |name: Option<&String>| name.and_then(|s| ranks.get(s.as_str())) == Some(&1);
    (g.node.iter().enumerate())
        .filter(|(_, n)| n.op_type == "MatMul" && n.domain.is_empty())
        .filter(|(_, n)| vector(n.input.first()) && vector(n.input.get(1)))
        .map(|(i, _)| i)
        .collect()
}

struct Dot;

impl Kernel for Dot {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (a, b) = (fact(n, ins, 0)?, fact(n, ins, 1)?);
        anyhow::ensure!(
            a.1.len() == 1 && a.1 == b.1 && a.0 == b.0,
            "{INVALID}MatMul `{}`: operands {:?} {:?} and {:?} {:?} are not two vectors of one type and length",
            n.proto.name,
            a.0,
            a.1,
            b.0,
            b.1
        );
        Ok(vec![(a.0, vec![])])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (a, b) = (opt(n, ins, 0)?, opt(n, ins, 1)?);
        let dt = a.datum_type();
        let dot = match dt.is_float() {
            true => {
                let (x, y) = (values::<f64>(a)?, values::<f64>(b)?);
                tensor0(x.iter().zip(&y).map(|(p, q)| p * q).sum::<f64>())
            }
            false => {
                let (x, y) = (values::<i64>(a)?, values::<i64>(b)?);
                let sum =
                    (x.iter().zip(&y)).fold(0i64, |s, (p, q)| s.wrapping_add(p.wrapping_mul(*q)));
                tensor0(sum)
            }
        };
        Ok(vec![dot.cast_to_dt(dt)?.into_owned()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_matmuls_of_declared_vectors_are_claimed() {
        let vector = |name: &str, rank: usize| tract_onnx::pb::ValueInfoProto {
            name: name.into(),
            r#type: Some(tract_onnx::pb::TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: 1,
                    shape: Some(tract_onnx::pb::TensorShapeProto {
                        dim: vec![Default::default(); rank],
                    }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        };
        let matmul = |a: &str, b: &str| tract_onnx::pb::NodeProto {
            op_type: "MatMul".into(),
            input: vec![a.into(), b.into()],
            ..Default::default()
        };
        let g = GraphProto {
            input: vec![vector("a", 1), vector("b", 1), vector("m", 2)],
            node: vec![matmul("a", "b"), matmul("m", "b"), matmul("a", "c")],
            ..Default::default()
        };
        assert_eq!(claimed_dots(&g), HashSet::from([0]));
    }

    #[test]
    fn vectors_give_their_dot_product() {
        let n = Node::new(&tract_onnx::pb::NodeProto {
            op_type: "MatMul".into(),
            input: vec!["a".into(), "b".into()],
            ..Default::default()
        });
        let (a, b) = (tensor1(&[1.0f64, 2.0, 3.0]), tensor1(&[4.0f64, 5.0, 6.0]));
        let out = Dot.eval(&n, &[Some(&a), Some(&b)]).unwrap();
        assert_eq!(out[0], tensor0(32.0f64));
        let (a, b) = (tensor1(&[2i32, 3]), tensor1(&[4i32, 5]));
        assert_eq!(
            Dot.eval(&n, &[Some(&a), Some(&b)]).unwrap()[0],
            tensor0(23i32)
        );
    }
}
