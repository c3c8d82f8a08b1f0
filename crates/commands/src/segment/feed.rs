//! A segment as a model of its own: its cut, fed with each side's values of what it reads. Integer boundary
//! values both sides agree on (shape arithmetic) are embedded as constants, which the reference needs to type the
//! cut; every other value is a graph input. With `--target-model`, the target's model is cut at the same nodes.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::store::{self, Side};
use super::{load_graph, Plan, Segment};
use crate::error::{Error, Result};
use crate::model::cut::{cut, Boundary, Cut, Feed};
use crate::model::inputs::{InputSummary, Inputs};
use crate::model::{self, Graph};
use crate::targets::TargetSpec;
use crate::tensor::Tensor;

/// The cut of a segment and each side's inputs.
pub struct Fed {
    pub cut: Cut,
    pub reference: Inputs,
    pub noise: Option<Inputs>,
    pub target: Inputs,
    /// Boundary values embedded in the cut as constants, with the reference's values.
    pub upstream: Vec<(String, Tensor)>,
    /// The target as the plan asks, its `--target-model` replaced by that model's cut (a temporary file).
    pub spec: TargetSpec,
    _target_cut: Option<tempfile::TempPath>,
}

/// Each side's values of everything the segment reads.
struct Sides {
    reference: HashMap<String, Tensor>,
    noise: Option<HashMap<String, Tensor>>,
    target: HashMap<String, Tensor>,
}

/// The segment's cut with each side's inputs, from the model and the values stored in `dir`.
pub fn prepare(dir: &Path, plan: &Plan, seg: &Segment) -> Result<Fed> {
    let stored = store::read_inputs(dir, plan)?;
    let graph = load_graph(plan, &stored)?;
    if graph.nodes.len() != plan.nodes {
        return Err(Error::Usage(format!(
            "{} has {} nodes as prepared now, the plan {}: run `phantom plan` again",
            plan.model.display(),
            graph.nodes.len(),
            plan.nodes
        )));
    }
    let sides = read_sides(dir, plan, seg, &stored)?;
    let path = dir.join(format!("segment-{}.onnx", seg.index));
    let c = cut_of(&graph, seg, &sides, &path)?;
    if c.graph.bytes.len() > i32::MAX as usize {
        return Err(Error::Usage(format!(
            "segment {}: its cut carries {} of weights inline, beyond protobuf's 2 GiB for one model; plan more \
             segments",
            seg.index,
            crate::units::fmt_size(c.graph.bytes.len())
        )));
    }
    crate::pipeline::weights_fit(&c.graph)
        .map_err(|e| Error::Usage(format!("segment {}: {e}; plan more segments", seg.index)))?;
    let mut spec = plan.settings.targets[0].clone();
    let mut target_cut = None;
    let mut target_feeds = None;
    if let Some(other) = &spec.model {
        // Prepared as the reference is (taken branches inlined, random ops seeded), so both cut the same graph.
        let target = super::transformed(model::load(other)?, &plan.settings, &stored)?;
        let tc = cut_of(&target, seg, &sides, other)?;
        let file = tempfile::Builder::new()
            .prefix("phantom-segment-target")
            .suffix(".onnx")
            .tempfile()
            .map_err(|e| {
                let what = format!("segment {}'s target model", seg.index);
                crate::error::temp_error(&what, e)
            })?
            .into_temp_path();
        crate::report::json::write_atomic(&file, &tc.graph.bytes)?;
        spec.model = Some(file.to_path_buf());
        target_cut = Some(file);
        // The target's model may read what the prepared reference does not (the batch size through
        // `Shape(input)` where the reference's preparation fixed it): it is fed by its own cut's inputs.
        target_feeds = Some(tc);
    }
    let from_plan: HashSet<&str> = stored.tensors.iter().map(|(n, _)| n.as_str()).collect();
    let feed = |values: &HashMap<String, Tensor>, what: &str, cast: bool| {
        side_inputs(&c, seg, &from_plan, values, what, cast)
    };
    let reference = feed(&sides.reference, "reference", false)?;
    let target = match &target_feeds {
        Some(tc) => side_inputs(tc, seg, &from_plan, &sides.target, "target", true)?,
        None => feed(&sides.target, "target", true)?,
    };
    let noise = match &sides.noise {
        Some(n) => Some(feed(n, "expected-noise run", false)?),
        None => None,
    };
    let fed: HashSet<&str> = c.feeds.iter().map(|f| f.base.as_str()).collect();
    let upstream = seg
        .reads
        .iter()
        .filter(|r| !fed.contains(r.name.as_str()))
        .filter_map(|r| Some((r.name.clone(), sides.reference.get(&r.name)?.clone())))
        .collect();
    Ok(Fed {
        cut: c,
        reference,
        noise,
        target,
        upstream,
        spec,
        _target_cut: target_cut,
    })
}

/// Each side's values of everything the segment reads: boundary values from the store, graph inputs as stored.
fn read_sides(dir: &Path, plan: &Plan, seg: &Segment, stored: &Inputs) -> Result<Sides> {
    let mut sides = Sides {
        reference: HashMap::new(),
        noise: plan.settings.attribution.then(HashMap::new),
        target: HashMap::new(),
    };
    // Every graph input, not only those the segment's reference nodes read: a `--target-model` may read others.
    for (name, t) in &stored.tensors {
        sides.reference.insert(name.clone(), t.clone());
        sides.target.insert(name.clone(), t.clone());
        if let Some(n) = sides.noise.as_mut() {
            n.insert(name.clone(), t.clone());
        }
    }
    for r in &seg.reads {
        let read = |side| store::read_boundary(dir, plan, side, &r.name, r.from);
        sides
            .reference
            .insert(r.name.clone(), read(Side::Reference)?);
        sides.target.insert(r.name.clone(), read(Side::Target)?);
        if let Some(n) = sides.noise.as_mut() {
            n.insert(r.name.clone(), read(Side::Noise)?);
        }
    }
    Ok(sides)
}

/// The segment's nodes (by name) cut out of `graph`; its outputs are the values later segments read and the
/// model's outputs, marked as handed on where they are not the model's own.
fn cut_of(graph: &Graph, seg: &Segment, sides: &Sides, path: &Path) -> Result<Cut> {
    let names: HashSet<&str> = seg.nodes.iter().map(String::as_str).collect();
    let keep: HashSet<usize> = graph
        .nodes
        .iter()
        .filter(|n| names.contains(n.name.as_str()))
        .map(|n| n.index)
        .collect();
    if keep.len() != names.len() {
        let missing = seg
            .nodes
            .iter()
            .find(|n| !graph.nodes.iter().any(|g| &g.name == *n))
            .cloned()
            .unwrap_or_default();
        return Err(Error::Usage(format!(
            "{} has no node `{missing}` of segment {}: a plan cuts every model at the same node names (a \
             perturbed or re-exported copy works, a fused one does not)",
            graph.path.display(),
            seg.index
        )));
    }
    let hands_on: HashSet<&str> = seg.hands_on.iter().map(String::as_str).collect();
    let outputs: HashSet<&str> = graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let mut expose: HashSet<usize> = graph
        .nodes
        .iter()
        .filter(|n| keep.contains(&n.index))
        .filter(|n| {
            n.outputs
                .iter()
                .any(|o| hands_on.contains(o.as_str()) || outputs.contains(o.as_str()))
        })
        .map(|n| n.index)
        .collect();
    if expose.is_empty() {
        expose = keep.clone();
    }
    let shape_of = |base: &str| sides.reference.get(base).map(|t| t.shape().to_vec());
    // The model's own inputs stay inputs: as constants the reference would fold what they feed.
    let constants = graph.constant_derived();
    let embed = |f: &Feed| {
        if seg.graph_inputs.contains(&f.base) {
            return Ok(None);
        }
        let (Some(r), Some(t)) = (sides.reference.get(&f.name), sides.target.get(&f.name)) else {
            return Ok(None);
        };
        // Computed from initializers alone: a constant of the whole model (tract needs some as constants, such as
        // BatchNormalization's parameters), in the type the model declares, which each side then reads as it
        // reads any initializer.
        if constants.contains(f.base.as_str()) {
            return Ok(Some(r.cast(f.dtype).unwrap_or_else(|| r.clone())));
        }
        let integer = !f.dtype.is_float() && !r.dtype().is_float();
        let same = r.shape() == t.shape() && r.to_f64_array() == t.to_f64_array();
        Ok((integer && same).then(|| r.clone()))
    };
    let boundary = Boundary {
        shape_of: &shape_of,
        embed: &embed,
    };
    let mut c = cut(graph, &keep, &expose, &boundary, path)?;
    c.graph.handed_on = c
        .graph
        .outputs
        .iter()
        .map(|o| o.name.clone())
        .filter(|o| !outputs.contains(o.as_str()))
        .collect();
    Ok(c)
}

/// One side's inputs for the cut, in its graph-input order; the target's cast to the types the cut declares.
fn side_inputs(
    c: &Cut,
    seg: &Segment,
    from_plan: &HashSet<&str>,
    values: &HashMap<String, Tensor>,
    what: &str,
    cast: bool,
) -> Result<Inputs> {
    let mut out = Inputs::default();
    for f in &c.feeds {
        let t = values.get(&f.base).ok_or_else(|| {
            Error::Usage(format!(
                "segment {}: no {what} value for `{}`",
                seg.index, f.base
            ))
        })?;
        let t = match cast {
            true => t.cast(f.dtype).unwrap_or_else(|| t.clone()),
            false => t.clone(),
        };
        out.summaries.push(InputSummary {
            name: f.name.clone(),
            dtype: f.dtype,
            shape: t.shape().to_vec(),
            origin: match from_plan.contains(f.base.as_str()) {
                true => "graph input, stored by `phantom plan`".into(),
                false => format!("the {what}'s value, stored by the boundary pass"),
            },
            dims_from: vec![],
            non_finite: crate::model::inputs::non_finite(&t),
        });
        out.tensors.push((f.name.clone(), t));
    }
    Ok(out)
}
