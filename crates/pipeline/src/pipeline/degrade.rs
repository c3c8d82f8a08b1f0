//! Degrade, never die: an optional stage (introduced error, expected noise, the fusion check) that fails leaves
//! its figures "not measured" with the reason in the report's notes, and the verdict comes out with its own exit
//! code. Only the capture of the values the verdict compares may end a run with exit 2.
//!
//! `PHANTOM_INJECT_FAILURE=stage[,stage…]` makes the named stages fail ([`STAGES`]; `attribution-node` fails every
//! node's run alone, one by one), so tests can prove each one degrades.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::report::model::{NodeReport, ValueStatus};

/// The stages that may fail without losing the verdict.
pub const STAGES: &[&str] = &[
    "attribution",
    "attribution-node",
    "noise",
    "fusion",
    "tf32",
    "causes",
    "chunked-capture",
];

pub use crate::error::injected;

/// The stage's result, or `None` with a note saying what was not measured and why.
pub fn optional<T>(notes: &mut Vec<String>, what: &str, r: Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            notes.push(format!(
                "{what} not measured: {}; the verdict stands on the compared values",
                one_line(&e.to_string())
            ));
            None
        }
    }
}

/// What optional stages could not measure: for every node (a stage that failed as a whole), and per node.
#[derive(Debug, Default)]
pub struct Unmeasured {
    /// Figure → reason, for every node the stage would have measured.
    everywhere: BTreeMap<String, String>,
    /// Node → figure → reason.
    nodes: BTreeMap<String, BTreeMap<String, String>>,
}

impl Unmeasured {
    /// The stage's result; on failure, `None`, the report's note (as [`optional`]) and `what` marked not measured
    /// on every compared node.
    pub fn stage<T>(&mut self, notes: &mut Vec<String>, what: &str, r: Result<T>) -> Option<T> {
        let why = r.as_ref().err().map(|e| one_line(&e.to_string()));
        let v = optional(notes, what, r);
        if let Some(why) = why {
            self.everywhere.insert(what.to_string(), why);
        }
        v
    }

    /// `what` of `node` not measured, because `why`.
    pub fn node(&mut self, node: &str, what: &str, why: &str) {
        let figures = self.nodes.entry(node.to_string()).or_default();
        figures.insert(what.to_string(), one_line(why));
    }

    /// Marks the node reports: a node's own reasons, and a failed stage's on every node with a compared value.
    pub fn mark(&self, nodes: &mut [NodeReport]) {
        for n in nodes.iter_mut() {
            if n.status != ValueStatus::Unchecked {
                n.not_measured.extend(self.everywhere.clone());
            }
            if let Some(own) = self.nodes.get(&n.name) {
                n.not_measured.extend(own.clone());
            }
        }
    }

    /// Adds what another stage could not measure.
    pub fn absorb(&mut self, other: Unmeasured) {
        self.everywhere.extend(other.everywhere);
        for (node, figures) in other.nodes {
            self.nodes.entry(node).or_default().extend(figures);
        }
    }
}

/// What a stage says beside its result: notes for the report, and the figures it could not measure. Stages return
/// it; the [`super::Lane`] takes it.
#[derive(Debug, Default)]
pub struct Said {
    pub notes: Vec<String>,
    pub unmeasured: Unmeasured,
}

impl Said {
    /// A stage that says one note.
    pub fn note(note: impl Into<String>) -> Said {
        Said {
            notes: vec![note.into()],
            ..Default::default()
        }
    }

    /// The stage's result; on failure, `None`, a note and `what` marked not measured on every compared node
    /// ([`Unmeasured::stage`]).
    pub fn stage<T>(&mut self, what: &str, r: Result<T>) -> Option<T> {
        self.unmeasured.stage(&mut self.notes, what, r)
    }

    /// The stage's result; on failure, `None` and a note ([`optional`]).
    pub fn optional<T>(&mut self, what: &str, r: Result<T>) -> Option<T> {
        optional(&mut self.notes, what, r)
    }

    /// `what` of `node` not measured, because `why`.
    pub fn node(&mut self, node: &str, what: &str, why: &str) {
        self.unmeasured.node(node, what, why)
    }

    /// Adds what another stage said, after this one's.
    pub fn absorb(&mut self, other: Said) {
        self.notes.extend(other.notes);
        self.unmeasured.absorb(other.unmeasured);
    }
}

/// The first line of an error, at most 300 characters (ONNX Runtime's messages carry source paths and stacks).
fn one_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failed_stage_leaves_a_note_and_no_value() {
        let mut notes = vec![];
        let r: Option<u8> = super::optional(
            &mut notes,
            "expected noise",
            Err(crate::error::Error::Usage("boom\nstack".into())),
        );
        assert!(r.is_none());
        assert_eq!(
            notes,
            ["expected noise not measured: boom; the verdict stands on the compared values"]
        );
        assert_eq!(super::optional(&mut notes, "x", Ok(3)), Some(3));
        assert_eq!(notes.len(), 1);
    }
}
