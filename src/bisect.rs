//! `--bisect`: the first divergent value in O(log N) target runs, each exposing one value besides the outputs,
//! with memory bounded by one value: the f64 reference streams once and
//! parks every value on disk. The search walks the ancestors of the first failing output in topological order and
//! assumes, like `git bisect`, that once a value diverges the values after it on that path stay divergent; the
//! full `phantom onnx` run shows every value when that does not hold.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use crate::analysis;
use crate::error::{Error, Result};
use crate::model::{self, Graph};
use crate::pipeline::{prepare, CompareSettings, Prepared};
use crate::report::model::ValueStatus;
use crate::runner::reference::ReferenceRunner;
use crate::target::{Capture, Target};
use crate::tensor::Tensor;

/// One probed value.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
    pub status: ValueStatus,
    pub max_abs: Option<f64>,
    pub tolerance_used: Option<f64>,
}

/// What the search found.
#[derive(Clone, Debug, Serialize)]
pub struct BisectReport {
    pub model: String,
    /// The target probed (`ort-cpu`, `wgpu`).
    pub target: String,
    /// What ran: the provider placement or the adapter.
    pub ran: String,
    /// Values on the path searched (ancestors of the first failing output).
    pub candidates: usize,
    /// Target runs made (one for the outputs, then one per probe).
    pub target_runs: usize,
    /// The first failing value on that path; `None` when the outputs pass.
    pub first_divergence: Option<Probe>,
    /// Every probe in the order made.
    pub probes: Vec<Probe>,
}

/// Reference values parked on disk as little-endian f64 with their shape.
struct Parked {
    dir: PathBuf,
    shapes: HashMap<String, (usize, Vec<usize>)>,
}

impl Parked {
    fn new() -> Result<Parked> {
        let dir = std::env::temp_dir().join(format!("phantom-bisect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| Error::Io {
            path: dir.clone(),
            source: e,
        })?;
        Ok(Parked {
            dir,
            shapes: HashMap::new(),
        })
    }

    fn put(&mut self, name: &str, t: &Tensor) -> Result<()> {
        let k = self.shapes.len();
        let path = self.dir.join(format!("{k}.f64"));
        let a = t.to_f64_array();
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(&path).map_err(|e| Error::Io {
                path: path.clone(),
                source: e,
            })?);
        for v in a.iter() {
            f.write_all(&v.to_le_bytes()).map_err(|e| Error::Io {
                path: path.clone(),
                source: e,
            })?;
        }
        self.shapes
            .insert(name.to_string(), (k, a.shape().to_vec()));
        Ok(())
    }

    fn get(&self, name: &str) -> Option<Tensor> {
        let (k, shape) = self.shapes.get(name)?;
        let bytes = std::fs::read(self.dir.join(format!("{k}.f64"))).ok()?;
        let v: Vec<f64> = bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        ndarray::ArrayD::from_shape_vec(shape.clone(), v)
            .ok()
            .map(Tensor::F64)
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs the target exposing `names`; their values.
fn expose(
    target: &mut dyn Target,
    graph: &Graph,
    names: &[&str],
    inputs: &model::inputs::Inputs,
) -> Result<HashMap<String, Tensor>> {
    Ok(target.run(graph, inputs, Capture::Names(names))?.values)
}

fn ancestors(graph: &Graph, of: &str) -> HashSet<usize> {
    let producers = graph.producers();
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = producers.get(of).copied().into_iter().collect();
    while let Some(i) = stack.pop() {
        if seen.insert(i) {
            stack.extend(
                graph.nodes[i]
                    .inputs
                    .iter()
                    .filter_map(|v| producers.get(v.as_str())),
            );
        }
    }
    seen
}

/// Streams the reference once and parks every value (the slice of it, with --slice) on disk.
fn park(s: &CompareSettings, graph: &Graph, inputs: &model::inputs::Inputs) -> Result<Parked> {
    let mut parked = Parked::new()?;
    let mut failed: Option<Error> = None;
    ReferenceRunner::default().run_streaming(graph, inputs, &mut |name, v| {
        if let (Ok(t), None) = (v, &failed) {
            let t = match &s.slice {
                Some(sp) => sp.apply(&t),
                None => t,
            };
            if let Err(e) = parked.put(name, &t) {
                failed = Some(e);
            }
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(parked),
    }
}

/// Finds the first divergent value of `s.model` on the target with O(log N) runs.
pub fn bisect(s: &CompareSettings) -> Result<BisectReport> {
    let Prepared {
        graph,
        inputs,
        mut target,
        ..
    } = prepare(s)?;
    let target = target.as_mut();

    let parked = park(s, &graph, &inputs)?;

    let outputs: HashSet<&str> = graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let node_of = graph.producers();
    let probe = |name: &str, t: Option<&Tensor>| -> Option<Probe> {
        let r = parked.get(name)?;
        let n = &graph.nodes[*node_of.get(name)?];
        let cut = t.map(|t| match &s.slice {
            Some(sp) => sp.apply(t),
            None => t.clone(),
        });
        let v = analysis::compare_pair(
            name,
            Ok(&r),
            cut.as_ref().ok_or("not produced"),
            &s.tolerance,
            outputs.contains(name),
            false,
        );
        Some(Probe {
            node_index: n.index,
            node: n.name.clone(),
            op_type: n.op_type.clone(),
            value: name.to_string(),
            status: v.status,
            max_abs: v.metrics.as_ref().map(|m| m.max_abs),
            tolerance_used: v.metrics.as_ref().map(|m| m.tolerance_used),
        })
    };

    let mut probes = vec![];
    let out_names: Vec<&str> = graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let got = expose(target, &graph, &out_names, &inputs)?;
    let mut runs = 1;
    let mut failing_output = None;
    for o in &out_names {
        if let Some(p) = probe(o, got.get(*o)) {
            if p.status == ValueStatus::Fail && failing_output.is_none() {
                failing_output = Some(o.to_string());
            }
            probes.push(p);
        }
    }
    let Some(out) = failing_output else {
        return Ok(BisectReport {
            model: graph.path.display().to_string(),
            target: s.target.label(),
            ran: target.facts(&graph).used(),
            candidates: 0,
            target_runs: runs,
            first_divergence: None,
            probes,
        });
    };
    let on_path = ancestors(&graph, &out);
    let candidates: Vec<&str> = graph
        .nodes
        .iter()
        .filter(|n| on_path.contains(&n.index) && n.op_type != "Constant")
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .filter(|v| parked.shapes.contains_key(*v))
        .collect();
    let last = candidates
        .iter()
        .position(|v| *v == out)
        .unwrap_or(candidates.len() - 1);
    let (mut lo, mut hi): (isize, usize) = (-1, last);
    let mut first = probes.iter().find(|p| p.value == out).cloned();
    while hi as isize - lo > 1 {
        let mid = ((lo + hi as isize) / 2) as usize;
        let v = candidates[mid];
        let got = expose(target, &graph, &[v], &inputs)?;
        runs += 1;
        let p = probe(v, got.get(v));
        let fails = p.as_ref().is_some_and(|p| p.status == ValueStatus::Fail);
        if let Some(p) = p {
            probes.push(p.clone());
            if fails {
                first = Some(p);
            }
        }
        if fails {
            hi = mid;
        } else {
            lo = mid as isize;
        }
    }
    Ok(BisectReport {
        model: graph.path.display().to_string(),
        target: s.target.label(),
        ran: target.facts(&graph).used(),
        candidates: candidates.len(),
        target_runs: runs,
        first_divergence: first,
        probes,
    })
}
