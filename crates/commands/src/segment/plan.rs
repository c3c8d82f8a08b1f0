//! `phantom plan`: the graph cut in topological order into segments at cut points that few values cross, balanced
//! by weight bytes and node count, or sized to a memory budget. Weights and shapes are read from the model's
//! structure (initializer dims, external-data byte ranges, declared `value_info`): no weight is loaded.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use super::{
    store, transformed, BoundaryValue, ByteRange, Plan, Segment, StoredInput, Weight, MANIFEST,
    PLAN_SCHEMA,
};
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::surgery::decode;
use crate::model::surgery::value_info;
use crate::model::{self, Dim, Graph};
use crate::pipeline::CompareSettings;
use crate::runner::reference::{InputFact, ReferenceRunner};
use crate::tensor::DType;

/// How to cut.
#[derive(Clone, Copy, Debug)]
pub enum Split {
    /// `--segments K`.
    Segments(usize),
    /// `--segment-memory BYTES`: the fewest segments whose estimated reference peak fits.
    Memory(u64),
}

pub struct PlanSettings {
    pub compare: CompareSettings,
    pub out: PathBuf,
    pub force: bool,
    pub split: Split,
}

/// What the cutting needs to know about each node and value.
pub(super) struct Sizes {
    /// Per node, the initializers it reads.
    reads: Vec<Vec<String>>,
    weights: HashMap<String, Weight>,
    /// Per value computed by a node, its f64 bytes where the model declares a fixed shape.
    pub(super) value_f64: HashMap<String, u64>,
    /// Per cut position p (after node p): how many values computed at or before p are read after it, and their
    /// declared f64 bytes.
    crossing: Vec<(usize, u64)>,
}

/// Makes the plan and writes PLAN/ (refusing an existing one unless `force`).
pub fn plan(ps: &PlanSettings) -> Result<Plan> {
    let s = &ps.compare;
    let graph = model::load(&s.model)?;
    // The inputs `phantom onnx` would feed (dims ONNX Runtime accepts), so a plan compares what a whole run does.
    let (inputs, _) = crate::pipeline::prepared_inputs(&graph, s)?;
    let graph = transformed(graph, s, &inputs)?;
    crate::pipeline::logged("plan", &graph, &inputs);
    if graph.nodes.is_empty() {
        return Err(Error::Usage(format!(
            "{} has no node to cut into segments",
            graph.path.display()
        )));
    }
    let mut notes = inputs.notes.clone();
    let sizes = Sizes::of(&graph, &inputs, &mut notes)?;
    let cuts = match ps.split {
        Split::Segments(k) => cuts_for(&graph, &sizes, k)?,
        Split::Memory(budget) => cuts_within(&graph, &sizes, s, budget)?,
    };
    let segments = segments(&graph, &sizes, s, &cuts);
    let model = std::fs::canonicalize(&s.model).unwrap_or_else(|_| s.model.clone());
    let mut settings = s.clone();
    settings.model = model.clone();
    for t in settings.targets.iter_mut() {
        if let Some(m) = t.model.as_mut() {
            check_names(&graph, m, s, &inputs)?;
            *m = std::fs::canonicalize(&*m).unwrap_or_else(|_| m.clone());
        }
    }
    let stored: Vec<StoredInput> = inputs
        .summaries
        .iter()
        .enumerate()
        .map(|(k, i)| StoredInput {
            name: i.name.clone(),
            file: store::input_file(k),
            dtype: i.dtype,
            shape: i.shape.clone(),
            origin: i.origin.clone(),
        })
        .collect();
    notes.extend(super::low_precision_cuts_note(&graph, s, segments.len()));
    let unsized_values = segments
        .iter()
        .map(|g| g.estimate.values - g.estimate.sized_values)
        .sum::<usize>();
    if unsized_values > 0 {
        notes.push(format!(
            "{unsized_values} value(s) could not be sized before running: the memory estimates count their \
             weights and the sized values only"
        ));
    }
    let plan = Plan {
        schema: PLAN_SCHEMA.into(),
        phantom_version: env!("CARGO_PKG_VERSION").into(),
        model,
        model_sha256: graph.sha256.clone(),
        settings,
        inputs: stored,
        segments,
        nodes: graph.nodes.len(),
        notes,
        custom_op_libraries: crate::model::custom_ops::requested(),
    };
    let manifest = serde_json::to_vec_pretty(&plan)
        .map_err(|e| Error::Usage(format!("serializing the plan: {e}")))?;
    crate::fsutil::write_dir_atomically(&ps.out, ps.force, "a plan", |w| {
        for (k, (_, t)) in inputs.tensors.iter().enumerate() {
            w.write(&store::input_file(k), &model::npy::to_npy(t))?;
        }
        w.write(MANIFEST, &manifest)
    })?;
    Ok(plan)
}

/// `--target-model` is cut at the model's node names: every one must be there.
fn check_names(
    graph: &Graph,
    other: &std::path::Path,
    s: &CompareSettings,
    inputs: &Inputs,
) -> Result<()> {
    // Prepared as the reference is, so an If both inline names the same nodes.
    let target = transformed(model::load(other)?, s, inputs)?;
    let names: HashSet<&str> = target.nodes.iter().map(|n| n.name.as_str()).collect();
    match graph.nodes.iter().find(|n| !names.contains(n.name.as_str())) {
        None => Ok(()),
        Some(n) => Err(Error::Usage(format!(
            "--target-model {}: has no node `{}`; a plan cuts both models at the same node names (a perturbed or \
             re-exported copy works, a fused or renamed one does not: compare it whole with `phantom onnx`)",
            other.display(),
            n.name
        ))),
    }
}

impl Sizes {
    fn of(graph: &Graph, inputs: &Inputs, notes: &mut Vec<String>) -> Result<Sizes> {
        let proto = decode(graph)?;
        let g = proto.graph.unwrap_or_default();
        let mut weights = HashMap::new();
        for t in &g.initializer {
            let dtype = DType::from_onnx(t.data_type);
            let elems = t.dims.iter().map(|&d| d.max(0) as u64).product::<u64>();
            let external = (t.data_location == Some(1)).then(|| {
                let get = |k: &str| {
                    t.external_data
                        .iter()
                        .find(|e| e.key == k)
                        .map(|e| e.value.clone())
                };
                let num = |k: &str| get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
                ByteRange {
                    file: get("location").unwrap_or_default(),
                    offset: num("offset"),
                    length: num("length"),
                }
            });
            let w = Weight {
                name: t.name.clone(),
                dtype,
                dims: t.dims.clone(),
                bytes: elems * dtype.size() as u64,
                external,
            };
            weights.insert(t.name.clone(), w);
        }
        let reads = graph
            .nodes
            .iter()
            .map(|n| {
                let mut r: Vec<String> = n
                    .inputs
                    .iter()
                    .filter(|i| weights.contains_key(*i))
                    .cloned()
                    .collect();
                r.dedup();
                r
            })
            .collect();
        let mut value_f64 = declared_sizes(graph);
        match traced_sizes(graph, inputs) {
            Ok(traced) => value_f64.extend(traced),
            Err(e) => notes.push(format!(
                "tract could not size the values from shapes alone ({e}); the estimates use the declared shapes"
            )),
        }
        let crossing = crossings(graph, &value_f64);
        Ok(Sizes {
            reads,
            weights,
            value_f64,
            crossing,
        })
    }

    /// Bytes of the initializers node `i` reads that no earlier node read (each weight counted once).
    fn first_reads(&self, graph: &Graph) -> Vec<u64> {
        let mut seen = HashSet::new();
        graph
            .nodes
            .iter()
            .map(|n| {
                self.reads[n.index]
                    .iter()
                    .filter(|w| seen.insert(w.as_str()))
                    .map(|w| self.weights[w].bytes)
                    .sum()
            })
            .collect()
    }
}

/// f64 bytes of every value tract can size, typing a skeleton of the model: float initializers of more than 1024
/// elements become graph inputs of their type and shape, so no weight is read.
fn traced_sizes(graph: &Graph, inputs: &Inputs) -> Result<HashMap<String, u64>> {
    let mut proto = decode(graph)?;
    let mut facts: Vec<InputFact> = inputs
        .tensors
        .iter()
        .map(|(n, t)| InputFact::typed(n.clone(), t.dtype(), t.shape().to_vec()))
        .collect();
    if let Some(g) = proto.graph.as_mut() {
        let (big, small): (Vec<_>, Vec<_>) = std::mem::take(&mut g.initializer)
            .into_iter()
            .partition(|t| {
                DType::from_onnx(t.data_type).is_float() && t.dims.iter().product::<i64>() > 1024
            });
        g.initializer = small;
        for t in big {
            let dims: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
            g.input
                .push(value_info(&t.name, t.data_type, Some(dims.clone())));
            facts.push(InputFact::typed(
                t.name,
                DType::from_onnx(t.data_type),
                dims,
            ));
        }
    }
    let skeleton = crate::model::surgery::finish(&graph.path, proto)?;
    ReferenceRunner::default().sizes_from_facts(&skeleton, &facts)
}

/// f64 bytes of every value whose shape the model declares fully (value_info, graph outputs).
fn declared_sizes(graph: &Graph) -> HashMap<String, u64> {
    graph
        .value_info
        .values()
        .chain(graph.outputs.iter())
        .filter_map(|v| {
            let dims = v.dims.as_ref()?;
            let elems = dims.iter().try_fold(1u64, |acc, d| match d {
                Dim::Fixed(x) if *x >= 0 => acc.checked_mul(*x as u64),
                _ => None,
            })?;
            Some((v.name.clone(), elems.saturating_mul(8)))
        })
        .collect()
}

/// Per cut position, the values crossing it (a difference array over each value's producer and last reader).
fn crossings(graph: &Graph, value_f64: &HashMap<String, u64>) -> Vec<(usize, u64)> {
    let n = graph.nodes.len();
    let consumers = graph.consumers();
    let mut delta = vec![(0i64, 0i128); n + 1];
    for node in &graph.nodes {
        for o in node.outputs.iter().filter(|o| !o.is_empty()) {
            let Some(last) = consumers.get(o.as_str()).and_then(|c| c.iter().max()) else {
                continue;
            };
            if *last > node.index {
                let b = value_f64.get(o).copied().unwrap_or(0) as i128;
                delta[node.index].0 += 1;
                delta[node.index].1 += b;
                delta[*last].0 -= 1;
                delta[*last].1 -= b;
            }
        }
    }
    let mut acc = (0i64, 0i128);
    delta[..n]
        .iter()
        .map(|d| {
            acc = (acc.0 + d.0, acc.1 + d.1);
            (acc.0.max(0) as usize, acc.1.max(0) as u64)
        })
        .collect()
}

/// K−1 cut positions (the last node of each segment but the final one), each the position near the balanced one
/// that the fewest (then the smallest) values cross.
fn cuts_for(graph: &Graph, sizes: &Sizes, k: usize) -> Result<Vec<usize>> {
    let n = graph.nodes.len();
    if k == 0 || k > n {
        return Err(Error::Usage(format!(
            "--segments {k}: the model has {n} node(s); give 1..={n}"
        )));
    }
    let load = cumulative_load(graph, sizes);
    let window = (n / (4 * k)).max(1);
    let mut cuts = vec![];
    let mut prev: Option<usize> = None;
    for j in 1..k {
        let goal = j as f64 / k as f64;
        let ideal = load.iter().position(|&l| l >= goal).unwrap_or(n - 1);
        let lo = prev.map_or(0, |p| p + 1).max(ideal.saturating_sub(window));
        // Leave at least one node for each segment still to come.
        let hi = (ideal + window).min(n - 1 - (k - j));
        let lo = lo.min(hi);
        let best = (lo..=hi)
            .min_by_key(|&p| {
                let (count, bytes) = sizes.crossing[p];
                (count, bytes, p.abs_diff(ideal))
            })
            .unwrap_or(lo);
        cuts.push(best);
        prev = Some(best);
    }
    Ok(cuts)
}

/// Per node, the share of the model's load up to and including it: half weight bytes, half node count.
fn cumulative_load(graph: &Graph, sizes: &Sizes) -> Vec<f64> {
    let first = sizes.first_reads(graph);
    let total_w: u64 = first.iter().sum();
    let n = graph.nodes.len() as f64;
    let mut acc = 0.0;
    first
        .iter()
        .map(|&w| {
            acc += match total_w {
                0 => 1.0 / n,
                t => 0.5 * w as f64 / t as f64 + 0.5 / n,
            };
            acc
        })
        .collect()
}

/// The fewest segments whose estimated job peak is within `budget`.
fn cuts_within(
    graph: &Graph,
    sizes: &Sizes,
    s: &CompareSettings,
    budget: u64,
) -> Result<Vec<usize>> {
    let n = graph.nodes.len();
    let mut k = 1;
    while k <= n {
        let cuts = cuts_for(graph, sizes, k)?;
        let segs = segments(graph, sizes, s, &cuts);
        match segs.iter().find(|g| g.estimate.job_bytes > budget) {
            None => return Ok(cuts),
            Some(g) if g.nodes.len() == 1 => {
                return Err(Error::Usage(format!(
                    "--segment-memory {}: node `{}` alone needs about {} in a segment job; raise the budget",
                    crate::units::fmt_size(budget as usize),
                    g.nodes[0],
                    crate::units::fmt_size(g.estimate.job_bytes as usize)
                )))
            }
            Some(_) => k = (k + 1).max(k * 5 / 4),
        }
    }
    cuts_for(graph, sizes, n)
}

/// The segments between `cuts`.
fn segments(graph: &Graph, sizes: &Sizes, s: &CompareSettings, cuts: &[usize]) -> Vec<Segment> {
    let mut bounds = vec![];
    let mut start = 0;
    for &c in cuts.iter().chain(std::iter::once(&(graph.nodes.len() - 1))) {
        bounds.push((start, c));
        start = c + 1;
    }
    let producer: HashMap<&str, usize> = graph.producers();
    let seg_of = |node: usize| {
        bounds
            .iter()
            .position(|&(a, b)| a <= node && node <= b)
            .unwrap_or(0)
    };
    let consumers = graph.consumers();
    let graph_inputs: HashSet<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    bounds
        .iter()
        .enumerate()
        .map(|(index, &(first, last))| {
            let nodes = &graph.nodes[first..=last];
            let mut reads = vec![];
            let mut inputs = vec![];
            let mut seen = HashSet::new();
            for i in nodes
                .iter()
                .flat_map(|n| n.inputs.iter())
                .filter(|i| !i.is_empty())
            {
                if !seen.insert(i.as_str()) {
                    continue;
                }
                match producer.get(i.as_str()) {
                    Some(&p) if p < first => reads.push(BoundaryValue {
                        name: i.clone(),
                        from: seg_of(p),
                    }),
                    Some(_) => {}
                    None if graph_inputs.contains(i.as_str()) => inputs.push(i.clone()),
                    None => {}
                }
            }
            let hands_on: Vec<String> = nodes
                .iter()
                .flat_map(|n| n.outputs.iter())
                .filter(|o| {
                    !o.is_empty()
                        && consumers
                            .get(o.as_str())
                            .is_some_and(|c| c.iter().any(|&i| i > last))
                })
                .cloned()
                .collect();
            let mut names: Vec<&String> = nodes
                .iter()
                .flat_map(|n| sizes.reads[n.index].iter())
                .collect();
            names.sort();
            names.dedup();
            let weights: Vec<Weight> = names.iter().map(|w| sizes.weights[*w].clone()).collect();
            let weight_bytes = weights.iter().map(|w| w.bytes).sum();
            let estimate = super::estimate::estimate(nodes, &reads, &weights, sizes, s);
            Segment {
                index,
                first,
                last,
                nodes: nodes.iter().map(|n| n.name.clone()).collect(),
                reads,
                graph_inputs: inputs,
                hands_on,
                weights,
                weight_bytes,
                estimate,
            }
        })
        .collect()
}
