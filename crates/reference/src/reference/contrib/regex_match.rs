//! ONNX's `RegexFullMatch` for the reference (tract cannot run it). It takes RE2 syntax, compiled with the `regex`
//! crate (whose syntax follows RE2's) and anchored at both ends. RE2 matches UTF-8 text char by char but its Perl
//! classes and word boundary are ASCII, where `regex`'s are Unicode: `\d \w \s \b` and their negations are rewritten
//! to their ASCII forms before compiling. RE2 features `regex` lacks (none of note) make the node fail rather than
//! guess.

use tract_onnx::prelude::*;

use super::kernel::Kernel;
use super::node::{Fact, Node};
use super::strings::strings;
use super::util::{fact, string};

/// An RE2 pattern with its Perl classes (`\d \w \s`, negated in capitals) and word boundaries made ASCII, as RE2
/// has them, for the Unicode-aware `regex` crate. A class becomes a bracketed class, which `regex` also nests
/// inside a bracketed class.
pub(super) fn re2_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push(c);
            break;
        };
        out.push_str(match e {
            'd' => "[0-9]",
            'D' => "[^0-9]",
            'w' => "[0-9A-Za-z_]",
            'W' => "[^0-9A-Za-z_]",
            // RE2's `\s` is [\t\n\f\r ], without \v.
            's' => r"[\t\n\x0C\r ]",
            'S' => r"[^\t\n\x0C\r ]",
            'b' => r"(?-u:\b)",
            'B' => r"(?-u:\B)",
            _ => {
                out.push(c);
                out.push(e);
                continue;
            }
        });
    }
    out
}

pub(super) struct FullMatch;

impl Kernel for FullMatch {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        Ok(vec![(bool::datum_type(), fact(n, ins, 0)?.1.clone())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = strings(n, ins, 0)?;
        let pattern = string(n, "pattern", "");
        let anchored = format!(r"\A(?:{})\z", re2_classes(&pattern));
        let re = regex::Regex::new(&anchored).map_err(|e| {
            anyhow::anyhow!(
                "RegexFullMatch `{}`: pattern {pattern:?}: {e}",
                n.proto.name
            )
        })?;
        Ok(vec![x.map(|s| re.is_match(s)).into_tensor()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_are_ascii() {
        let full = |p: &str, s: &str| {
            let re = regex::Regex::new(&format!(r"\A(?:{})\z", re2_classes(p))).unwrap();
            re.is_match(s)
        };
        assert!(full(r"\w+", "abc_1"));
        assert!(!full(r"\w+", "é"));
        assert!(full(r"\W", "é"));
        assert!(full(r"[\w.-]+", "a.b-c"));
        assert!(!full(r"[^\d]", "7"));
        assert!(full(r"\d\s\S", "1 x"));
        assert!(full(r"[[:alpha:]\d]+", "a1"));
        assert!(full(r"www\.[\w.-]+\.\bcom\b", "www.google.com"));
        assert!(full(r"[]a]+", "]a"));
    }
}
