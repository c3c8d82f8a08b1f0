//! Model Explorer overlays of a pairing, one per graph: over the model, what became of each node's value (held by
//! the transformed model, a copy, inside one of its fused nodes, lost); over the transformed model, what each node's
//! value equals (the model's value, a duplicate, its own) and where the function changes.

use crate::equiv::Equiv;
use crate::pairing::Fate;
use crate::report::explorer::{Datum, Overlay};

const HELD: &str = "#c8e6c9";
const FUSED: &str = "#bbdefb";
const OWN: &str = "#e0e0e0";
const DIVERGES: &str = "#e53935";

/// The model's overlay (`phantom_pairing_model.json`).
pub fn model(e: &Equiv) -> Overlay {
    let values = (e.fates.iter())
        .map(|(v, f)| {
            let (text, colour) = match f {
                Fate::Paired(t) => (format!("held as `{t}`"), HELD),
                Fate::Copy(c) => (format!("a copy of `{c}`"), HELD),
                Fate::Fused { node, op } => (format!("inside {op} `{node}`"), FUSED),
                Fate::Lost => ("not in the transformed model".to_string(), OWN),
            };
            (v.clone(), Datum::Text(text), Some(colour))
        })
        .collect();
    overlay("phantom_pairing_model.json", values)
}

/// The transformed model's overlay (`phantom_pairing_transformed.json`).
pub fn transformed(e: &Equiv) -> Overlay {
    let diverged = e.divergence.as_ref().map(|d| d.value.as_str());
    let values = (e.target_values.iter())
        .map(|t| {
            let (text, colour) = if Some(t.as_str()) == diverged {
                ("the function changes here".to_string(), DIVERGES)
            } else if let Some(r) = e.pairing.to.get(t) {
                (format!("equals `{r}`"), HELD)
            } else if let Some(r) = e.pairing.duplicates.get(t) {
                (format!("equals `{r}` (a duplicate)"), HELD)
            } else {
                ("its own value".to_string(), OWN)
            };
            (t.clone(), Datum::Text(text), Some(colour))
        })
        .collect();
    overlay("phantom_pairing_transformed.json", values)
}

fn overlay(file: &str, values: Vec<(String, Datum, Option<&'static str>)>) -> Overlay {
    Overlay {
        file: file.into(),
        values,
        thresholds: vec![],
        gradient: vec![],
    }
}
