//! Nodes the device does not run (no shader, integer shape arithmetic, unsupported attributes) run on the host:
//! each as a one-node model on ONNX Runtime's CPU provider, fed with the values the device produced (cast to the
//! element type the original model declares), so a missing shader never fails the run. Control-flow bodies see
//! the outer values they read as extra graph inputs.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use tract_onnx::pb::{GraphProto, NodeProto};

use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::surgery;
use crate::ort::{run_session, OrtRunner};
use crate::tensor::{DType, Tensor};

pub struct Host {
    pub ort: OrtRunner,
    /// What a host-run node's model keeps of the original: IR version, opsets, functions.
    pub header: surgery::Header,
    /// Element type of every value of the original model (ONNX codes).
    pub types: HashMap<String, i32>,
    pub dir: std::path::PathBuf,
}

/// Every value name `n` reads, including those its control-flow bodies read from the outer graph.
fn reads(n: &NodeProto, out: &mut Vec<String>) {
    out.extend(n.input.iter().filter(|i| !i.is_empty()).cloned());
    for a in &n.attribute {
        for g in a.g.iter().chain(a.graphs.iter()) {
            let local: HashSet<&str> = g
                .node
                .iter()
                .flat_map(|m| m.output.iter())
                .chain(g.input.iter().map(|i| &i.name))
                .chain(g.initializer.iter().map(|i| &i.name))
                .map(String::as_str)
                .collect();
            let mut inner = vec![];
            for m in &g.node {
                reads(m, &mut inner);
            }
            out.extend(inner.into_iter().filter(|i| !local.contains(i.as_str())));
        }
    }
}

impl Host {
    /// Runs `node` on ONNX Runtime's CPU provider with inputs taken from `values`; outputs by name.
    pub fn run(
        &self,
        node: &NodeProto,
        values: &HashMap<String, Tensor>,
    ) -> Result<Vec<(String, std::result::Result<Tensor, String>)>> {
        let mut names = vec![];
        reads(node, &mut names);
        let mut seen = HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        let mut inputs = Inputs::default();
        let mut graph_inputs = vec![];
        for n in &names {
            let t = values.get(n).ok_or_else(|| Error::Wgpu {
                reason: format!("node {}: no value for its input `{n}`", node.name),
            })?;
            let code = self.types.get(n).copied().unwrap_or(t.dtype().onnx_code());
            let want = DType::from_onnx(code);
            let t = match t.dtype() == want {
                true => t.clone(),
                false => t.cast(want).ok_or_else(|| Error::Wgpu {
                    reason: format!("node {}: cannot feed `{n}` as {want}", node.name),
                })?,
            };
            graph_inputs.push(surgery::value_info(n, code, None));
            inputs.tensors.push((n.clone(), t));
        }
        let graph = GraphProto {
            name: "phantom_host_node".into(),
            node: vec![node.clone()],
            input: graph_inputs,
            output: (node.output.iter())
                .filter(|o| !o.is_empty())
                .map(|o| surgery::untyped_value(o))
                .collect(),
            ..Default::default()
        };
        let model = self.header.model("phantom wgpu host", graph);
        let path = self.dir.join(format!("{}.host.onnx", node.name));
        let graph = surgery::finish(Path::new(&path), model)?;
        let mut session = self.ort.session_for(&graph)?;
        run_session(&mut session, &inputs, &graph)
    }
}
