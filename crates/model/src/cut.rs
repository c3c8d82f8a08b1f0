//! Cutting a set of nodes out of a model as a model of its own: every value the kept nodes read and do not compute
//! becomes a graph input (same name, shaped as the value the reference computed) or, when the input shapes alone
//! fix it, an initializer; the initializers they read come along (external data read in), and the outputs are those
//! of the nodes asked for.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use tract_onnx::pb::{tensor_proto::DataLocation, GraphProto, TensorProto};

use crate::error::{Error, Result};
use crate::proto::{stored_bytes, tensor_from_proto, tensor_to_proto};
use crate::skeleton::Skeleton;
use crate::surgery::{base_name, value_info};
use crate::tensor::DType;
use crate::types::infer;
use crate::{surgery, Graph};

/// One graph input of a cut: the value it carries and the element type the kept nodes read it in.
#[derive(Clone, Debug)]
pub struct Feed {
    /// The graph input (the value's name in the model cut from).
    pub name: String,
    /// The value of the original model it stands for (`x` for a converted model's `x_phantom_fp16`).
    pub base: String,
    pub dtype: DType,
}

/// A model cut out of another.
pub struct Cut {
    pub graph: Graph,
    pub feeds: Vec<Feed>,
    /// (graph output, the original value it stands for).
    pub outputs: Vec<(String, String)>,
}

/// How a cut is fed: each boundary value's shape (by its base name), and the value to embed as an initializer
/// instead of a graph input (values fixed by the input shapes, which tract needs as constants).
pub struct Boundary<'a> {
    pub shape_of: &'a dyn Fn(&str) -> Option<Vec<usize>>,
    pub embed: &'a dyn Fn(&Feed) -> Result<Option<crate::tensor::Tensor>>,
}

/// Cuts `keep` (node indices of `model`, any order) out of `model`; the outputs are those of the nodes in
/// `expose`. The cut is named `path`. Its initializers hold their data inline: the cut stands alone.
pub fn cut(
    model: &Graph,
    keep: &HashSet<usize>,
    expose: &HashSet<usize>,
    boundary: &Boundary,
    path: &Path,
) -> Result<Cut> {
    cut_as(model, (keep, expose), boundary, path, Weights::Inline)
}

/// How a cut holds the initializers it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// Data inline (external data read in): the cut stands alone.
    Inline,
    /// External data left where the model keeps it (`path` must then lie beside the model): a cut run at once
    /// copies none of those weights, and its bytes are not hashed (no report names it).
    Referenced,
}

/// [`cut`], its initializers held as `weights` says.
pub fn cut_as(
    model: &Graph,
    (keep, expose): (&HashSet<usize>, &HashSet<usize>),
    boundary: &Boundary,
    path: &Path,
    weights: Weights,
) -> Result<Cut> {
    // The model without its weights; only the initializers the cut reads are decoded (a model's weights are most
    // of its bytes: a cut of a few nodes does not copy them all).
    let mut skeleton = Skeleton::of(model)?;
    let mut proto = std::mem::take(&mut skeleton.proto);
    let mut g = proto.graph.take().unwrap_or_default();
    let types = infer(&g, &skeleton.types);
    let kept: Vec<&crate::Node> = model
        .nodes
        .iter()
        .filter(|n| keep.contains(&n.index))
        .collect();
    let inside: HashSet<&str> = kept
        .iter()
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .collect();
    let mut sub = GraphProto {
        name: "phantom_reduce".into(),
        ..Default::default()
    };
    let mut seen: HashSet<String> = HashSet::new();
    let mut feeds = vec![];
    for n in &kept {
        let mut node = std::mem::take(&mut g.node[n.source_index]);
        // A body's reads from the enclosing scope come in like the node's own inputs.
        for i in surgery::reads(&node)
            .into_iter()
            .filter(|i| !inside.contains(i.as_str()))
        {
            if !seen.insert(i.clone()) {
                continue;
            }
            match skeleton.take(model, &i) {
                Some(t) if weights == Weights::Referenced => sub.initializer.push(t?),
                Some(t) => sub.initializer.push(inlined(t?, model)?),
                None => {
                    let f = feed(&i, &types)?;
                    match (boundary.embed)(&f)? {
                        Some(t) => sub.initializer.push(tensor_to_proto(&i, &t)),
                        None => feeds.push(f),
                    }
                }
            }
        }
        if node.name.is_empty() {
            // The name phantom gave it in the model cut from (`Constant_1234`), not one by its place in the cut.
            node.name = n.name.clone();
        }
        sub.node.push(node);
    }
    sub.input = feeds
        .iter()
        .map(|f| value_info(&f.name, f.dtype.onnx_code(), (boundary.shape_of)(&f.base)))
        .collect();
    let mut outputs = vec![];
    for n in kept.iter().filter(|n| expose.contains(&n.index)) {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            sub.output.push(surgery::untyped_value(o));
            outputs.push((o.clone(), base_name(o).to_string()));
        }
    }
    let out = surgery::Header::of(&proto).model("phantom reduce", sub);
    let graph = match weights {
        Weights::Inline => surgery::finish(path, out)?,
        Weights::Referenced => surgery::finish_unnamed(path, out)?,
    };
    Ok(Cut {
        graph,
        feeds,
        outputs,
    })
}

fn feed(name: &str, types: &HashMap<String, i32>) -> Result<Feed> {
    let dtype = types
        .get(name)
        .map(|&c| DType::from_onnx(c))
        .filter(|d| !matches!(d, DType::Other | DType::String))
        .ok_or_else(|| {
            Error::Usage(format!(
                "the element type of `{name}` is unknown, so it cannot be fed"
            ))
        })?;
    Ok(Feed {
        name: name.to_string(),
        base: base_name(name).to_string(),
        dtype,
    })
}

/// The initializer with its data inline: external data read from beside `model` into `raw_data`, as stored (one
/// read, no decoding); a tensor whose bytes cannot be read so goes through the general decoder, which says why.
fn inlined(mut t: TensorProto, model: &Graph) -> Result<TensorProto> {
    if t.data_location != Some(DataLocation::External as i32) {
        return Ok(t);
    }
    match stored_bytes(&t, model.path.parent()) {
        Ok(Some(raw)) if shaped_bytes(&t) == Some(raw.len()) => {
            t.raw_data = raw;
            t.external_data.clear();
            t.data_location = None;
            Ok(t)
        }
        _ => {
            let host = tensor_from_proto(&t, model.path.parent())?;
            Ok(tensor_to_proto(&t.name, &host))
        }
    }
}

/// Bytes `t`'s dims need in its element type, where that type has a whole number of bytes per element.
fn shaped_bytes(t: &TensorProto) -> Option<usize> {
    let size = DType::from_onnx(t.data_type).size();
    let elems = t.dims.iter().try_fold(1usize, |acc, &d| {
        usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    })?;
    (size > 0 && crate::tensor::formats::Format::from_onnx(t.data_type).is_none())
        .then(|| elems.checked_mul(size))
        .flatten()
}
