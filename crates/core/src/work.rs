//! How much repeated work a run did: model decodes, tract parses and typings, ONNX Runtime sessions built. Each
//! place that does one counts it here; with `PHANTOM_WORK_LOG=FILE`, the binary appends the counts to FILE when a
//! command ends (for the tests that keep them from growing, and for measuring the work a change saves).

use std::sync::atomic::{AtomicUsize, Ordering};

/// A kind of repeated work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// A model's protobuf bytes decoded whole into a `ModelProto`, weights included (a skeleton, whose weights stay
    /// byte ranges in the model's bytes, is not one).
    Decode,
    /// A model parsed by tract into its inference graph.
    Parse,
    /// A parsed tract model typed (`into_typed`).
    Typing,
    /// An ONNX Runtime session built.
    Session,
}

const KINDS: [(Work, &str); 4] = [
    (Work::Decode, "decodes"),
    (Work::Parse, "parses"),
    (Work::Typing, "typings"),
    (Work::Session, "sessions"),
];

static COUNTS: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

fn slot(w: Work) -> usize {
    KINDS.iter().position(|(k, _)| *k == w).unwrap_or(0)
}

/// Counts one piece of work of kind `w`.
pub fn count(w: Work) {
    COUNTS[slot(w)].fetch_add(1, Ordering::Relaxed);
}

/// The counts so far.
pub fn counts(w: Work) -> usize {
    COUNTS[slot(w)].load(Ordering::Relaxed)
}

/// `command decodes=N parses=N typings=N sessions=N`.
pub fn line(command: &str) -> String {
    let parts: Vec<String> = KINDS
        .iter()
        .map(|(w, name)| format!("{name}={}", counts(*w)))
        .collect();
    format!("{command} {}\n", parts.join(" "))
}

/// Appends [`line`] to `PHANTOM_WORK_LOG` when it is set; a log that cannot be written is ignored, as it changes
/// nothing phantom does.
pub fn log(command: &str) {
    use std::io::Write;
    let Some(path) = std::env::var_os("PHANTOM_WORK_LOG") else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line(command).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_by_kind() {
        let before = counts(Work::Session);
        count(Work::Session);
        count(Work::Session);
        assert_eq!(counts(Work::Session), before + 2);
        assert!(line("onnx").starts_with("onnx decodes="));
    }
}
