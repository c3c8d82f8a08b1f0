//! onnxruntime-extensions' `BertTokenizer` (`ai.onnx.contrib`), as its CPU kernel computes it
//! (operators/tokenizer/bert_tokenizer.cc, basic_tokenizer.cc, base/string_utils.cc), not as Hugging Face's does:
//! - the vocabulary is `vocab_file`'s text cut at every `\r` and `\n`, empty pieces dropped, a token's id its index
//!   among the rest (a repeated token takes its last index);
//! - basic tokenization (`do_basic_tokenize`, default on): accents stripped only with `strip_accents` (Latin-1
//!   letters mapped, U+0300–U+036F dropped), lower-casing (`do_lower_case`, default on) by the kernel's own partial
//!   table, then CJK characters and punctuation made tokens of their own, white space cutting, control characters
//!   dropped, each class a fixed table of code points;
//!   without it, the text is cut at ASCII spaces only (a space after a space joins the next word);
//! - WordPiece: greedy longest match, continuations prefixed with `suffix_indicator`; a word longer than 100
//!   characters is `unk_token`, and where no piece matches, `unk_token` ends the word after the pieces found;
//! - one string: `[CLS] ids [SEP]`, the ids cut to `max_length − 2` when `max_length` > 2; two strings: `[CLS] ids
//!   [SEP] ids [SEP]`, never cut, type ids 0 then 1; the attention mask all ones;
//! - `offset_mapping`: byte offsets of the tokens as if joined by single spaces (the kernel's, not positions in
//!   the text), each string's list from (0, 0) to (0, 0), the lists concatenated and the first N rows kept, as the
//!   kernel writes them.
//!
//! Its outputs' length depends on the text: the node is typed where the text is known before the run, and
//! otherwise stood in for and run on the run's inputs ([`super::standin`]).

use std::collections::HashMap;

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::strings::strings;
use super::util::{fact, string};

pub(super) const TABLE: &[Row] = &[Row::new("BertTokenizer", &BertTokenizer)];

/// Whether phantom computes `n`: onnxruntime-extensions' `BertTokenizer`.
pub fn claims(n: &tract_onnx::pb::NodeProto) -> bool {
    n.domain == "ai.onnx.contrib" && n.op_type == "BertTokenizer"
}

/// The longest word WordPiece cuts (the kernel's `max_input_chars_per_word`).
const MAX_WORD: usize = 100;

/// The node's settings.
struct Settings {
    vocab: HashMap<Vec<u8>, i64>,
    lower: bool,
    basic: bool,
    chinese: bool,
    strip: bool,
    unk: String,
    suffix: String,
    max_length: i32,
    cls: i64,
    sep: i64,
}

/// A boolean attribute as the kernel reads it: true only when it is 1.
fn flag(n: &Node, name: &str, default: bool) -> bool {
    n.int(name, i64::from(default)) == 1
}

fn settings(n: &Node) -> TractResult<Settings> {
    let what = format!("BertTokenizer `{}`", n.proto.name);
    let raw = (n.proto.attribute.iter())
        .find(|a| a.name == "vocab_file")
        .map(|a| a.s.clone())
        .ok_or_else(|| anyhow::anyhow!("{what}: no `vocab_file` attribute"))?;
    let mut vocab = HashMap::new();
    let pieces = raw.split(|b| *b == b'\r' || *b == b'\n');
    for (id, t) in pieces.filter(|t| !t.is_empty()).enumerate() {
        vocab.insert(t.to_vec(), id as i64);
    }
    let id = |attr: &str, default: &str| {
        let t = string(n, attr, default);
        let found = vocab.get(t.as_bytes()).copied();
        found.ok_or_else(|| anyhow::anyhow!("{what}: its `{attr}` `{t}` is not in its vocabulary"))
    };
    for (attr, default) in [
        ("pad_token", "[PAD]"),
        ("mask_token", "[MASK]"),
        ("unk_token", "[UNK]"),
    ] {
        id(attr, default)?;
    }
    let (cls, sep) = (id("cls_token", "[CLS]")?, id("sep_token", "[SEP]")?);
    Ok(Settings {
        lower: flag(n, "do_lower_case", true),
        basic: flag(n, "do_basic_tokenize", true),
        chinese: flag(n, "tokenize_chinese_chars", true),
        strip: flag(n, "strip_accents", false),
        unk: string(n, "unk_token", "[UNK]"),
        suffix: string(n, "suffix_indicator", "##"),
        max_length: n.int("max_length", -1) as i32,
        vocab,
        cls,
        sep,
    })
}

fn in_ranges(c: u32, singles: &[u32], ranges: &[(u32, u32)]) -> bool {
    singles.contains(&c) || ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

fn is_cjk(c: u32) -> bool {
    in_ranges(
        c,
        &[],
        &[
            (0x4E00, 0x9FFF),
            (0x3400, 0x4DBF),
            (0x20000, 0x2A6DF),
            (0x2A700, 0x2B73F),
            (0x2B740, 0x2B81F),
            (0x2B820, 0x2CEAF),
            (0xF900, 0xFAFF),
            (0x2F800, 0x2FA1F),
        ],
    )
}

fn is_space(c: u32) -> bool {
    in_ranges(
        c,
        &[13, 32, 160, 8239, 8287, 12288],
        &[(9, 10), (8192, 8202)],
    )
}

fn is_punct(c: u32) -> bool {
    in_ranges(
        c,
        &[161, 167, 171, 187, 191, 894, 903, 12336, 12349],
        &[
            (33, 47),
            (58, 64),
            (91, 96),
            (123, 126),
            (182, 183),
            (8208, 8231),
            (8240, 8259),
            (8261, 8273),
            (8275, 8286),
            (12289, 12291),
            (12296, 12305),
            (12308, 12319),
        ],
    )
}

fn is_control(c: u32) -> bool {
    in_ranges(
        c,
        &[173, 907, 909, 930, 11930, 173790, 195102],
        &[
            (0, 8),
            (11, 12),
            (14, 31),
            (128, 159),
            (888, 889),
            (896, 899),
            (8203, 8207),
            (8234, 8238),
            (8288, 8302),
            (12020, 12030),
            (40957, 40958),
            (64110, 64111),
            (64218, 64254),
            (177973, 177982),
            (178206, 178207),
            (183970, 183982),
        ],
    )
}

/// The kernel's lower-casing: ASCII, Latin-1 (but ×), U+1F08–U+1F68 shifted by 32 (as the kernel does), Cyrillic
/// А–Я, and Greek Ι Κ Λ Μ Ν Ο Π.
fn to_lower(c: u32) -> u32 {
    let shifted = (0x41..=0x5A).contains(&c)
        || ((0xC0..=0xDE).contains(&c) && c != 0xD7)
        || (0x1F08..=0x1F68).contains(&c)
        || (0x410..=0x42F).contains(&c)
        || matches!(c, 0x399..=0x39D | 0x39F | 0x3A0);
    if shifted {
        c + 32
    } else {
        c
    }
}

/// The kernel's accent stripping of Latin-1 letters (U+00C0–U+00FF).
fn strip_accent(c: u32) -> u32 {
    const TABLE: &str = "AAAAAAÆCEEEEIIIIÐNOOOOO×ØUUUUYÞßaaaaaaæceeeeiiiiðnooooo÷øuuuuyþy";
    match c {
        192..=255 => TABLE.chars().nth((c - 192) as usize).map_or(c, u32::from),
        _ => c,
    }
}

/// Basic tokenization of `text` into words.
fn basic(s: &Settings, text: &str) -> Vec<Vec<u32>> {
    let mut chars: Vec<u32> = text.chars().map(u32::from).collect();
    if s.strip {
        chars.iter_mut().for_each(|c| *c = strip_accent(*c));
    }
    if s.lower {
        chars.iter_mut().for_each(|c| *c = to_lower(*c));
    }
    let (mut out, mut word) = (vec![], vec![]);
    for c in chars {
        let accent = s.strip && (0x300..=0x36F).contains(&c);
        let alone = (s.chinese && is_cjk(c)) || (!accent && is_punct(c));
        if alone || (!accent && is_space(c)) {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if alone {
                out.push(vec![c]);
            }
        } else if !accent && !is_control(c) {
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Without basic tokenization: cut at ASCII spaces, a space that meets no word joining the next one.
fn spaced(text: &str) -> Vec<Vec<u32>> {
    let (mut out, mut word) = (vec![], vec![]);
    for c in text.chars().map(u32::from) {
        if c == 32 && !word.is_empty() {
            out.push(std::mem::take(&mut word));
            continue;
        }
        word.push(c);
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn utf8(cs: &[u32]) -> String {
    cs.iter().filter_map(|&c| char::from_u32(c)).collect()
}

/// WordPiece pieces of `word`, appended to `out`.
fn wordpiece(s: &Settings, word: &[u32], out: &mut Vec<String>) {
    if word.len() > MAX_WORD {
        out.push(s.unk.clone());
        return;
    }
    let mut start = 0;
    while start < word.len() {
        let found = (start + 1..=word.len()).rev().find_map(|end| {
            let piece = match start {
                0 => utf8(&word[..end]),
                _ => format!("{}{}", s.suffix, utf8(&word[start..end])),
            };
            s.vocab
                .contains_key(piece.as_bytes())
                .then_some((piece, end))
        });
        let Some((piece, end)) = found else {
            out.push(s.unk.clone());
            return;
        };
        out.push(piece);
        start = end;
    }
}

/// The kernel's offsets of `pieces`: from (0, 0) to (0, 0), byte lengths as if joined by single spaces (its
/// unsigned arithmetic wraps, as a leading continuation's does).
fn offsets(pieces: &[String]) -> Vec<[i64; 2]> {
    let mut out = vec![[0, 0]];
    let mut at: u64 = 0;
    for p in pieces {
        let hashes = p.bytes().take_while(|b| *b == b'#').count() as u64;
        let len = p.len() as u64;
        if hashes > 0 {
            at = at.wrapping_sub(1);
            out.push([at as i64, at.wrapping_add(len - hashes) as i64]);
            at = at.wrapping_add(len - hashes + 1);
        } else if p == "[UNK]" {
            out.push([at as i64, at.wrapping_add(1) as i64]);
            at = at.wrapping_add(2);
        } else {
            out.push([at as i64, at.wrapping_add(len) as i64]);
            at = at.wrapping_add(len + 1);
        }
    }
    out.push([0, 0]);
    out
}

/// The four outputs for input strings `x` (only the first three when `offset_mapping` is not asked for).
fn tokenize(n: &Node, x: &tract_ndarray::ArrayD<String>) -> TractResult<Vec<Tensor>> {
    let what = format!("BertTokenizer `{}`", n.proto.name);
    anyhow::ensure!(
        matches!(x.len(), 1 | 2),
        "{what}: {} strings, where the kernel takes one or two",
        x.len()
    );
    let s = settings(n)?;
    let with_offsets = n.proto.output.len() > 3;
    anyhow::ensure!(
        s.basic
            || (n.proto.output.get(3..).unwrap_or_default())
                .iter()
                .all(String::is_empty),
        "{what}: with do_basic_tokenize = 0 onnxruntime-extensions leaves offset_mapping unwritten"
    );
    let (mut ids, mut rows) = (vec![], vec![]);
    for text in x.iter() {
        let words = if s.basic {
            basic(&s, text)
        } else {
            spaced(text)
        };
        let mut pieces = vec![];
        words.iter().for_each(|w| wordpiece(&s, w, &mut pieces));
        let unk = s.vocab.get(s.unk.as_bytes()).copied().unwrap_or(0);
        ids.push(
            (pieces.iter())
                .map(|p| s.vocab.get(p.as_bytes()).copied().unwrap_or(unk))
                .collect::<Vec<_>>(),
        );
        if s.basic {
            rows.extend(offsets(&pieces));
        }
    }
    let cap = (s.max_length > 2).then(|| s.max_length as usize - 2);
    if let (1, Some(cap)) = (ids.len(), cap) {
        ids[0].truncate(cap);
    }
    let (mut input_ids, mut types) = (vec![s.cls], vec![0]);
    for (k, part) in ids.iter().enumerate() {
        input_ids.extend(part);
        input_ids.push(s.sep);
        types.extend(std::iter::repeat_n(k as i64, part.len() + 1));
    }
    let len = input_ids.len();
    let vector = |v: Vec<i64>| tract_ndarray::Array1::from(v).into_dyn().into_tensor();
    let mut out = vec![vector(input_ids), vector(types), vector(vec![1; len])];
    if with_offsets {
        rows.resize(len, [0, 0]);
        let flat: Vec<i64> = rows.iter().flatten().copied().collect();
        out.push(tract_ndarray::ArrayD::from_shape_vec(vec![len, 2], flat)?.into_tensor());
    }
    Ok(out)
}

struct BertTokenizer;

impl Kernel for BertTokenizer {
    fn facts(&self, n: &Node, _ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        anyhow::bail!(
            "BertTokenizer `{}`: its outputs' length is the number of tokens, which the text the model reads \
             decides",
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
        Ok(y.iter()
            .map(|t| (i64::datum_type(), t.shape().to_vec()))
            .collect())
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        tokenize(n, &strings(n, ins, 0)?)
    }
}

#[cfg(test)]
mod tests;
