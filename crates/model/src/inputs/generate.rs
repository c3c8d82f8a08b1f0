//! Seeded random values that make sense for each input: ids valid for the table they index, masks of ones,
//! positions, sample rates, integers within the input's type.

use ndarray::{ArrayD, IxDyn};
use rand::RngExt;
use rand_distr::{Distribution, Normal};

use super::InputSpec;
use crate::error::{Error, Result};
use crate::tensor::formats::E8m0Round;
use crate::tensor::{DType, Tensor};
use crate::{Graph, ValueInfo};

/// The size of the table an integer input indexes, when it (possibly through casts and reshapes) feeds the
/// indices of a `Gather` whose data is an initializer, or the ids of an `EmbedLayerNormalization`.
pub(super) fn table_size(graph: &Graph, name: &str) -> Option<(i64, String)> {
    let consumers = graph.consumers();
    let mut frontier = vec![name.to_string()];
    for _ in 0..4 {
        let mut next = Vec::new();
        for v in &frontier {
            for &c in consumers
                .get(v.as_str())
                .map(|v| v.as_slice())
                .unwrap_or(&[])
            {
                let n = &graph.nodes[c];
                match n.op_type.as_str() {
                    "Gather" if n.inputs.get(1) == Some(v) => {
                        if let Some(init) = graph.initializers.get(&n.inputs[0]) {
                            return init.dims.first().map(|&d| (d, n.inputs[0].clone()));
                        }
                    }
                    // ONNX Runtime's fused BERT embedding: input_ids index the word table (input 2).
                    "EmbedLayerNormalization" if n.inputs.first() == Some(v) => {
                        let table = n.inputs.get(2)?;
                        if let Some(init) = graph.initializers.get(table) {
                            return init.dims.first().map(|&d| (d, table.clone()));
                        }
                    }
                    "Cast" | "Reshape" | "Unsqueeze" | "Squeeze" | "Flatten" | "Identity" => {
                        next.extend(n.outputs.iter().cloned())
                    }
                    _ => {}
                }
            }
        }
        frontier = next;
    }
    None
}

/// The integer range for a generated integer input: `--val-range` when given (refused beyond what the type, or
/// f64 on the way, holds exactly), else [0, 16).
pub(super) fn int_range(
    info: &ValueInfo,
    dtype: DType,
    range: Option<(f64, f64)>,
) -> Result<(i64, i64)> {
    let Some((lo, hi)) = range else {
        return Ok((0, 16));
    };
    let exact = (1u64 << 53) as f64;
    let (min, max) = match dtype {
        DType::I8 => (i8::MIN as f64, i8::MAX as f64),
        DType::U8 => (0.0, u8::MAX as f64),
        DType::I16 => (i16::MIN as f64, i16::MAX as f64),
        DType::U16 => (0.0, u16::MAX as f64),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::U32 => (0.0, u32::MAX as f64),
        DType::U64 => (0.0, exact),
        _ => (-exact, exact),
    };
    if lo < min || hi > max {
        return Err(Error::Input {
            name: info.name.clone(),
            reason: format!(
                "--val-range {lo},{hi} is beyond what a {dtype} input holds ([{min}, {max}]); give a range inside it"
            ),
        });
    }
    Ok((lo.floor() as i64, hi.ceil() as i64))
}

pub(super) fn random_input(
    graph: &Graph,
    info: &ValueInfo,
    dtype: DType,
    shape: &[usize],
    spec: &InputSpec,
    rng: &mut rand::rngs::StdRng,
) -> Result<(Tensor, String)> {
    if dtype == DType::String {
        return random_strings(graph, info, shape, spec, rng);
    }
    let n: usize = shape.iter().product();
    let lname = info.name.to_lowercase();
    let (values, origin): (Vec<f64>, String) = if dtype.is_float() {
        match spec.val_range {
            Some((lo, hi)) => (
                (0..n).map(|_| rng.random_range(lo..hi)).collect(),
                format!("uniform [{lo}, {hi}) seed {}", spec.seed),
            ),
            None => {
                let d = Normal::new(0.0, 1.0).expect("valid normal");
                (
                    (0..n).map(|_| d.sample(rng)).collect(),
                    format!("random N(0,1) seed {}", spec.seed),
                )
            }
        }
    } else if n == 1 && ["sr", "sample_rate", "sampling_rate"].contains(&lname.as_str()) {
        (
            vec![16000.0],
            "16000: the sample rate real callers pass".into(),
        )
    } else if dtype == DType::Bool || lname.contains("mask") {
        (vec![1.0; n], "ones (mask)".into())
    } else if let Some((size, table)) = table_size(graph, &info.name) {
        let hi = size.max(1);
        (
            (0..n).map(|_| rng.random_range(0..hi) as f64).collect(),
            format!("ids in [0, {hi}) for table `{table}`"),
        )
    } else if lname.contains("type") || lname.contains("segment") {
        (vec![0.0; n], "zeros (token types)".into())
    } else if lname.contains("position") {
        let last = shape.last().copied().unwrap_or(1).max(1);
        (
            (0..n).map(|i| (i % last) as f64).collect(),
            "positions 0..len".into(),
        )
    } else {
        let (lo, hi) = int_range(info, dtype, spec.val_range)?;
        (
            (0..n)
                .map(|_| rng.random_range(lo..hi.max(lo.saturating_add(1))) as f64)
                .collect(),
            format!("integers in [{lo}, {hi}) seed {}", spec.seed),
        )
    };
    let (values, origin) = match info.format {
        // A narrow format's input holds values of its grid (integers wrap into its range, floats saturate).
        Some(f) => (
            values
                .into_iter()
                .map(|v| f.cast(v, true, E8m0Round::Nearest))
                .collect(),
            format!("{origin}, rounded to {}", f.name()),
        ),
        None => (values, origin),
    };
    let arr = ArrayD::from_shape_vec(IxDyn(shape), values).expect("length matches shape");
    let t = Tensor::from_f64(dtype, arr).ok_or_else(|| Error::Input {
        name: info.name.clone(),
        reason: format!(
            "phantom cannot generate {dtype} inputs: pass one with --input {}=file.npy",
            info.name
        ),
    })?;
    Ok((t, origin))
}

/// Words per generated sentence, for a string input a `Tokenizer` cuts into words.
const SENTENCE_WORDS: (usize, usize) = (3, 8);

/// A string input drawn from the categories the model matches it against (see [`super::strings`]).
fn random_strings(
    graph: &Graph,
    info: &ValueInfo,
    shape: &[usize],
    spec: &InputSpec,
    rng: &mut rand::rngs::StdRng,
) -> Result<(Tensor, String)> {
    let Some(c) = super::strings::categories(graph, &info.name) else {
        return Err(Error::Input {
            name: info.name.clone(),
            reason: format!(
                "phantom draws string inputs from the categories the model matches them against, and no node \
                 reading it lists any: pass one with --input {}=file.npy",
                info.name
            ),
        });
    };
    let n: usize = shape.iter().product();
    // Text for a tokenizer: sentences of the vocabulary's words.
    let (lo, hi) = SENTENCE_WORDS;
    let picks = (0..n)
        .map(|_| {
            let k = if c.words {
                rng.random_range(lo..=hi)
            } else {
                1
            };
            (0..k)
                .map(|_| c.strings[rng.random_range(0..c.strings.len())].clone())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let arr = ArrayD::from_shape_vec(IxDyn(shape), picks).expect("length matches shape");
    let origin = match c.words {
        true => format!(
            "sentences of {lo} to {hi} words of `{}` ({} strings) seed {}",
            c.node,
            c.strings.len(),
            spec.seed
        ),
        false => format!(
            "categories of `{}` ({} strings) seed {}",
            c.node,
            c.strings.len(),
            spec.seed
        ),
    };
    Ok((Tensor::Str(arr), origin))
}
