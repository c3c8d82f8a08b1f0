//! Model inputs: seeded random values that make sense for each input (ids valid for the table they index,
//! masks of ones), or values loaded from `.npy`, `.npz` or an ONNX `test_data_set_N` directory.

use std::collections::HashMap;
use std::path::PathBuf;

use ndarray::{ArrayD, IxDyn};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};
use serde::Serialize;

use super::{Dim, Graph, ValueInfo};
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct InputSummary {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// "file …", "random N(0,1) seed 0", "ids in [0, 30522) for `embeddings.word`", "ones (mask)"…
    pub origin: String,
    /// Where each symbolic dim's size came from ("`h` = 320: the model's imgsz metadata").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dims_from: Vec<String>,
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
}

/// Builds every graph input from `spec`.
pub fn prepare(graph: &Graph, spec: &InputSpec) -> Result<Inputs> {
    check_names(graph, spec)?;
    let loaded = load_sources(graph, spec)?;
    let mut out = Inputs::default();
    let mut dims = Dims {
        hints: super::dims::Hints::of(graph),
        chosen: HashMap::new(),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed);
    let mut budget = Budget {
        left: crate::fsutil::input_budget(),
    };
    for info in &graph.inputs {
        let dtype = info.dtype.ok_or_else(|| Error::Input {
            name: info.name.clone(),
            reason: "the model declares no tensor element type for it; phantom supports tensor inputs only".into(),
        })?;
        let mut dims_from = vec![];
        let (t, origin) = match loaded.get(&info.name) {
            Some((t, origin)) => (check_loaded(info, dtype, t)?, origin.clone()),
            None => {
                let shape = resolve_shape(info, spec, &mut dims, &mut dims_from)?;
                budget.take(info, &shape, &dims_from)?;
                match image_for(spec, &info.name) {
                    Some(path) => super::image::load(path, info, dtype, &shape, &spec.image)?,
                    None => random_input(graph, info, dtype, &shape, spec, &mut rng)?,
                }
            }
        };
        out.notes.extend(
            dims_from
                .iter()
                .filter(|d| d.ends_with("no better guess"))
                .map(|d| {
                    format!(
                        "input {}: dim {d} (set it with --dim NAME=VALUE or --shape {}=...)",
                        info.name, info.name
                    )
                }),
        );
        if dims_from
            .iter()
            .any(|d| d.ends_with(super::dims::GUESSED_IMAGE))
        {
            out.guessed_images.push(info.name.clone());
        }
        for d in dims_from
            .iter()
            .filter(|d| d.ends_with(super::dims::GUESSED_LENGTH))
        {
            let symbol = d.split('`').nth(1).unwrap_or_default().to_string();
            if !symbol.is_empty() && !out.guessed_lengths.contains(&symbol) {
                out.guessed_lengths.push(symbol);
            }
        }
        out.summaries.push(InputSummary {
            name: info.name.clone(),
            dtype,
            shape: t.shape().to_vec(),
            origin,
            dims_from,
        });
        out.tensors.push((info.name.clone(), t));
    }
    Ok(out)
}

/// Adds a loaded input, refusing a second value for the same input.
fn put(
    m: &mut HashMap<String, (Tensor, String)>,
    name: String,
    t: Tensor,
    origin: String,
) -> Result<()> {
    if let Some((_, first)) = m.get(&name) {
        return Err(Error::Input {
            reason: format!("given twice: by {first} and by {origin}; keep one"),
            name,
        });
    }
    m.insert(name, (t, origin));
    Ok(())
}

fn load_sources(graph: &Graph, spec: &InputSpec) -> Result<HashMap<String, (Tensor, String)>> {
    let mut m = HashMap::new();
    let dirs = spec
        .sources
        .iter()
        .filter(|s| matches!(s, InputSource::TestDataSet(_)))
        .count();
    if dirs > 1 {
        return Err(Error::Usage(format!(
            "{dirs} test_data_set directories are {dirs} input samples: only `phantom onnx` with one target \
             compares several samples; give one directory here"
        )));
    }
    let known = |name: &str| -> Result<()> {
        if graph.inputs.iter().any(|i| i.name == name) {
            return Ok(());
        }
        let names: Vec<_> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
        Err(Error::Input {
            name: name.into(),
            reason: format!("the model has no such input (it has: {})", names.join(", ")),
        })
    };
    for s in &spec.sources {
        match s {
            InputSource::Npy { name, path } => {
                known(name)?;
                let t = super::npy::read_npy(path)?;
                put(&mut m, name.clone(), t, format!("file {}", path.display()))?;
            }
            InputSource::Image { name, .. } => known(name)?,
            InputSource::Npz(path) => {
                for (name, t) in super::npy::read_npz(path)? {
                    known(&name)?;
                    let origin = format!("file {}:{name}", path.display());
                    put(&mut m, name, t, origin)?;
                }
            }
            InputSource::TestDataSet(dir) => {
                let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                    .map_err(|source| Error::Io {
                        path: dir.clone(),
                        source,
                    })?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("input_") && n.ends_with(".pb"))
                    })
                    .collect();
                files.sort_by_key(|p| {
                    let n = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                    n.trim_start_matches("input_")
                        .parse::<usize>()
                        .unwrap_or(usize::MAX)
                });
                if files.is_empty() {
                    return Err(Error::Input {
                        name: dir.display().to_string(),
                        reason: "no input_N.pb files in this directory".into(),
                    });
                }
                for (k, f) in files.iter().enumerate() {
                    let (pname, t) = super::proto::read_tensor_pb(f)?;
                    let name = if !pname.is_empty() && graph.inputs.iter().any(|i| i.name == pname)
                    {
                        pname
                    } else {
                        graph
                            .inputs
                            .get(k)
                            .map(|i| i.name.clone())
                            .ok_or_else(|| Error::Input {
                                name: f.display().to_string(),
                                reason: format!("the model has only {} inputs", graph.inputs.len()),
                            })?
                    };
                    put(&mut m, name, t, format!("file {}", f.display()))?;
                }
            }
        }
    }
    Ok(m)
}

/// What generated inputs may still take (they are made as f64 first).
struct Budget {
    left: usize,
}

impl Budget {
    /// Refuses an input of `shape` beyond what is left, with the numbers and the dims that made it.
    fn take(&mut self, info: &ValueInfo, shape: &[usize], dims_from: &[String]) -> Result<()> {
        let need = crate::tensor::checked_nbytes(shape, 8);
        if let Some(n) = need.filter(|&n| n <= self.left) {
            self.left -= n;
            return Ok(());
        }
        let need = need
            .map(crate::fsutil::fmt_size)
            .unwrap_or_else(|| "more bytes than can be addressed".into());
        let from = match dims_from {
            [] => String::new(),
            d => format!(" (dims: {})", d.join("; ")),
        };
        Err(Error::Input {
            name: info.name.clone(),
            reason: format!(
                "shape {shape:?}{from} needs {need} as f64, beyond what phantom allows inputs on this machine ({} \
                 left of {}, an eighth of its memory): set smaller sizes with --dim NAME=VALUE or --shape {}=…",
                crate::fsutil::fmt_size(self.left),
                crate::fsutil::fmt_size(crate::fsutil::input_budget()),
                info.name
            ),
        })
    }
}

/// `--shape` names a graph input, `--dim` a symbolic dim some input declares: a typo is an error, not ignored.
fn check_names(graph: &Graph, spec: &InputSpec) -> Result<()> {
    let inputs: Vec<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    if let Some(bad) = spec.shapes.keys().find(|k| !inputs.contains(&k.as_str())) {
        return Err(Error::Usage(format!(
            "--shape {bad}=…: the model has no input `{bad}` (it has: {})",
            inputs.join(", ")
        )));
    }
    let symbols: Vec<&str> = graph
        .inputs
        .iter()
        .flat_map(|i| i.dims.iter().flatten())
        .filter_map(|d| match d {
            Dim::Symbolic(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    if let Some(bad) = spec.dims.keys().find(|k| !symbols.contains(&k.as_str())) {
        let have = match symbols.is_empty() {
            true => "none: every input dim is fixed".to_string(),
            false => symbols.join(", "),
        };
        return Err(Error::Usage(format!(
            "--dim {bad}=…: no input has a symbolic dim `{bad}` (symbolic dims: {have})"
        )));
    }
    Ok(())
}

/// The image given for input `name`, if any (decoded once its shape is known).
fn image_for<'a>(spec: &'a InputSpec, name: &str) -> Option<&'a PathBuf> {
    spec.sources.iter().find_map(|s| match s {
        InputSource::Image { name: n, path } if n == name => Some(path),
        _ => None,
    })
}

fn check_loaded(info: &ValueInfo, dtype: DType, t: &Tensor) -> Result<Tensor> {
    if t.dtype() != dtype {
        return Err(Error::Input {
            name: info.name.clone(),
            reason: format!("the file holds {} values, the model expects {dtype}: convert it (e.g. arr.astype(...))", t.dtype()),
        });
    }
    if dtype.is_float() {
        let bad = t.as_f64().iter().filter(|v| !v.is_finite()).count();
        if bad > 0 {
            return Err(Error::Input {
                name: info.name.clone(),
                reason: format!(
                    "{bad} of its {} values are NaN or infinite; both runtimes would propagate them and every \
                     comparison downstream would be meaningless: clean the input (np.nan_to_num) and run again",
                    t.len()
                ),
            });
        }
    }
    if let Some(dims) = &info.dims {
        let fits = dims.len() == t.shape().len()
            && dims
                .iter()
                .zip(t.shape())
                .all(|(d, &s)| !matches!(d, Dim::Fixed(v) if *v >= 0 && *v as usize != s));
        if !fits {
            return Err(Error::Input {
                name: info.name.clone(),
                reason: format!(
                    "wrong shape: the file holds {:?}, the model declares [{}]",
                    t.shape(),
                    info.shape_text()
                ),
            });
        }
    }
    Ok(t.clone())
}

/// The sizes chosen for symbolic dims so far (one size per symbol across inputs), and the model's hints.
struct Dims {
    hints: super::dims::Hints,
    chosen: HashMap<String, usize>,
}

fn resolve_shape(
    info: &ValueInfo,
    spec: &InputSpec,
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
            other => {
                let (label, symbol) = match other {
                    Dim::Symbolic(s) => (format!("`{s}`"), Some(s.as_str())),
                    _ => (format!("axis {axis}"), None),
                };
                let c = super::dims::choose(&dims_state.hints, info, axis, symbol);
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

/// The size of the table an integer input indexes, when it (possibly through casts and reshapes) feeds the
/// indices of a `Gather` whose data is an initializer.
fn table_size(graph: &Graph, name: &str) -> Option<(i64, String)> {
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
fn int_range(info: &ValueInfo, dtype: DType, range: Option<(f64, f64)>) -> Result<(i64, i64)> {
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

fn random_input(
    graph: &Graph,
    info: &ValueInfo,
    dtype: DType,
    shape: &[usize],
    spec: &InputSpec,
    rng: &mut rand::rngs::StdRng,
) -> Result<(Tensor, String)> {
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
