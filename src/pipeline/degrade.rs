//! Degrade, never die: an optional stage (introduced error, expected noise, the fusion check) that fails leaves
//! its figures "not measured" with the reason in the report's notes, and the verdict comes out with its own exit
//! code. Only the capture of the values the verdict compares may end a run with exit 2.
//!
//! `PHANTOM_INJECT_FAILURE=stage[,stage…]` makes the named stages fail ([`STAGES`]; `attribution-node` fails every
//! node's run alone, one by one), so tests can prove each one degrades.

use crate::error::Result;

/// The stages that may fail without losing the verdict.
pub const STAGES: &[&str] = &["attribution", "attribution-node", "noise", "fusion"];

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
