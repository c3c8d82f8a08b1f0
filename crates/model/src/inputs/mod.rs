//! Model inputs: seeded random values that make sense for each input (ids valid for the table they index,
//! masks of ones), or values loaded from `.npy`, `.npz` or an ONNX `test_data_set_N` directory.

use std::collections::HashMap;
use std::path::PathBuf;

use rand::SeedableRng;
use serde::Serialize;

use super::{Dim, Graph, ValueInfo};

mod checks;
mod encoded;
mod generate;
mod load;
mod sequences;
mod strings;

use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};
use checks::{check_names, Budget};
use generate::random_input;
use load::{check_loaded, image_for, load_sources};

/// Where the values of one or more inputs come from.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputSource {
    /// `--input NAME=file.npy`
    Npy { name: String, path: PathBuf },
    /// `--input file.npz`: arrays named like the inputs.
    Npz(PathBuf),
    /// `--input test_data_set_0/`: `input_N.pb` in graph-input order.
    TestDataSet(PathBuf),
    /// `--input NAME=photo.jpg`: decoded, resized to the input's shape and normalised ([`super::image`]).
    Image { name: String, path: PathBuf },
}

/// How inputs are made; resolved from the command line.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct InputSpec {
    pub seed: u64,
    /// Uniform range for float inputs; N(0,1) when absent.
    pub val_range: Option<(f64, f64)>,
    /// Values for symbolic dims (`--dim batch=1`).
    pub dims: HashMap<String, i64>,
    /// KV-cache length for decoders' past inputs (`--past N`; 0 is a first prompt).
    #[serde(default)]
    pub past: usize,
    /// `--steps N`: the decoding steps after the prompt's (a prompt's length leaves room for them in a position
    /// table); 0 and 1 mean one pass.
    #[serde(default)]
    pub steps: usize,
    /// Whole shapes (`--shape input=1x3x224x224`).
    pub shapes: HashMap<String, Vec<usize>>,
    pub sources: Vec<InputSource>,
    /// `--samples N`: compare on N seeded input samples (seeds `seed`, `seed + 1`, …); 0 and 1 mean one.
    #[serde(default)]
    pub samples: usize,
    /// How image inputs' pixels become values (`--scale`, `--mean`, `--std`, `--bgr`).
    #[serde(default)]
    pub image: super::image::ImageNorm,
}

impl InputSpec {
    /// One spec per input sample, each with a label: several `test_data_set` directories are a sample each;
    /// otherwise `--samples N` gives seeds `seed`..`seed + N`. A single sample is this spec.
    pub fn per_sample(&self) -> Result<Vec<(String, InputSpec)>> {
        let dirs: Vec<&PathBuf> = self
            .sources
            .iter()
            .filter_map(|s| match s {
                InputSource::TestDataSet(d) => Some(d),
                _ => None,
            })
            .collect();
        if dirs.len() > 1 && self.samples > 1 {
            return Err(Error::Usage(
                "--samples and several test_data_set directories: give one or the other (each directory is a sample)"
                    .into(),
            ));
        }
        if dirs.len() > 1 {
            let others: Vec<InputSource> = self
                .sources
                .iter()
                .filter(|s| !matches!(s, InputSource::TestDataSet(_)))
                .cloned()
                .collect();
            return Ok(dirs
                .iter()
                .map(|d| {
                    let mut s = self.clone();
                    s.sources = others.clone();
                    s.sources.push(InputSource::TestDataSet((*d).clone()));
                    s.samples = 1;
                    (d.display().to_string(), s)
                })
                .collect());
        }
        Ok((0..self.samples.max(1) as u64)
            .map(|k| {
                let mut s = self.clone();
                s.seed = self.seed.wrapping_add(k);
                s.samples = 1;
                (format!("seed {}", s.seed), s)
            })
            .collect())
    }
}

/// One prepared input and how it was made.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct InputSummary {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// "file …", "random N(0,1) seed 0", "ids in [0, 30522) for `embeddings.word`", "ones (mask)"…
    pub origin: String,
    /// Where each symbolic dim's size came from ("`h` = 320: the model's imgsz metadata").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dims_from: Vec<String>,
    /// Elements that are NaN or ±inf in a given input (compared as values: a mask's −inf, a test's NaN).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub non_finite: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How many elements of a float tensor are NaN or ±inf (0 for other types).
pub fn non_finite(t: &Tensor) -> u64 {
    match t.dtype().is_float() {
        true => t.as_f64().iter().filter(|v| !v.is_finite()).count() as u64,
        false => 0,
    }
}

/// The prepared inputs in graph-input order.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub tensors: Vec<(String, Tensor)>,
    pub summaries: Vec<InputSummary>,
    /// Things the user should know (defaulted dims...).
    pub notes: Vec<String>,
    /// Image inputs whose height and width were guessed with nothing to go on (to check against the runtime).
    pub guessed_images: Vec<String>,
    /// Symbolic dims given a sequence length from their name alone (checked against the runtime too).
    pub guessed_lengths: Vec<String>,
    /// Unnamed dims (input, axis) set to 1 with nothing to go on: the sequence lengths are tried on them too when
    /// the runtime rejects 1 (an audio model's unnamed sample axis).
    pub guessed_axes: Vec<(String, usize)>,
}

impl Inputs {
    /// Records what `dims_from` says was guessed for input `name`: a note per dim nothing covered, and the image
    /// sizes, lengths and axes ONNX Runtime must settle.
    fn guessed(&mut self, name: &str, dims_from: &[String]) {
        self.notes.extend(
            dims_from
                .iter()
                .filter(|d| d.ends_with("no better guess"))
                .map(|d| {
                    format!(
                        "input {}: dim {d} (set it with --dim NAME=VALUE or --shape {}=...)",
                        name, name
                    )
                }),
        );
        if dims_from
            .iter()
            .any(|d| d.ends_with(super::dims::GUESSED_IMAGE))
        {
            self.guessed_images.push(name.to_string());
        }
        self.guessed_axes.extend(
            dims_from
                .iter()
                .filter(|d| d.ends_with("= 1: no better guess"))
                .filter_map(|d| d.strip_prefix("axis ")?.split(' ').next()?.parse().ok())
                .map(|axis: usize| (name.to_string(), axis)),
        );
        for d in dims_from
            .iter()
            .filter(|d| d.ends_with(super::dims::GUESSED_LENGTH))
        {
            let symbol = d.split('`').nth(1).unwrap_or_default().to_string();
            if !symbol.is_empty() && !self.guessed_lengths.contains(&symbol) {
                self.guessed_lengths.push(symbol);
            }
        }
    }
    /// Whether a dim was guessed with nothing to go on (an image size, a sequence length, an unnamed axis), so the
    /// runtime must settle it.
    pub fn has_guesses(&self) -> bool {
        !(self.guessed_images.is_empty()
            && self.guessed_lengths.is_empty()
            && self.guessed_axes.is_empty())
    }
}

/// Builds every graph input from `spec`.
pub fn prepare(graph: &Graph, spec: &InputSpec) -> Result<Inputs> {
    check_names(graph, spec)?;
    let (loaded, lengths) = load_sources(graph, spec)?;
    let mut out = Inputs::default();
    let mut dims = Dims {
        hints: super::dims::Hints {
            room: spec.past + spec.steps.saturating_sub(1),
            ..super::dims::Hints::of(graph)
        },
        chosen: HashMap::new(),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed);
    let mut budget = Budget {
        left: crate::fsutil::input_budget(),
    };
    let declared = sequences::declared(graph);
    let (infos, notes) = sequences::expanded(graph, &declared, &loaded, &lengths);
    out.notes.extend(notes);
    for info in &infos {
        // A sequence's element type may be left undeclared: a given element brings its own.
        let element_type = || {
            sequences::owner(&info.name, &declared)
                .and_then(|_| loaded.get(&info.name))
                .map(|(t, _)| t.dtype())
        };
        let dtype = info.dtype.or_else(element_type).ok_or_else(|| Error::Input {
            name: info.name.clone(),
            reason: "the model declares no tensor element type for it; phantom supports tensors, optional \
                     tensors and sequences of tensors"
                .into(),
        })?;
        let mut dims_from = vec![];
        let (t, origin) = match loaded.get(&info.name) {
            Some((t, origin)) => (check_loaded(info, dtype, t)?, origin.clone()),
            None if encoded::decoder_of(graph, info).is_some() => encoded::input(
                graph,
                info,
                image_for(spec, &info.name),
                spec.seed,
                &mut rng,
            )?,
            None => {
                let own = image_for(spec, &info.name)
                    .map(|p| crate::image::own_size(p, info))
                    .unwrap_or_default();
                let shape = resolve_shape(info, spec, &own, &mut dims, &mut dims_from)?;
                budget.take(info, &shape, &dims_from)?;
                match image_for(spec, &info.name) {
                    Some(path) => crate::image::load(path, info, dtype, &shape, &spec.image)?,
                    None => random_input(graph, info, dtype, &shape, spec, &mut rng)?,
                }
            }
        };
        out.guessed(&info.name, &dims_from);
        let non_finite = non_finite(&t);
        if non_finite > 0 {
            out.notes.push(format!(
                "input `{}`: {non_finite} of its {} elements are NaN or ±inf as given; they are compared as values",
                info.name,
                t.len()
            ));
        }
        out.summaries.push(InputSummary {
            name: info.name.clone(),
            dtype,
            shape: t.shape().to_vec(),
            origin,
            dims_from,
            non_finite,
        });
        out.tensors.push((info.name.clone(), t));
    }
    Ok(out)
}

/// The sizes chosen for symbolic dims so far (one size per symbol across inputs), and the model's hints.
struct Dims {
    hints: super::dims::Hints,
    chosen: HashMap<String, usize>,
}

/// The shape of input `info`: `--shape`, else each dim as declared, set with `--dim`, chosen for another input,
/// given by an image's own size (`own`: (axis, size)), or chosen now.
fn resolve_shape(
    info: &ValueInfo,
    spec: &InputSpec,
    own: &[(usize, usize)],
    dims_state: &mut Dims,
    dims_from: &mut Vec<String>,
) -> Result<Vec<usize>> {
    if let Some(s) = spec.shapes.get(&info.name) {
        if let Some(dims) = &info.dims {
            let fits = dims.len() == s.len()
                && dims
                    .iter()
                    .zip(s)
                    .all(|(d, &v)| !matches!(d, Dim::Fixed(f) if *f >= 0 && *f as usize != v));
            if !fits {
                return Err(Error::Input {
                    name: info.name.clone(),
                    reason: format!(
                        "wrong shape: --shape gives {s:?}, the model declares [{}]",
                        info.shape_text()
                    ),
                });
            }
        }
        return Ok(s.clone());
    }
    let dims = info.dims.as_ref().ok_or_else(|| Error::Input {
        name: info.name.clone(),
        reason: format!(
            "the model declares no shape: pass --shape {}=1x3x224x224 (or --input {}=file.npy)",
            info.name, info.name
        ),
    })?;
    let mut shape = Vec::with_capacity(dims.len());
    for (axis, d) in dims.iter().enumerate() {
        shape.push(match d {
            Dim::Fixed(v) if *v >= 0 => *v as usize,
            Dim::Symbolic(s) if spec.dims.contains_key(s) => spec.dims[s].max(0) as usize,
            Dim::Symbolic(s) if dims_state.chosen.contains_key(s) => dims_state.chosen[s],
            other if own.iter().any(|&(a, _)| a == axis) => {
                let v = own
                    .iter()
                    .find(|&&(a, _)| a == axis)
                    .map(|&(_, v)| v)
                    .unwrap_or(1);
                let label = match other {
                    Dim::Symbolic(s) => {
                        dims_state.chosen.insert(s.clone(), v);
                        format!("`{s}`")
                    }
                    _ => format!("axis {axis}"),
                };
                dims_from.push(format!("{label} = {v}: the image's own size"));
                v
            }
            other => {
                let (label, symbol) = match other {
                    Dim::Symbolic(s) => (format!("`{s}`"), Some(s.as_str())),
                    _ => (format!("axis {axis}"), None),
                };
                let known = |name: &str| {
                    spec.dims
                        .get(name)
                        .map(|&v| v.max(0) as usize)
                        .or_else(|| dims_state.chosen.get(name).copied())
                };
                let c = symbol
                    .and_then(|s| super::dims::decoder(s, spec.past, &known))
                    .unwrap_or_else(|| super::dims::choose(&dims_state.hints, info, axis, symbol));
                if let Some(s) = symbol {
                    dims_state.chosen.insert(s.to_string(), c.value);
                }
                dims_from.push(format!("{label} = {}: {}", c.value, c.from));
                c.value
            }
        });
    }
    Ok(shape)
}
