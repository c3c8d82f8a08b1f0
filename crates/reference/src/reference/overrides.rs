//! ONNX-level evaluation of the recurrent ops tract fuses into f32-only kernels (LSTM, GRU) or gets wrong (RNN): the nodes to
//! override are found in the (widened) model proto with their constant inputs decoded up front, and computed in f64
//! by [`rnn`] from the values captured during the run.

use std::collections::HashMap;

use tract_onnx::pb::{ModelProto, NodeProto, TensorProto};
use tract_onnx::prelude::*;

use super::rnn;
use crate::model::proto::tensor_from_proto;
use crate::model::Graph;

/// Recurrent ops phantom evaluates at the ONNX level.
const RNNS: &[&str] = &["LSTM", "GRU", "RNN"];

/// The values the recurrent nodes of `g` read: their initializers are decoded from the model after it is parsed.
pub(super) fn reads(g: &tract_onnx::pb::GraphProto) -> std::collections::HashSet<String> {
    (g.node.iter())
        .filter(|n| RNNS.contains(&n.op_type.as_str()))
        .flat_map(|n| n.input.iter().cloned())
        .collect()
}

/// An ONNX node phantom evaluates itself, at the ONNX level, with its constant inputs decoded up front.
#[derive(Clone)]
pub(super) struct Override {
    pub(super) proto: NodeProto,
    consts: Vec<Option<ndarray::ArrayD<f64>>>,
    pub(super) result: Option<Result<Vec<TValue>, String>>,
}

/// ONNX nodes of the top-level graph that phantom evaluates itself (LSTM, GRU, RNN).
#[derive(Clone)]
pub struct Overrides(pub(super) HashMap<usize, Override>);

impl Overrides {
    /// Finds the nodes to override in the (widened) model proto.
    pub fn collect(graph: &Graph, proto: &ModelProto) -> Overrides {
        let mut map = HashMap::new();
        let Some(g) = proto.graph.as_ref() else {
            return Overrides(map);
        };
        let mut consts: HashMap<&str, &TensorProto> =
            g.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
        for n in g.node.iter().filter(|n| n.op_type == "Constant") {
            if let (Some(o), Some(t)) = (
                n.output.first(),
                n.attribute
                    .iter()
                    .find(|a| a.name == "value")
                    .and_then(|a| a.t.as_ref()),
            ) {
                consts.insert(o.as_str(), t);
            }
        }
        for n in graph
            .nodes
            .iter()
            .filter(|n| RNNS.contains(&n.op_type.as_str()))
        {
            let Some(p) = g
                .node
                .iter()
                .find(|p| p.output == n.outputs && p.op_type == n.op_type)
            else {
                continue;
            };
            let decoded = p
                .input
                .iter()
                .map(|i| {
                    consts
                        .get(i.as_str())
                        .and_then(|t| tensor_from_proto(t, graph.path.parent()).ok())
                        .map(|t| t.to_f64_array())
                })
                .collect();
            map.insert(
                n.index,
                Override {
                    proto: p.clone(),
                    consts: decoded,
                    result: None,
                },
            );
        }
        Overrides(map)
    }

    /// The outputs of override `o`, its non-constant inputs read from `values` (by ONNX name).
    pub(super) fn compute(
        o: &Override,
        values: &HashMap<String, TValue>,
    ) -> Result<Vec<TValue>, String> {
        let mut inputs = Vec::with_capacity(o.proto.input.len());
        for (k, name) in o.proto.input.iter().enumerate() {
            if name.is_empty() {
                inputs.push(None);
            } else if let Some(c) = &o.consts[k] {
                inputs.push(Some(c.clone()));
            } else {
                let v = values
                    .get(name)
                    .ok_or_else(|| format!("input `{name}` was not captured"))?;
                let v = v.cast_to::<f64>().map_err(|e| e.to_string())?;
                inputs.push(Some(
                    v.to_plain_array_view::<f64>()
                        .map_err(|e| e.to_string())?
                        .to_owned(),
                ));
            }
        }
        let outs = match o.proto.op_type.as_str() {
            "GRU" => rnn::gru(&o.proto, &inputs)?,
            "RNN" => rnn::rnn(&o.proto, &inputs)?,
            _ => rnn::lstm(&o.proto, &inputs)?,
        };
        Ok(outs.into_iter().map(|a| a.into_tvalue()).collect())
    }
}
