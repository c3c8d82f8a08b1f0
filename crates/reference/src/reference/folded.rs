//! Float values tract folds into constants at import, computed again for a run that rounds. A rotary table computed
//! in the graph from the input's shape (`Range → Cast → MatMul(positions, inv_freq) → Concat → Cos/Sin`, each in
//! fp16) is folded by tract in f64 before the run starts, so the expected-noise run (every value rounded to the type
//! the target stores it in) would hand on cos of the exact angle while the target computes cos of the fp16 angle:
//! the ideal run would not round what the target rounds. Each folded computing node is kept here (its node of the
//! widened model), and a rounding run evaluates it again alone, by tract in f64 with phantom's kernels, from its
//! operands as that run rounded them, rounds its outputs in turn, and feeds those to the nodes that read them.

use std::collections::HashMap;

use tract_onnx::pb::{ModelProto, NodeProto, OperatorSetIdProto};
use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::konst::Const;

use super::contrib::subgraph;
use crate::model::Graph;

/// The most folded nodes kept for a rounding run (a shape computation folds hundreds of integer nodes; the float
/// ones a rounding changes are few).
const MAX_FOLDED: usize = 512;

/// The largest initializer (in elements) kept as an operand of the folded nodes (axes, shapes, a frequency table).
const MAX_OPERAND: usize = 1 << 16;

/// The folded computing nodes of a model, by ONNX node index: their nodes of the widened model, the small
/// initializers they read (f64 where float, as the plan holds them), and the model's opsets.
#[derive(Clone, Default)]
pub struct Folded {
    nodes: HashMap<usize, NodeProto>,
    operands: HashMap<String, Tensor>,
    opsets: Vec<OperatorSetIdProto>,
}

impl Folded {
    /// The ONNX nodes of `graph` (with node index `onnx_of` for each tract node of `model`) that tract folded into
    /// float constants, found in the widened `proto` by their outputs.
    pub fn collect(
        graph: &Graph,
        model: &TypedModel,
        onnx_of: &HashMap<usize, usize>,
        proto: &ModelProto,
    ) -> Folded {
        let Some(g) = proto.graph.as_ref() else {
            return Folded::default();
        };
        let mut nodes = HashMap::new();
        for n in model.nodes() {
            let float = (n.op_as::<Const>()).is_some_and(|k| k.val().datum_type().is_float());
            let (true, Some(&idx)) = (float, onnx_of.get(&n.id)) else {
                continue;
            };
            let Some(onnx) = graph.nodes.get(idx).filter(|o| o.op_type != "Constant") else {
                continue;
            };
            if nodes.contains_key(&idx) || nodes.len() >= MAX_FOLDED {
                continue;
            }
            if let Some(p) = g.node.iter().find(|p| p.output == onnx.outputs) {
                nodes.insert(idx, p.clone());
            }
        }
        let read: std::collections::HashSet<&String> =
            nodes.values().flat_map(|n| n.input.iter()).collect();
        let operands = (g.initializer.iter())
            .filter(|t| read.contains(&t.name))
            .filter(|t| t.dims.iter().product::<i64>() as usize <= MAX_OPERAND)
            .filter_map(|t| {
                let host = crate::model::proto::tensor_from_proto(t, graph.path.parent()).ok()?;
                let v = crate::model::tract::to_tract_f64(&host).into_tensor();
                Some((t.name.clone(), v))
            })
            .collect();
        Folded {
            nodes,
            operands,
            opsets: proto.opset_import.clone(),
        }
    }

    /// The initializer `name` when a folded node reads it and it is small.
    pub fn operand(&self, name: &str) -> Option<&Tensor> {
        self.operands.get(name)
    }

    /// The folded node of ONNX index `idx`, if it is one.
    pub fn node(&self, idx: usize) -> Option<&NodeProto> {
        self.nodes.get(&idx)
    }

    /// Evaluates `node` alone on `inputs` (one value per input, in order; a name read twice is fed once): its
    /// outputs, by name.
    pub fn eval(&self, node: &NodeProto, inputs: &[Tensor]) -> TractResult<Vec<(String, TValue)>> {
        let mut g = tract_onnx::pb::GraphProto {
            node: vec![node.clone()],
            ..Default::default()
        };
        let mut feed = vec![];
        for (name, t) in node.input.iter().zip(inputs) {
            if name.is_empty() || g.input.iter().any(|i| &i.name == name) {
                continue;
            }
            let code = subgraph::elem_code(t.datum_type())
                .ok_or_else(|| anyhow::anyhow!("input `{name}` of type {:?}", t.datum_type()))?;
            g.input.push(crate::model::surgery::value_info(
                name,
                code,
                Some(t.shape().to_vec()),
            ));
            feed.push(t.clone());
        }
        g.output = (node.output.iter())
            .map(|o| crate::model::surgery::untyped_value(o))
            .collect();
        let proto =
            crate::model::surgery::Header::with_opsets(self.opsets.clone()).model("phantom", g);
        let plan = subgraph::plan_model(&proto, &feed, true)?;
        let out = subgraph::run(&plan, feed)?;
        Ok(node.output.iter().cloned().zip(out).collect())
    }
}
