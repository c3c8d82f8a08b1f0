//! Introduced vs inherited error: every node of the target model evaluated on its own, fed with the *reference's*
//! values (rounded to the element type the target stores them in), so the error a node makes is separated from the
//! error it receives. All nodes go into one ONNX model of disconnected nodes — each input renamed to a graph input
//! of its own — so ONNX Runtime builds one session and runs every node once: the cost is one extra target run.
//! Nodes with control-flow bodies, and nodes whose inputs the reference could not compute, are left out (said per
//! node). Nodes run alone cannot be fused with their neighbours, so a node whose full-graph error is far above its
//! isolated error points at fusion.

use std::collections::{HashMap, HashSet};

use tract_onnx::pb::NodeProto;

mod chain;

use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::surgery::{self, base_name, decode};
use crate::model::types::{infer, BFLOAT16, FLOAT, FLOAT16};
use crate::model::Graph;
use crate::ort::{run_session, OrtRunner};
use crate::reference::Rounding;
use crate::spill::Values;
use crate::tensor::{DType, Tensor};

/// Prefix of the graph inputs of the isolated model.
const FEED: &str = "phantom_iso::";

fn float_dtype(code: i32) -> Option<DType> {
    match code {
        FLOAT => Some(DType::F32),
        FLOAT16 => Some(DType::F16),
        BFLOAT16 => Some(DType::Bf16),
        _ => None,
    }
}

fn known_dtype(code: i32) -> Option<DType> {
    let d = DType::from_onnx(code);
    (!matches!(d, DType::Other | DType::String)).then_some(d)
}

/// The element type a node reads `name` in: a value that is not a float has the type the reference computed it
/// in (exact: integers, booleans); a float one the type the target model gives it (float32, or a converted
/// model's float16/bfloat16 copy).
fn feed_dtype(name: &str, types: &HashMap<String, i32>, reference: &dyn Values) -> Option<DType> {
    match reference.dtype(base_name(name)) {
        Some(d) if !d.is_float() && d != DType::Other && d != DType::String => Some(d),
        _ => types.get(name).and_then(|&c| known_dtype(c)),
    }
}

/// The element type the target stores each float value of the original model in: its type in the target model,
/// or the type of the `_phantom_` copy the target's nodes read (inputs cast on entry, outputs cast on exit).
pub fn rounding(original: &Graph, target: &Graph) -> Result<Rounding> {
    // The element types need no weight decoded: the model without them, and their types.
    let skeleton = crate::model::skeleton::Skeleton::of(target)?;
    let types = infer(&skeleton.proto.graph.unwrap_or_default(), &skeleton.types);
    let mut map = Rounding::new();
    let names: HashSet<&str> = original
        .computed_values()
        .into_iter()
        .chain(original.inputs.iter().map(|i| i.name.as_str()))
        .chain(original.initializers.keys().map(String::as_str))
        .collect();
    for (name, &code) in &types {
        let Some(d) = float_dtype(code) else { continue };
        let base = base_name(name);
        if !names.contains(base) {
            continue;
        }
        // A low-precision copy wins over the float32 original (what the target's nodes actually read).
        let lower = map
            .get(base)
            .is_none_or(|cur: &DType| d.size() < cur.size());
        if lower {
            map.insert(base.to_string(), d);
        }
    }
    Ok(map)
}

/// The isolated model and how to feed it.
pub struct Isolated {
    pub graph: Graph,
    /// (graph input, original value it carries, element type the node reads).
    feeds: Vec<(String, String, DType)>,
    /// Nodes left out, with the reason.
    pub excluded: HashMap<String, String>,
}

/// How the isolated model is fed: each input the reference computed becomes a graph input of its own, read in the
/// type the target's node reads it in.
pub(super) struct Feeder<'a> {
    types: HashMap<String, i32>,
    inits: HashSet<String>,
    available: &'a dyn Values,
    /// (graph input, original value it carries, element type the node reads).
    feeds: Vec<(String, String, DType)>,
    feed_of: HashMap<String, String>,
}

impl Feeder<'_> {
    /// Whether `i` is read from the model itself (an initializer, or no input at all).
    pub(super) fn is_own(&self, i: &str) -> bool {
        i.is_empty() || self.inits.contains(i)
    }

    /// Whether the reference can feed input `i` (a value it computed, in a type the node can read).
    pub(super) fn feeds(&self, i: &str) -> bool {
        self.available.has(base_name(i)) && feed_dtype(i, &self.types, self.available).is_some()
    }

    /// The first input of `n` the reference cannot feed, by its original name.
    pub(super) fn missing<'n>(&self, n: &'n NodeProto) -> Option<&'n str> {
        (n.input.iter())
            .find(|i| !self.is_own(i) && !self.feeds(i))
            .map(|i| base_name(i))
    }

    /// Renames each input of `n` the reference feeds to its graph input (all must be fed: see [`Self::missing`]).
    pub(super) fn feed(&mut self, n: &mut NodeProto, fed: impl Fn(&str) -> bool) {
        for i in n.input.iter_mut().filter(|i| fed(i)) {
            if self.is_own(i) {
                continue;
            }
            let (types, available) = (&self.types, self.available);
            let feeds = &mut self.feeds;
            let feed = self.feed_of.entry(i.clone()).or_insert_with(|| {
                let f = format!("{FEED}{i}");
                let d = feed_dtype(i, types, available).expect("checked by missing");
                feeds.push((f.clone(), base_name(i).to_string(), d));
                f
            });
            *i = feed.clone();
        }
    }
}

/// Whether `n` holds a control-flow body.
fn has_body(n: &NodeProto) -> bool {
    n.attribute
        .iter()
        .any(|a| a.g.is_some() || !a.graphs.is_empty())
}

/// Builds the isolated model of `target`'s nodes that correspond to nodes of `original` (same name), for the values
/// the reference computed (`available`); a value the target computes with other nodes (a `--target-model` that
/// stores it in float16 and reads it back, or scales it) is computed by that chain of nodes ([`chain`]).
pub fn build(original: &Graph, target: &Graph, available: &dyn Values) -> Result<Isolated> {
    let mut proto = decode(target)?;
    let g = proto.graph.as_mut().expect("decoded models have a graph");
    let mut feeder = Feeder {
        types: infer(g, &HashMap::new()),
        inits: g.initializer.iter().map(|t| t.name.clone()).collect(),
        available,
        feeds: vec![],
        feed_of: HashMap::new(),
    };
    let wanted: HashSet<&str> = original.nodes.iter().map(|n| n.name.as_str()).collect();
    let blocked = crate::model::nchwc::blocked(target);
    let mut excluded = HashMap::new();
    let mut nodes = vec![];
    let all = std::mem::take(&mut g.node);
    for n in &all {
        if n.name.is_empty() || !wanted.contains(n.name.as_str()) {
            continue;
        }
        if has_body(n) {
            excluded.insert(n.name.clone(), "has a control-flow body".into());
            continue;
        }
        let relaid = |v: &String| blocked.contains(v.as_str());
        if n.domain == crate::model::nchwc::DOMAIN || n.input.iter().chain(&n.output).any(relaid) {
            let why = "it runs in ONNX Runtime's NCHWc blocked layout, which the reference's values are not in";
            excluded.insert(n.name.clone(), why.into());
            continue;
        }
        if let Some(base) = feeder.missing(n) {
            let why = format!("the reference has no value for its input `{base}`");
            excluded.insert(n.name.clone(), why);
            continue;
        }
        let mut n = n.clone();
        feeder.feed(&mut n, |_| true);
        nodes.push(n);
    }
    let computed: HashSet<String> = (nodes.iter().flat_map(|n| n.output.iter()))
        .map(|o| base_name(o).to_string())
        .collect();
    nodes.extend(chain::all(
        original,
        &all,
        (&computed, &blocked),
        &mut feeder,
    ));
    let Feeder { feeds, .. } = feeder;
    if nodes.is_empty() {
        // Nothing to run alone (a group of nodes the reference cannot feed): no model to build.
        return Ok(Isolated {
            graph: Graph {
                nodes: vec![],
                ..target.clone()
            },
            feeds,
            excluded,
        });
    }
    g.output = nodes
        .iter()
        .flat_map(|n| n.output.iter())
        .filter(|o| !o.is_empty() && !o.starts_with(chain::INSIDE))
        .map(|o| surgery::untyped_value(o))
        .collect();
    g.input = (feeds.iter())
        .map(|(f, _, d)| surgery::value_info(f, d.onnx_code(), None))
        .collect();
    g.value_info.clear();
    g.node = nodes;
    let path = target.path.with_extension("isolated.onnx");
    let graph = surgery::finish(&path, proto)?;
    Ok(Isolated {
        graph,
        feeds,
        excluded,
    })
}

/// `graph` split in topological order into graphs of consecutive nodes whose values (inputs and outputs, at half
/// their f64 size in `reference`: what ORT reads and writes in f32) take about `limit` bytes at most, so that one
/// isolated run never holds every value at once; one part when everything fits (a single node may exceed it).
pub fn parts(graph: &Graph, reference: &dyn Values, limit: usize) -> Vec<Graph> {
    let size = |v: &String| reference.nbytes(v) / 2;
    let mut parts: Vec<Vec<crate::model::Node>> = vec![vec![]];
    let mut bytes = 0;
    for n in &graph.nodes {
        let b: usize = n.inputs.iter().chain(&n.outputs).map(size).sum();
        if bytes + b > limit && parts.last().is_some_and(|p| !p.is_empty()) {
            parts.push(vec![]);
            bytes = 0;
        }
        bytes += b;
        parts.last_mut().expect("one part at least").push(n.clone());
    }
    match parts.len() {
        1 => vec![graph.clone()],
        _ => parts
            .into_iter()
            .map(|nodes| Graph {
                nodes,
                ..graph.clone()
            })
            .collect(),
    }
}

/// Runs every isolated node once on ONNX Runtime; returns the outputs by the original value names.
pub fn run(
    iso: &Isolated,
    ort: &OrtRunner,
    reference: &dyn Values,
    round: &Rounding,
) -> Result<HashMap<String, Tensor>> {
    let mut inputs = Inputs::default();
    for (feed, base, read) in &iso.feeds {
        let r = reference.tensor(base).ok_or_else(|| Error::Ort {
            reason: format!("isolating nodes: the reference value `{base}` is gone"),
        })?;
        let stored = match round.get(base) {
            Some(&d) if r.dtype().is_float() => r.cast(d).expect("float casts"),
            _ => r.into_owned(),
        };
        let t = if stored.dtype() == *read {
            stored
        } else {
            stored.cast(*read).ok_or_else(|| Error::Ort {
                reason: format!("isolating nodes: cannot feed `{base}` as {read}"),
            })?
        };
        inputs.tensors.push((feed.clone(), t));
    }
    let mut session = ort.session_for(&iso.graph)?;
    let mut out = HashMap::new();
    for (name, v) in run_session(&mut session, &inputs, &iso.graph)? {
        if let Ok(t) = v {
            out.insert(base_name(&name).to_string(), t);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn base_names() {
        assert_eq!(super::base_name("x_phantom_fp16"), "x");
        assert_eq!(super::base_name("a/b_phantom_fp32_12"), "a/b");
        assert_eq!(super::base_name("my_phantom_thing"), "my_phantom_thing");
    }
}
