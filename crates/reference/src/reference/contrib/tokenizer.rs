//! ONNX Runtime's `Tokenizer` (com.microsoft; skl2onnx writes it for scikit-learn's `CountVectorizer` and
//! `TfidfVectorizer`), as its CPU kernel computes it (onnxruntime/contrib_ops/cpu/tokenizer.cc). Each input string
//! gives one row of tokens:
//! - `separators` holding one empty string: every UTF-8 character is a token;
//! - `separators` (RE2 patterns): the text between matches, each pattern in turn splitting what the previous left;
//!   a piece shorter than `mincharnum` characters is dropped;
//! - `tokenexp` (an RE2 pattern): each match of at least `mincharnum` characters is a token (past a shorter one,
//!   the search moves on by one character).
//!
//! `mark` puts "\x02" before a row's tokens and "\x03" after them; `pad_value` fills each row to the longest. The
//! output is the input's shape [C] or [N, C] with the row length added (0 where no string has a token).
//!
//! Patterns compile with the `regex` crate, Perl classes made ASCII as RE2 has them
//! ([`super::regex_match::re2_classes`]). ONNX Runtime asks RE2 for the longest match at the leftmost position;
//! `regex` takes the first alternative that matches there. The two agree unless an alternative is a prefix of a
//! later one (`a|ab`), which skl2onnx's patterns (`[a-zA-Z0-9_]+`, single-character separators) never are.
//!
//! The row length depends on the strings: the node is typed where its input is known before the run, and
//! otherwise stood in for and run on the run's inputs ([`super::standin`]).

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::regex_match::re2_classes;
use super::strings::strings;
use super::util::{fact, int_opt, string};

pub(super) const TABLE: &[Row] = &[Row::new("Tokenizer", &Tokenizer)];

/// How the node cuts a string.
enum Cut {
    Chars,
    Separators(Vec<regex::Regex>),
    Tokens(regex::Regex),
}

fn compile(n: &Node, pattern: &str) -> TractResult<regex::Regex> {
    regex::Regex::new(&re2_classes(pattern)).map_err(|e| {
        anyhow::anyhow!(
            "Tokenizer `{}`: pattern `{pattern}` does not compile: {e}",
            n.proto.name
        )
    })
}

fn cut(n: &Node) -> TractResult<Cut> {
    let separators: Vec<String> = (n.proto.attribute.iter())
        .find(|a| a.name == "separators")
        .map(|a| {
            (a.strings.iter())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    if separators.len() == 1 && separators[0].is_empty() {
        return Ok(Cut::Chars);
    }
    if !separators.is_empty() {
        let compiled = separators.iter().map(|s| compile(n, s));
        return Ok(Cut::Separators(compiled.collect::<TractResult<_>>()?));
    }
    let exp = string(n, "tokenexp", "");
    anyhow::ensure!(
        !exp.is_empty(),
        "Tokenizer `{}`: neither `separators` nor `tokenexp` is given",
        n.proto.name
    );
    Ok(Cut::Tokens(compile(n, &exp)?))
}

/// The next character boundary after byte `at` of `s`.
fn next_char(s: &str, at: usize) -> usize {
    s[at..]
        .chars()
        .next()
        .map_or(s.len(), |c| at + c.len_utf8())
}

/// The pieces of `text` between the matches of `re`, each of at least `min` characters.
fn split<'t>(re: &regex::Regex, text: &'t str, min: usize) -> Vec<&'t str> {
    let (mut out, mut start) = (vec![], 0);
    while let Some(m) = re.find_at(text, start) {
        // An empty match at the end separates nothing more.
        if m.is_empty() && m.start() >= text.len() {
            break;
        }
        let piece = &text[start..m.start()];
        if piece.chars().count() >= min {
            out.push(piece);
        }
        start = match m.is_empty() {
            true => next_char(text, m.start()),
            false => m.end(),
        };
    }
    let tail = &text[start..];
    if tail.chars().count() >= min {
        out.push(tail);
    }
    out
}

/// The matches of `re` in `text` of at least `min` characters (and one at least).
fn matches<'t>(re: &regex::Regex, text: &'t str, min: usize) -> Vec<&'t str> {
    let (mut out, mut start) = (vec![], 0);
    while let Some(m) = re.find_at(text, start) {
        if !m.is_empty() && m.as_str().chars().count() >= min {
            out.push(m.as_str());
            start = m.end();
        } else if m.start() >= text.len() {
            break;
        } else {
            start = next_char(text, m.start());
        }
    }
    out
}

/// The tokens of one string.
fn tokens<'t>(c: &Cut, s: &'t str, min: usize) -> Vec<&'t str> {
    match c {
        Cut::Chars => (s.char_indices())
            .map(|(i, ch)| &s[i..i + ch.len_utf8()])
            .collect(),
        Cut::Separators(seps) => seps.iter().fold(vec![s], |row, re| {
            row.iter().flat_map(|t| split(re, t, min)).collect()
        }),
        Cut::Tokens(re) => matches(re, s, min),
    }
}

/// The output for input strings `x`.
fn tokenize(n: &Node, x: &tract_ndarray::ArrayD<String>) -> TractResult<Tensor> {
    anyhow::ensure!(
        matches!(x.ndim(), 1 | 2),
        "Tokenizer `{}`: input of rank {}: [C] or [N, C] allowed",
        n.proto.name,
        x.ndim()
    );
    let c = cut(n)?;
    let min = int_opt(n, "mincharnum").unwrap_or(1).max(0) as usize;
    let mark = n.int("mark", 0) != 0;
    let pad = string(n, "pad_value", "");
    let rows: Vec<Vec<&str>> = x.iter().map(|s| tokens(&c, s, min)).collect();
    let longest = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = match longest {
        0 => 0,
        k => k + 2 * usize::from(mark),
    };
    let mut out = Vec::with_capacity(rows.len() * width);
    for row in rows.iter().filter(|_| width > 0) {
        if mark {
            out.push("\u{2}".to_string());
        }
        out.extend(row.iter().map(|t| t.to_string()));
        if mark {
            out.push("\u{3}".to_string());
        }
        out.extend(std::iter::repeat_n(pad.clone(), longest - row.len()));
    }
    let mut shape = x.shape().to_vec();
    shape.push(width);
    Ok(tract_ndarray::ArrayD::from_shape_vec(shape, out)?.into_tensor())
}

struct Tokenizer;

impl Kernel for Tokenizer {
    fn facts(&self, n: &Node, _ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        anyhow::bail!(
            "Tokenizer `{}`: its output length is the most tokens a string holds, which the strings the model \
             reads decide",
            n.proto.name
        )
    }

    fn value_slots(&self) -> &'static [usize] {
        &[0]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let Some(x) = values.first().copied().flatten() else {
            return self.facts(n, ins);
        };
        fact(n, ins, 0)?;
        let y = tokenize(n, &strings(n, &[Some(x)], 0)?)?;
        Ok(vec![(String::datum_type(), y.shape().to_vec())])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        Ok(vec![tokenize(n, &strings(n, ins, 0)?)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, NodeProto};

    fn node(attrs: Vec<AttributeProto>) -> Node {
        Node::new(&NodeProto {
            op_type: "Tokenizer".into(),
            attribute: attrs,
            ..Default::default()
        })
    }

    fn text(name: &str, v: &str) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            s: v.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    fn int(name: &str, v: i64) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            i: v,
            ..Default::default()
        }
    }

    fn run(n: &Node, rows: &[&str]) -> Vec<String> {
        let x = tract_ndarray::ArrayD::from_shape_vec(
            vec![rows.len()],
            rows.iter().map(|s| s.to_string()).collect(),
        )
        .unwrap();
        let y = tokenize(n, &x).unwrap();
        y.to_plain_array_view::<String>()
            .unwrap()
            .iter()
            .cloned()
            .collect()
    }

    #[test]
    fn skl2onnx_token_expression_with_padding() {
        let n = node(vec![
            text("tokenexp", "[a-zA-Z0-9_]+"),
            text("pad_value", "#"),
            int("mincharnum", 1),
        ]);
        assert_eq!(
            run(&n, &["the cat, sat!", "a"]),
            ["the", "cat", "sat", "a", "#", "#"]
        );
    }

    #[test]
    fn separators_split_in_turn_and_marks_wrap_each_row_before_the_padding() {
        let mut sep = text("separators", "");
        sep.strings = vec![b" ".to_vec(), b",".to_vec()];
        let n = node(vec![
            sep,
            text("pad_value", "_"),
            int("mincharnum", 2),
            int("mark", 1),
        ]);
        assert_eq!(
            run(&n, &["ab,cd e", "xy"]),
            ["\u{2}", "ab", "cd", "\u{3}", "\u{2}", "xy", "\u{3}", "_"]
        );
    }

    #[test]
    fn one_empty_separator_cuts_characters() {
        let mut sep = text("separators", "");
        sep.strings = vec![vec![]];
        let n = node(vec![sep, text("pad_value", "#")]);
        assert_eq!(run(&n, &["hé", "x"]), ["h", "é", "x", "#"]);
    }
}
