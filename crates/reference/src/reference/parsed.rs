//! The one parse of a model kept from sizing to the reference's run. Sizing parses the model as the run does
//! (float64, large weights as stored) to read the shapes of its values; the run that follows on the same model and
//! input facts takes that parse instead of doing it again (a 6,261-node Swin-T: about 0.17 s of each run). Kept
//! only for a runner whose parse depends on nothing but the model and the facts (no rounding, no pinned decisions,
//! no stand-ins), and only for a model whose weights held meanwhile stay small ([`KEEP_UP_TO`]). One parse is kept,
//! and taken once.

use std::sync::Mutex;

use tract_onnx::pb::ModelProto;
use tract_onnx::prelude::TypedModel;

use super::{InputFact, ReferenceRunner};
use crate::model::Graph;

/// A parse: the typed model, its value names, and the model it was parsed from.
pub(super) type Parse = (TypedModel, Vec<String>, ModelProto);

/// Weights (as the reference holds them in f64) up to which a parse is kept between sizing and the run.
const KEEP_UP_TO: u64 = 512 << 20;

/// The model a parse was of (its bytes, by address, and its path) and the facts it was typed with.
struct Kept {
    bytes: usize,
    path: std::path::PathBuf,
    facts: Vec<InputFact>,
    parse: Parse,
}

static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

impl ReferenceRunner {
    /// Whether this runner's float64 parse of a model depends on the model and its input facts alone: it rounds
    /// nothing and pins no decision. What the target computed (`known`) matters only where typing fails and a node
    /// is stood in for, which a kept parse did not need ([`Self::may_keep_parse`]).
    pub(super) fn parse_is_plain(&self) -> bool {
        self.round.is_none() && self.pins.is_empty()
    }

    /// Whether this runner's float64 parse may be kept for a later run: plain, and typed knowing nothing the target
    /// computed, so that it stood in for no node.
    pub(super) fn may_keep_parse(&self) -> bool {
        self.parse_is_plain() && self.known.as_ref().is_none_or(|k| k.facts.is_empty())
    }
}

fn kept() -> std::sync::MutexGuard<'static, Option<Kept>> {
    KEPT.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps `parse`, the float64 parse of `graph` typed with `facts`, for the run that follows (replacing any kept).
pub(super) fn keep(graph: &Graph, facts: &[InputFact], parse: Parse) {
    if graph.reference_weight_bytes() > KEEP_UP_TO {
        return;
    }
    *kept() = Some(Kept {
        bytes: std::sync::Arc::as_ptr(&graph.bytes) as usize,
        path: graph.path.clone(),
        facts: facts.to_vec(),
        parse,
    });
}

/// The kept float64 parse of `graph` typed with `facts`, if it is the one kept; given up either way.
pub(super) fn take(graph: &Graph, facts: &[InputFact]) -> Option<Parse> {
    let k = kept().take()?;
    let same = k.bytes == std::sync::Arc::as_ptr(&graph.bytes) as usize
        && k.path == graph.path
        && k.facts == facts;
    same.then_some(k.parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizing keeps its parse; the reference's run on the same model and facts takes it (its values are those of
    /// a run that parses afresh), a runner that rounds does not, and a parse is taken once.
    #[test]
    fn the_run_after_sizing_takes_its_parse_once() {
        let path = std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../models/convnet.onnx"
        ));
        let g = crate::model::import::load(path).unwrap();
        let inputs = crate::model::inputs::prepare(&g, &Default::default()).unwrap();
        let facts = super::super::shape_inputs::facts_of(&g, &inputs);
        let values = |r: &mut ReferenceRunner| r.run(&g, &inputs).unwrap().values;
        let fresh = values(&mut ReferenceRunner::default());
        ReferenceRunner::default().value_sizes(&g, &inputs).unwrap();
        let rounding = ReferenceRunner {
            round: Some(Default::default()),
            ..Default::default()
        };
        assert!(!rounding.parse_is_plain());
        assert!(kept().as_ref().is_some_and(|k| k.facts == facts));
        let taken = values(&mut ReferenceRunner::default());
        assert!(kept().is_none(), "taken once");
        assert_eq!(fresh.len(), taken.len());
        for (name, v) in &fresh {
            assert_eq!(v.to_f64_array(), taken[name].to_f64_array(), "{name}");
        }
        // Other facts: not the kept parse, which is given up.
        ReferenceRunner::default().value_sizes(&g, &inputs).unwrap();
        assert!(take(&g, &facts[1..]).is_none() && kept().is_none());
    }
}
