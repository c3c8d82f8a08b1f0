//! Sizes before a run: the f64 bytes of every value tract can size from the inputs' facts alone, and the check
//! that no value typing made concrete exceeds the memory phantom plans with.

use std::collections::HashMap;

use tract_onnx::prelude::*;

use super::shape_inputs::facts_of;
use super::{ref_err, InputFact, ReferenceRunner};
use crate::error::Result;
use crate::model::inputs::Inputs;
use crate::model::Graph;

impl ReferenceRunner {
    /// Bytes in f64 of every value tract can size from the shapes of `inputs` (no value is read), by name. A model
    /// tract cannot import is an error here (a panic in tract included), left for the run to report.
    pub fn value_sizes(&self, graph: &Graph, inputs: &Inputs) -> Result<HashMap<String, u64>> {
        self.sizes_from_facts(graph, &facts_of(graph, inputs))
    }

    /// Bytes in f64 of every value tract can size from the inputs' types and shapes alone (no value is read), by
    /// name: a model's weights can be given as inputs of their shape, so nothing big is loaded.
    pub fn sizes_from_facts(
        &self,
        graph: &Graph,
        facts: &[InputFact],
    ) -> Result<HashMap<String, u64>> {
        // Parsed as float64, as the run parses it: large weights are then kept as stored (memory-mapped, not read),
        // so sizing costs what typing costs. A model that parses only as it is is sized that way.
        let (parse, wide) = crate::error::guard("sizing values (tract)", || {
            match self.parse(graph, facts, true) {
                Ok(p) => Ok((p, true)),
                Err(_) => self.parse(graph, facts, false).map(|p| (p, false)),
            }
        })?;
        let (typed, names, _) = &parse;
        let mut sizes = HashMap::new();
        for (o, name) in typed.outputs.iter().zip(names) {
            let fact = typed
                .outlet_fact(*o)
                .map_err(|e| ref_err(graph, "sizing", e))?;
            if let Some(dims) = fact.shape.as_concrete() {
                sizes.insert(name.clone(), 8 * dims.iter().product::<usize>() as u64);
            }
        }
        // The run that follows parses the model as this one did: it takes this parse.
        if wide && self.may_keep_parse() {
            super::parsed::keep(graph, facts, parse);
        }
        Ok(sizes)
    }
}

/// Every value whose shape typing made concrete must fit the memory phantom plans with (a shape computed from the
/// inputs, e.g. an Expand to 10⁶ × 10⁶, would otherwise abort the process when tract allocates it).
pub(super) fn within_memory(graph: &Graph, typed: &TypedModel) -> Result<()> {
    let budget = crate::fsutil::memory_budget();
    for node in typed.nodes() {
        for o in &node.outputs {
            let Some(shape) = o.fact.shape.as_concrete() else {
                continue;
            };
            let bytes = crate::tensor::checked_nbytes(shape, o.fact.datum_type.size_of());
            if bytes.is_none_or(|b| b > budget) {
                return Err(ref_err(
                    graph,
                    "sizing",
                    format!(
                        "{} makes a value of shape {shape:?} ({}), beyond the memory phantom plans with ({}): \
                         check the model's shapes, or give smaller input dims with --dim/--shape",
                        node.name,
                        bytes.map(crate::units::fmt_size).unwrap_or_else(|| "more bytes than can be addressed".into()),
                        crate::units::fmt_size(budget)
                    ),
                ));
            }
        }
    }
    Ok(())
}
