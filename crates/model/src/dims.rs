//! Sizes for the symbolic dims of generated inputs, before defaulting to 1: what the model says (ultralytics'
//! `imgsz` metadata; its weights, position tables and the files beside it, [`super::dims_model`]), then what real
//! models of that input kind use — batch 1, image spatial dims 320 (a multiple of
//! 32 that detectors, classifiers and OCR recognisers accept; a text line of fixed height gets width 320; a square
//! image whose other side is fixed gets the same size), sequences 128 — each with the reason, so the report can say
//! where every dim came from. A dim none of these covers is 1, said in a note.

use prost::Message;

use super::{Dim, Graph, ValueInfo};

/// The reason given for an image side chosen with nothing to go on (checked against the runtime, see
/// `pipeline::prepare`).
pub const GUESSED_IMAGE: &str = "a common vision input size (a multiple of 32)";

/// The reason given for a sequence length chosen from the dim's name (checked against the runtime like images).
pub const GUESSED_LENGTH: &str = "a typical sequence length";

/// Sequence lengths tried in order when ONNX Runtime rejects 128 (audio frames of 512 samples at 16 kHz, 1 s of
/// audio, token windows).
pub const LENGTHS: [usize; 6] = [512, 256, 64, 1024, 16000, 32];

/// Image sizes (height, width) real models use, tried in order when ONNX Runtime rejects the first guess.
pub const IMAGE_SIZES: [(usize, usize); 6] = [
    (48, 320),
    (32, 320),
    (64, 256),
    (224, 224),
    (640, 640),
    (96, 384),
];

/// A size chosen for a symbolic dim, and why.
#[derive(Clone, Debug)]
pub struct Chosen {
    pub value: usize,
    pub from: String,
}

/// What the model's metadata says about its input size.
#[derive(Clone, Debug, Default)]
pub struct Hints {
    /// ultralytics' `imgsz`: (height, width).
    pub imgsz: Option<(usize, usize)>,
    /// What the model's weights and the files beside it say.
    pub model: super::dims_model::FromModel,
    /// Positions a decoder needs beyond its prompt (the past, and the tokens of the steps after the first): a
    /// prompt's length bounded by a position table leaves room for them.
    pub room: usize,
}

#[derive(Clone, PartialEq, Message)]
struct MetadataOnly {
    #[prost(message, repeated, tag = "14")]
    metadata_props: Vec<tract_onnx::pb::StringStringEntryProto>,
}

impl Hints {
    /// Reads the model's `metadata_props` (nothing else is decoded).
    pub fn of(graph: &Graph) -> Hints {
        let meta = MetadataOnly::decode(graph.bytes.as_slice()).unwrap_or_default();
        let imgsz = meta
            .metadata_props
            .iter()
            .find(|p| p.key == "imgsz")
            .and_then(|p| parse_imgsz(&p.value));
        Hints {
            imgsz,
            model: super::dims_model::FromModel::of(graph),
            room: 0,
        }
    }
}

/// `[640, 640]`, `640` or `(320, 320)`.
fn parse_imgsz(v: &str) -> Option<(usize, usize)> {
    let nums: Vec<usize> = v
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .filter(|&n| (1..=16384).contains(&n))
        .collect();
    match nums.as_slice() {
        [s] => Some((*s, *s)),
        [h, w] => Some((*h, *w)),
        _ => None,
    }
}

/// The spatial axes (height, width) of a 4-D float input laid out NCHW or NHWC (channels fixed at 1–4).
pub fn spatial_axes(info: &ValueInfo) -> Option<(usize, usize)> {
    let dims = info.dims.as_ref().filter(|d| d.len() == 4)?;
    if !info.dtype.is_some_and(|d| d.is_float()) {
        return None;
    }
    let channels = |a: usize| match dims[a] {
        Dim::Fixed(c) if (1..=4).contains(&c) => Some(c as usize),
        _ => None,
    };
    image_axes(channels(1), channels(3))
}

/// The (height, width) axes of a rank-4 image given the sizes of axes 1 and 3 when they could be channels (1–4):
/// the one candidate, or — both plausible, as in a 3×3×3 image — the axis of size 3, else NCHW.
pub fn image_axes(axis1: Option<usize>, axis3: Option<usize>) -> Option<(usize, usize)> {
    match (axis1, axis3) {
        (Some(_), None) => Some((2, 3)),
        (None, Some(_)) => Some((1, 2)),
        (Some(a), Some(b)) if b == 3 && a != 3 => Some((1, 2)),
        (Some(_), Some(_)) => Some((2, 3)),
        (None, None) => None,
    }
}

fn fixed(info: &ValueInfo, axis: usize) -> Option<usize> {
    match info.dims.as_ref()?.get(axis)? {
        Dim::Fixed(v) if *v > 0 => Some(*v as usize),
        _ => None,
    }
}

/// The size for `axis` of `info` (a symbolic or unknown dim named `symbol` when it has a name).
pub fn choose(hints: &Hints, info: &ValueInfo, axis: usize, symbol: Option<&str>) -> Chosen {
    let name = symbol.unwrap_or("").to_lowercase();
    let rank = info.dims.as_ref().map(Vec::len).unwrap_or(0);
    let chosen = |value: usize, from: &str| Chosen {
        value,
        from: from.to_string(),
    };
    if (axis == 0 && rank >= 2) || name.contains("batch") || name == "n" {
        return chosen(1, "batch");
    }
    let stated = hints.model.by_axis.get(&(info.name.clone(), axis));
    if let (Some(c), None) = (stated, hints.imgsz.filter(|_| axis >= 2)) {
        return c.clone();
    }
    let spatial = spatial_axes(info).or_else(|| hints.model.spatial.get(&info.name).copied());
    if let Some((h, w)) = spatial.filter(|(h, w)| axis == *h || axis == *w) {
        let (is_h, other) = (axis == h, if axis == h { w } else { h });
        if let Some((mh, mw)) = hints.imgsz {
            return chosen(if is_h { mh } else { mw }, "the model's imgsz metadata");
        }
        return match fixed(info, other) {
            Some(f) if !is_h && f <= 128 => {
                let w = (4 * f).max(320).div_ceil(32) * 32;
                chosen(w, "a text-line width for this fixed height")
            }
            Some(f) => chosen(f, "square, like the fixed other side"),
            None => chosen(320, GUESSED_IMAGE),
        };
    }
    let sequence = [
        "seq", "len", "token", "time", "step", "frame", "word", "sentence", "sample", "audio",
        "wav", "signal", "phoneme", "char",
    ];
    if sequence.iter().any(|k| name.contains(k)) {
        return match &hints.model.max_len {
            Some((rows, from)) if *rows < 128 && hints.room == 0 => chosen(*rows, from),
            Some((rows, from)) if *rows < 128 + hints.room => {
                let room = hints.room;
                let left = rows.saturating_sub(room).max(1);
                chosen(
                    left,
                    &format!("{from}, less {room} for the past and the steps"),
                )
            }
            _ => chosen(128, GUESSED_LENGTH),
        };
    }
    chosen(1, "no better guess")
}

/// Whether a dim name is a KV cache's past length.
fn is_past(name: &str) -> bool {
    name.contains("past") || name.contains("cache_len")
}

/// Whether a dim name is a decoder's total length (past + new tokens).
fn is_total(name: &str) -> bool {
    name.contains("total") || name.contains("present") || name.contains('+')
}

/// KV-cache decoders' dims: a past length (`past_sequence_length`) is `--past` (0: a first prompt); a total length
/// (`total_sequence_length`, or a sum such as `past_sequence_length + 1`) is the past plus the new tokens, so the
/// attention mask and the cache agree. `known` gives sizes already set or chosen. `None`: not a decoder dim.
pub fn decoder(symbol: &str, past: usize, known: &dyn Fn(&str) -> Option<usize>) -> Option<Chosen> {
    let name = symbol.to_lowercase();
    if symbol.contains('+') {
        let mut sum = 0;
        for term in symbol.split('+').map(str::trim) {
            sum += match term.parse::<usize>() {
                Ok(v) => v,
                Err(_) if is_past(&term.to_lowercase()) => past,
                Err(_) => known(term).unwrap_or(128),
            };
        }
        return Some(Chosen {
            value: sum,
            from: "the sum it names (past + new tokens)".into(),
        });
    }
    if is_past(&name) {
        let from = format!("the KV cache's past length (--past {past}; 0 is a first prompt)");
        return Some(Chosen { value: past, from });
    }
    if is_total(&name) {
        let new = ["sequence_length", "seq_len", "sequence", "seq"]
            .iter()
            .find_map(|s| known(s))
            .unwrap_or(128);
        return Some(Chosen {
            value: past + new,
            from: format!("past {past} + {new} new tokens"),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    fn info(dims: Vec<Dim>) -> ValueInfo {
        ValueInfo {
            name: "x".into(),
            dtype: Some(DType::F32),
            dims: Some(dims),
            format: None,
        }
    }

    fn sym(s: &str) -> Dim {
        Dim::Symbolic(s.into())
    }

    #[test]
    fn image_dims_follow_metadata_then_layout() {
        let yolo = info(vec![sym("b"), Dim::Fixed(3), sym("h"), sym("w")]);
        let meta = Hints {
            imgsz: parse_imgsz("[320, 416]"),
            ..Default::default()
        };
        assert_eq!(choose(&meta, &yolo, 2, Some("h")).value, 320);
        assert_eq!(choose(&meta, &yolo, 3, Some("w")).value, 416);
        assert_eq!(choose(&Hints::default(), &yolo, 0, Some("b")).value, 1);
        assert_eq!(choose(&Hints::default(), &yolo, 3, Some("w")).value, 320);
        let ocr = info(vec![sym("b"), Dim::Fixed(3), Dim::Fixed(48), sym("w")]);
        let c = choose(&Hints::default(), &ocr, 3, Some("w"));
        assert_eq!(
            (c.value, c.from.as_str()),
            (320, "a text-line width for this fixed height")
        );
        let nhwc = info(vec![sym("b"), sym("h"), Dim::Fixed(224), Dim::Fixed(3)]);
        assert_eq!(choose(&Hints::default(), &nhwc, 1, Some("h")).value, 224);
    }

    #[test]
    fn decoder_dims_follow_the_past_and_the_new_tokens() {
        let known = |n: &str| (n == "sequence_length").then_some(12);
        let d = |s: &str, past| decoder(s, past, &known).map(|c| c.value);
        assert_eq!(d("past_sequence_length", 5), Some(5));
        assert_eq!(d("total_sequence_length", 5), Some(17));
        assert_eq!(d("past_sequence_length + 1", 4), Some(5));
        assert_eq!(d("past_sequence_length + sequence_length", 4), Some(16));
        assert_eq!(d("sequence_length", 4), None);
        assert_eq!(d("batch_size", 4), None);
    }

    #[test]
    fn sequences_and_unknowns() {
        let ids = info(vec![sym("batch"), sym("sequence_length")]);
        assert_eq!(
            choose(&Hints::default(), &ids, 1, Some("sequence_length")).value,
            128
        );
        let odd = info(vec![Dim::Fixed(1), sym("k")]);
        assert_eq!(choose(&Hints::default(), &odd, 1, Some("k")).value, 1);
        assert_eq!(parse_imgsz("640"), Some((640, 640)));
        assert_eq!(parse_imgsz("big"), None);
    }
}
