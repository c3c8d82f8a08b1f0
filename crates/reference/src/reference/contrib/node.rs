//! A contrib node as its kernel sees it: the ONNX node, its attributes, and its inputs by ONNX slot.

use tract_onnx::pb::NodeProto;
use tract_onnx::prelude::*;

use super::kernel::PREFIX;

/// Element type and concrete shape of one value.
pub type Fact = (DatumType, Vec<usize>);

/// A contrib node as its kernel sees it: the ONNX node, and where each ONNX input slot sits among the inputs
/// tract wires (tract skips empty optional inputs and outputs).
#[derive(Debug, Clone)]
pub struct Node {
    pub proto: NodeProto,
    /// tract input position of each ONNX input slot (`None`: absent).
    pub(in crate::reference) slots: Vec<Option<usize>>,
    /// The ONNX output slots tract exposes, in order.
    pub outs: Vec<usize>,
}

impl Node {
    pub fn new(proto: &NodeProto) -> Node {
        let mut k = 0;
        let slots = proto
            .input
            .iter()
            .map(|i| {
                (!i.is_empty()).then(|| {
                    k += 1;
                    k - 1
                })
            })
            .collect();
        let outs = (0..proto.output.len())
            .filter(|&o| !proto.output[o].is_empty())
            .collect();
        Node {
            proto: proto.clone(),
            slots,
            outs,
        }
    }

    /// The op type without phantom's prefix.
    pub fn op(&self) -> &str {
        self.proto
            .op_type
            .strip_prefix(PREFIX)
            .unwrap_or(&self.proto.op_type)
    }

    /// Reorders tract's inputs by ONNX slot (`None` for an absent optional input).
    pub fn by_slot<'a, T>(&self, ins: &'a [T]) -> Vec<Option<&'a T>> {
        self.slots
            .iter()
            .map(|s| s.and_then(|k| ins.get(k)))
            .collect()
    }

    pub(super) fn attr(&self, name: &str) -> Option<&tract_onnx::pb::AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name == name)
    }

    /// An integer attribute, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map(|a| a.i).unwrap_or(default)
    }

    /// A float attribute (ONNX stores it as float32) widened to f64, or `default`.
    pub fn float(&self, name: &str, default: f32) -> f64 {
        self.attr(name).map(|a| a.f).unwrap_or(default) as f64
    }

    /// A float-list attribute (ONNX stores float32) widened to f64 (empty when absent).
    pub fn floats(&self, name: &str) -> Vec<f64> {
        self.attr(name)
            .map(|a| a.floats.iter().map(|&f| f as f64).collect())
            .unwrap_or_default()
    }

    /// An integer-list attribute (empty when absent).
    pub fn ints(&self, name: &str) -> Vec<i64> {
        self.attr(name).map(|a| a.ints.clone()).unwrap_or_default()
    }

    /// A required integer attribute.
    pub fn req_int(&self, name: &str) -> TractResult<i64> {
        self.attr(name)
            .map(|a| a.i)
            .ok_or_else(|| anyhow::anyhow!("{} has no `{name}` attribute", self.op()))
    }
}
