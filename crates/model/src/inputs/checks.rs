//! Checks on how inputs are asked for: names that exist, and sizes within the input memory budget.

use super::InputSpec;
use crate::error::{Error, Result};
use crate::{Dim, Graph, ValueInfo};

/// What generated inputs may still take (they are made as f64 first).
pub(super) struct Budget {
    pub(super) left: usize,
}

impl Budget {
    /// Refuses an input of `shape` beyond what is left, with the numbers and the dims that made it.
    pub(super) fn take(
        &mut self,
        info: &ValueInfo,
        shape: &[usize],
        dims_from: &[String],
    ) -> Result<()> {
        let need = crate::tensor::checked_nbytes(shape, 8);
        if let Some(n) = need.filter(|&n| n <= self.left) {
            self.left -= n;
            return Ok(());
        }
        let need = need
            .map(crate::units::fmt_size)
            .unwrap_or_else(|| "more bytes than can be addressed".into());
        let from = match dims_from {
            [] => String::new(),
            d => format!(" (dims: {})", d.join("; ")),
        };
        Err(Error::Input {
            name: info.name.clone(),
            reason: format!(
                "shape {shape:?}{from} needs {need} as f64, beyond what phantom allows inputs on this machine ({} \
                 left of {}, an eighth of its memory): set smaller sizes with --dim NAME=VALUE or --shape {}=…",
                crate::units::fmt_size(self.left),
                crate::units::fmt_size(crate::fsutil::input_budget()),
                info.name
            ),
        })
    }
}

/// `--shape` names a graph input, `--dim` a symbolic dim some input declares: a typo is an error, not ignored.
pub(super) fn check_names(graph: &Graph, spec: &InputSpec) -> Result<()> {
    let inputs: Vec<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    if let Some(bad) = spec.shapes.keys().find(|k| !inputs.contains(&k.as_str())) {
        return Err(Error::Usage(format!(
            "--shape {bad}=…: the model has no input `{bad}` (it has: {})",
            inputs.join(", ")
        )));
    }
    let symbols: Vec<&str> = graph
        .inputs
        .iter()
        .flat_map(|i| i.dims.iter().flatten())
        .filter_map(|d| match d {
            Dim::Symbolic(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    if let Some(bad) = spec.dims.keys().find(|k| !symbols.contains(&k.as_str())) {
        let have = match symbols.is_empty() {
            true => "none: every input dim is fixed".to_string(),
            false => symbols.join(", "),
        };
        return Err(Error::Usage(format!(
            "--dim {bad}=…: no input has a symbolic dim `{bad}` (symbolic dims: {have})"
        )));
    }
    Ok(())
}
