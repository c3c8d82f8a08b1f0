//! ONNX's string ops for the reference, which tract cannot run: `StringConcat` (numpy broadcasting), `StringSplit`
//! (Python's `str.split`: on a delimiter, or on runs of whitespace with the ends stripped when the delimiter is
//! absent or empty; `maxsplit` counts splits from the left, none when absent or negative), `RegexFullMatch` (in
//! [`super::regex_match`]) and `StringNormalizer`.
//!
//! `StringNormalizer` follows the spec and ONNX Runtime: it takes a `[C]` or `[1, C]` tensor, drops the elements
//! that are stopwords (compared as they are with `is_case_sensitive`, else both sides folded to the case of
//! `case_change_action`, lower where it is `NONE`), changes the case of the rest, and gives `[""]` (`[[""]]`) when
//! nothing is left. Case changes are Rust's Unicode `to_lowercase`/`to_uppercase`, which is the default and
//! `en_US` locale's folding; locale-specific rules (Turkish dotted i, Lithuanian) are not applied. The ONNX
//! reference implementation's differences are not followed: it also strips accents (NFKD), drops stopwords inside
//! space-separated elements and drops empty elements.
//!
//! `StringSplit`'s output shape, and `StringNormalizer`'s when it has stopwords, depend on the input's value,
//! which must be known when the model is typed (a constant, or a graph input the run gives).

use tract_onnx::prelude::tract_ndarray::{ArrayD, IxDyn};
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{fact, opt, string};

/// Claimed in any domain: tract lacks the string ops.
pub(super) const TABLE: &[Row] = &[
    Row::any_domain("StringConcat", &Concat),
    Row::any_domain("StringSplit", &Split),
    Row::any_domain("RegexFullMatch", &super::regex_match::FullMatch),
    Row::any_domain("StringNormalizer", &Normalizer),
];

/// Input `slot` as an owned string array.
pub(super) fn strings(
    n: &Node,
    ins: &[Option<&Tensor>],
    slot: usize,
) -> TractResult<ArrayD<String>> {
    let t = opt(n, ins, slot)?;
    anyhow::ensure!(
        t.datum_type() == String::datum_type(),
        "{} `{}` expects strings at input {slot}, got {:?}",
        n.op(),
        n.proto.name,
        t.datum_type()
    );
    Ok(t.to_plain_array_view::<String>()?.to_owned())
}

/// The value of input `slot`, which must be known at typing time.
fn known<'a>(n: &Node, values: &[Option<&'a Tensor>], slot: usize) -> TractResult<&'a Tensor> {
    values.get(slot).copied().flatten().ok_or_else(|| {
        anyhow::anyhow!(
            "{} `{}`: its output shape depends on input {slot}, whose value must be known before the run",
            n.op(),
            n.proto.name
        )
    })
}

/// The numpy broadcast of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let at = |s: &[usize], i: usize| match i + s.len() >= r {
        true => s[i + s.len() - r],
        false => 1,
    };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Some(x),
            (1, y) => Some(y),
            _ => None,
        })
        .collect()
}

struct Concat;

impl Kernel for Concat {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        let (a, b) = (&fact(n, ins, 0)?.1, &fact(n, ins, 1)?.1);
        let shape = broadcast(a, b).ok_or_else(|| {
            anyhow::anyhow!(
                "StringConcat `{}`: {a:?} and {b:?} do not broadcast",
                n.proto.name
            )
        })?;
        Ok(vec![(String::datum_type(), shape)])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (a, b) = (strings(n, ins, 0)?, strings(n, ins, 1)?);
        let shape = broadcast(a.shape(), b.shape())
            .ok_or_else(|| anyhow::anyhow!("StringConcat `{}`: no broadcast", n.proto.name))?;
        let (a, b) = (a.broadcast(IxDyn(&shape)), b.broadcast(IxDyn(&shape)));
        let (a, b) = (a.unwrap(), b.unwrap());
        let out: Vec<String> = a
            .iter()
            .zip(b.iter())
            .map(|(x, y)| format!("{x}{y}"))
            .collect();
        Ok(vec![
            ArrayD::from_shape_vec(IxDyn(&shape), out)?.into_tensor()
        ])
    }
}

/// Python's `str.isspace` for one char (Rust's whitespace and the ASCII separators 0x1c–0x1f).
fn space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `s.split(delimiter, maxsplit)` (`delimiter` `None`: on whitespace runs).
fn split(s: &str, delimiter: Option<&str>, max: Option<usize>) -> Vec<String> {
    if let Some(d) = delimiter {
        return match max {
            Some(m) => s.splitn(m + 1, d).map(String::from).collect(),
            None => s.split(d).map(String::from).collect(),
        };
    }
    let mut out = vec![];
    let mut rest = s.trim_start_matches(space);
    while !rest.is_empty() {
        if max == Some(out.len()) {
            out.push(rest.to_string());
            break;
        }
        match rest.find(space) {
            Some(i) => {
                out.push(rest[..i].to_string());
                rest = rest[i..].trim_start_matches(space);
            }
            None => {
                out.push(rest.to_string());
                break;
            }
        }
    }
    out
}

struct Split;

impl Split {
    /// Every element of `x` split, as the node says.
    fn pieces(n: &Node, x: &Tensor) -> TractResult<Vec<Vec<String>>> {
        let delimiter = string(n, "delimiter", "");
        let delimiter = (!delimiter.is_empty()).then_some(delimiter.as_str());
        let max = usize::try_from(n.int("maxsplit", -1)).ok();
        anyhow::ensure!(
            x.datum_type() == String::datum_type(),
            "StringSplit `{}` expects strings, got {:?}",
            n.proto.name,
            x.datum_type()
        );
        Ok((x.to_plain_array_view::<String>()?.iter())
            .map(|s| split(s, delimiter, max))
            .collect())
    }

    fn width(pieces: &[Vec<String>]) -> usize {
        pieces.iter().map(Vec::len).max().unwrap_or(0)
    }
}

impl Kernel for Split {
    fn value_slots(&self) -> &'static [usize] {
        &[0]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let shape = fact(n, ins, 0)?.1.clone();
        let width = Self::width(&Self::pieces(n, known(n, values, 0)?)?);
        let mut wide = shape.clone();
        wide.push(width);
        Ok(vec![
            (String::datum_type(), wide),
            (i64::datum_type(), shape),
        ])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let x = opt(n, ins, 0)?;
        let pieces = Self::pieces(n, x)?;
        let width = Self::width(&pieces);
        let counts: Vec<i64> = pieces.iter().map(|p| p.len() as i64).collect();
        let mut flat = Vec::with_capacity(pieces.len() * width);
        for mut p in pieces {
            p.resize(width, String::new());
            flat.extend(p);
        }
        let mut wide = x.shape().to_vec();
        wide.push(width);
        Ok(vec![
            ArrayD::from_shape_vec(IxDyn(&wide), flat)?.into_tensor(),
            ArrayD::from_shape_vec(IxDyn(x.shape()), counts)?.into_tensor(),
        ])
    }
}

struct Normalizer;

/// The case change of a `StringNormalizer`.
#[derive(Clone, Copy, PartialEq)]
enum Case {
    Lower,
    Upper,
    Keep,
}

impl Case {
    fn apply(self, s: &str) -> String {
        match self {
            Case::Lower => s.to_lowercase(),
            Case::Upper => s.to_uppercase(),
            Case::Keep => s.to_string(),
        }
    }
}

impl Normalizer {
    /// The elements kept and changed, and whether the input is `[1, C]`.
    fn normalize(n: &Node, x: &Tensor) -> TractResult<(Vec<String>, bool)> {
        let shape = x.shape();
        let two = match shape {
            [_] => false,
            [1, _] => true,
            _ => anyhow::bail!(
                "StringNormalizer `{}` takes a [C] or [1, C] input, got {shape:?}",
                n.proto.name
            ),
        };
        let case = match string(n, "case_change_action", "NONE").as_str() {
            "LOWER" => Case::Lower,
            "UPPER" => Case::Upper,
            "NONE" => Case::Keep,
            other => anyhow::bail!(
                "StringNormalizer `{}`: unknown case_change_action {other:?}",
                n.proto.name
            ),
        };
        let sensitive = n.int("is_case_sensitive", 0) != 0;
        let fold = match (sensitive, case) {
            (true, _) => Case::Keep,
            (false, Case::Keep) => Case::Lower,
            (false, c) => c,
        };
        let stops: Vec<String> = (n.proto.attribute.iter())
            .filter(|a| a.name == "stopwords")
            .flat_map(|a| a.strings.iter())
            .map(|s| fold.apply(&String::from_utf8_lossy(s)))
            .collect();
        anyhow::ensure!(
            x.datum_type() == String::datum_type(),
            "StringNormalizer `{}` expects strings, got {:?}",
            n.proto.name,
            x.datum_type()
        );
        let kept = (x.to_plain_array_view::<String>()?.iter())
            .filter(|s| !stops.contains(&fold.apply(s)))
            .map(|s| case.apply(s))
            .collect();
        Ok((kept, two))
    }

    fn shape(kept: usize, two: bool) -> Vec<usize> {
        let c = kept.max(1);
        match two {
            true => vec![1, c],
            false => vec![c],
        }
    }
}

impl Kernel for Normalizer {
    fn value_slots(&self) -> &'static [usize] {
        &[0]
    }

    fn facts_valued(
        &self,
        n: &Node,
        ins: &[Option<&Fact>],
        values: &[Option<&Tensor>],
    ) -> TractResult<Vec<Fact>> {
        let shape = &fact(n, ins, 0)?.1;
        let stopwords = n.proto.attribute.iter().any(|a| a.name == "stopwords");
        let (kept, two) = match (stopwords, shape.as_slice()) {
            (false, [c]) => (*c, false),
            (false, [1, c]) => (*c, true),
            _ => {
                let (kept, two) = Self::normalize(n, known(n, values, 0)?)?;
                (kept.len(), two)
            }
        };
        Ok(vec![(String::datum_type(), Self::shape(kept, two))])
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let (mut kept, two) = Self::normalize(n, opt(n, ins, 0)?)?;
        if kept.is_empty() {
            kept.push(String::new());
        }
        let shape = Self::shape(kept.len(), two);
        Ok(vec![
            ArrayD::from_shape_vec(IxDyn(&shape), kept)?.into_tensor()
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, NodeProto};

    fn node(op: &str, attributes: Vec<AttributeProto>) -> Node {
        Node::new(&NodeProto {
            op_type: format!("phantom.{op}"),
            name: "n".into(),
            input: vec!["x".into(), "y".into()],
            output: vec!["a".into(), "b".into()],
            attribute: attributes,
            ..Default::default()
        })
    }

    fn text(name: &str, s: &str) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            r#type: 3,
            s: s.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    fn tensor(shape: &[usize], v: &[&str]) -> Tensor {
        let v = v.iter().map(|s| s.to_string()).collect();
        ArrayD::from_shape_vec(IxDyn(shape), v)
            .unwrap()
            .into_tensor()
    }

    fn texts(t: &Tensor) -> Vec<String> {
        t.to_plain_array_view::<String>()
            .unwrap()
            .iter()
            .cloned()
            .collect()
    }

    #[test]
    fn concat_broadcasts() {
        let (x, y) = (tensor(&[2, 1], &["a", "b"]), tensor(&[3], &["1", "2", "3"]));
        let out = Concat
            .eval(&node("StringConcat", vec![]), &[Some(&x), Some(&y)])
            .unwrap();
        assert_eq!(out[0].shape(), &[2, 3]);
        assert_eq!(texts(&out[0]), ["a1", "a2", "a3", "b1", "b2", "b3"]);
    }

    #[test]
    fn split_follows_python() {
        assert_eq!(split("  a  b c ", None, None), ["a", "b", "c"]);
        assert_eq!(split("  a  b c ", None, Some(1)), ["a", "b c "]);
        assert_eq!(split("", None, None), Vec::<String>::new());
        assert_eq!(split("", Some("-"), None), [""]);
        assert_eq!(split("o-n--", Some("-"), None), ["o", "n", "", ""]);
        assert_eq!(split("a.b.c", Some("."), Some(1)), ["a", "b.c"]);
        assert_eq!(split("a.b.c", Some("."), Some(0)), ["a.b.c"]);
    }

    #[test]
    fn split_pads_and_counts() {
        let x = tensor(&[2], &["a b", "c"]);
        let out = Split
            .eval(&node("StringSplit", vec![]), &[Some(&x)])
            .unwrap();
        assert_eq!(out[0].shape(), &[2, 2]);
        assert_eq!(texts(&out[0]), ["a", "b", "c", ""]);
        assert_eq!(
            out[1]
                .to_plain_array_view::<i64>()
                .unwrap()
                .as_slice()
                .unwrap(),
            [2, 1]
        );
    }

    #[test]
    fn normalizer_drops_stopwords_and_changes_case() {
        let stops = AttributeProto {
            name: "stopwords".into(),
            r#type: 8,
            strings: vec![b"monday".to_vec()],
            ..Default::default()
        };
        let n = node(
            "StringNormalizer",
            vec![stops, text("case_change_action", "UPPER")],
        );
        let x = tensor(&[1, 3], &["Monday", "tuesday", ""]);
        let out = Normalizer.eval(&n, &[Some(&x)]).unwrap();
        assert_eq!(out[0].shape(), &[1, 2]);
        assert_eq!(texts(&out[0]), ["TUESDAY", ""]);
        let x = tensor(&[2], &["MONDAY", "monday"]);
        let out = Normalizer.eval(&n, &[Some(&x)]).unwrap();
        assert_eq!(texts(&out[0]), [""]);
    }
}
