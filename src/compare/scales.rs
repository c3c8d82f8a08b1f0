//! The scale of each value's operands, so an absolute tolerance never swallows a tensor much smaller than it.
//!
//! `atol` exists because an element near zero carries the absolute rounding error of the operands it was computed
//! from, not one proportional to its own magnitude. So phantom caps `atol` at `rtol × max(RMS of the value, RMS of
//! the node's activation operands)`: a value computed from operands of RMS 1 keeps the full `atol`, but a model
//! whose activations are around 1e-6 is judged relative to 1e-6, not to `1e-4`. Weights (initializers and `Constant`
//! outputs) do not count as operands: their scale says nothing about the activations' magnitude.

use std::collections::{HashMap, HashSet};

use crate::model::Graph;
use crate::tensor::Tensor;

/// RMS of every reference value recorded as the reference streams, and each value's activation operands.
#[derive(Debug, Default)]
pub struct Scales {
    rms: HashMap<String, f64>,
    operands: HashMap<String, Vec<String>>,
}

impl Scales {
    /// The operands of every value `graph` computes (its producer's inputs that are not weights).
    pub fn new(graph: &Graph) -> Scales {
        let constants: HashSet<&str> = graph
            .nodes
            .iter()
            .filter(|n| n.op_type == "Constant")
            .flat_map(|n| n.outputs.iter().map(String::as_str))
            .collect();
        let mut operands = HashMap::new();
        for n in &graph.nodes {
            let ins: Vec<String> = n
                .inputs
                .iter()
                .filter(|i| !i.is_empty())
                .filter(|i| !graph.initializers.contains_key(*i) && !constants.contains(i.as_str()))
                .cloned()
                .collect();
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                operands.insert(o.clone(), ins.clone());
            }
        }
        Scales {
            rms: HashMap::new(),
            operands,
        }
    }

    /// Records the RMS of a reference value (float values only; others do not scale a tolerance).
    pub fn record(&mut self, name: &str, t: &Tensor) {
        if t.dtype().is_float() {
            self.rms.insert(name.to_string(), rms(t));
        }
    }

    /// Records a reference value's RMS measured elsewhere (the comparison's scale).
    pub fn set(&mut self, name: &str, rms: f64) {
        self.rms.insert(name.to_string(), rms);
    }

    /// `value`'s activation operands.
    pub fn operand_names(&self, value: &str) -> &[String] {
        self.operands.get(value).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The largest RMS among `value`'s recorded activation operands (0 when it has none).
    pub fn operands(&self, value: &str) -> f64 {
        self.operands
            .get(value)
            .into_iter()
            .flatten()
            .filter_map(|i| self.rms.get(i))
            .fold(0.0, |a, &b| a.max(b))
    }
}

fn rms(t: &Tensor) -> f64 {
    crate::dispatch_tensor!(t, a => {
        let a = a.as_standard_layout();
        match a.as_slice() {
            Some(s) => super::pass::rms(s),
            None => 0.0,
        }
    })
}
