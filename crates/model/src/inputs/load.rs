//! Inputs loaded from files (`.npy`, `.npz`, `test_data_set` directories, images), each given once, checked
//! against the model's declaration.

use std::collections::HashMap;
use std::path::PathBuf;

use super::{InputSource, InputSpec};
use crate::error::{Error, Result};
use crate::tensor::formats::Format;
use crate::tensor::{DType, Tensor};
use crate::{Dim, Graph, ValueInfo};

/// Adds a loaded input, refusing a second value for the same input.
pub(super) fn put(
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

/// Loaded inputs by name, each with where it came from.
pub(super) type Loaded = HashMap<String, (Tensor, String)>;

/// The inputs loaded from `spec`'s sources, by name (a sequence's elements as `NAME[k]`), and the length of each
/// sequence a `SequenceProto` gave (which may be empty).
pub(super) fn load_sources(
    graph: &Graph,
    spec: &InputSpec,
) -> Result<(Loaded, HashMap<String, usize>)> {
    let mut m = HashMap::new();
    let mut lengths = HashMap::new();
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
    let sequences = super::sequences::declared(graph);
    let known = |name: &str| -> Result<()> {
        if graph.inputs.iter().any(|i| i.name == name)
            || super::sequences::owner(name, &sequences).is_some()
        {
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
                let t = crate::npy::read_npy(path)?;
                put(&mut m, name.clone(), t, format!("file {}", path.display()))?;
            }
            InputSource::Image { name, .. } => known(name)?,
            InputSource::Npz(path) => {
                for (name, t) in crate::npy::read_npz(path)? {
                    known(&name)?;
                    let origin = format!("file {}:{name}", path.display());
                    put(&mut m, name, t, origin)?;
                }
            }
            InputSource::TestDataSet(dir) => {
                test_data_set(graph, &sequences, dir, &mut m, &mut lengths)?
            }
        }
    }
    Ok((m, lengths))
}

/// The inputs in `test_data_set` directory `dir` (`input_N.pb`, in graph-input order or by their names; a sequence
/// input's `SequenceProto` as its elements, its length into `lengths`).
fn test_data_set(
    graph: &Graph,
    sequences: &HashMap<String, tract_onnx::pb::type_proto::Tensor>,
    dir: &std::path::Path,
    m: &mut Loaded,
    lengths: &mut HashMap<String, usize>,
) -> Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| Error::Io {
            path: dir.to_path_buf(),
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
    // A model without inputs (a Constant's test) has a test_data_set with outputs only.
    if files.is_empty() && !graph.inputs.is_empty() {
        return Err(Error::Input {
            name: dir.display().to_string(),
            reason: "no input_N.pb files in this directory".into(),
        });
    }
    for (k, f) in files.iter().enumerate() {
        if let Some(seq) = graph
            .inputs
            .get(k)
            .filter(|i| sequences.contains_key(&i.name))
        {
            let elements = sequence_file(f)?;
            lengths.insert(seq.name.clone(), elements.len());
            for (j, t) in elements.into_iter().enumerate() {
                let origin = format!("file {} (element {j})", f.display());
                put(m, crate::sequences::element(&seq.name, j), t, origin)?;
            }
            continue;
        }
        let (pname, t) = crate::proto::read_tensor_pb(f)?;
        let name = if !pname.is_empty() && graph.inputs.iter().any(|i| i.name == pname) {
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
        put(m, name, t, format!("file {}", f.display()))?;
    }
    Ok(())
}

/// The tensors of the serialized `SequenceProto` in file `f`; errors name the file.
fn sequence_file(f: &std::path::Path) -> Result<Vec<Tensor>> {
    let limit = crate::fsutil::input_budget() as u64;
    let bytes = crate::error::read_bounded(f, limit, "SequenceProto input")?;
    let bad = |reason: String| Error::Input {
        name: f.display().to_string(),
        reason,
    };
    let protos = crate::optional::sequence_of(&bytes).map_err(bad)?;
    (protos.iter())
        .map(|p| crate::proto::tensor_from_proto(p, f.parent()))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| bad(format!("an element cannot be read: {e}")))
}

/// The image given for input `name`, if any (decoded once its shape is known).
pub(super) fn image_for<'a>(spec: &'a InputSpec, name: &str) -> Option<&'a PathBuf> {
    spec.sources.iter().find_map(|s| match s {
        InputSource::Image { name: n, path } if n == name => Some(path),
        _ => None,
    })
}

pub(super) fn check_loaded(info: &ValueInfo, dtype: DType, t: &Tensor) -> Result<Tensor> {
    if t.dtype() != dtype {
        return Err(Error::Input {
            name: info.name.clone(),
            reason: format!("the file holds {} values, the model expects {dtype}: convert it (e.g. arr.astype(...))", t.dtype()),
        });
    }
    if let Some(f) = info.format {
        on_grid(info, f, t)?;
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

/// A given input of a narrow format (float8, int4...) holds only values of that format.
fn on_grid(info: &ValueInfo, f: Format, t: &Tensor) -> Result<()> {
    let wide = t.to_f64_array();
    match wide.iter().enumerate().find(|(_, &v)| !f.holds(v)) {
        None => Ok(()),
        Some((k, v)) => Err(Error::Input {
            name: info.name.clone(),
            reason: format!(
                "the model declares {}, and element {k} ({v}) is not a {} value: give values of that format \
                 (a TensorProto of that type, or values rounded to it)",
                f.name(),
                f.name()
            ),
        }),
    }
}
