//! Bounded memory (`--max-memory`): instead of exposing every value of the target in one run, the reference
//! streams its f64 values and phantom collects them until a chunk of the budget is full, then runs the target once
//! exposing exactly that chunk, compares, and drops both sides. Peak memory is about one chunk of reference values,
//! the same chunk from the target, and what tract and ONNX Runtime hold live — not the whole model's activations.
//! How the target computes a chunk is its own ([`crate::targets::Chunks`]): ONNX Runtime runs each node once, in
//! cuts fed with the values earlier cuts kept on disk; wgpu reruns the model per chunk. With attribution, the
//! expected-noise run's values wait on disk ([`crate::spill`]), and the reference's from the first chunk holding a
//! failing value on ([`Chunker::keeping`]), for the stages that read them again.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::analysis::{self, culprit};
use crate::compare::{Scales, ToleranceSpec};
use crate::error::{Error, Result};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::report::model::ValueReport;
use crate::spill::Held;
use crate::targets::{Chunks, Target};
use crate::tensor::Tensor;

/// Share of what the budget leaves for values ([`chunk_bytes`]) one chunk of reference values may take (the target's
/// copy, tract's and ONNX Runtime's live tensors take the rest).
pub const CHUNK_SHARE: usize = 4;

/// Bytes of reference values one chunk holds within `budget` on `graph`: the run's own copies of the model take
/// their part of the budget first (the reference's weights as it holds them, the model's bytes, and as much again for the chunk's
/// session in ONNX Runtime, which holds the weights it reads), leaving values at least a quarter of it, and one chunk
/// of reference values takes [`CHUNK_SHARE`]'s share of that.
pub fn chunk_bytes(budget: usize, graph: &Graph) -> usize {
    let model = graph
        .reference_weight_bytes()
        .saturating_add(2 * graph.bytes.len() as u64);
    let values = (budget as u64).saturating_sub(model).max(budget as u64 / 4);
    usize::try_from(values / CHUNK_SHARE as u64)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// The largest graph output (in elements) a lane keeps after comparing it, for the stages after the comparison
/// (the fused-kernel variation, `--steps`).
pub const KEPT_OUTPUT_ELEMENTS: usize = 1 << 22;

/// Collects reference values and compares them chunk by chunk against target runs that expose only that chunk.
pub struct Chunker<'a> {
    /// The target, until the first chunk opens its run of chunks.
    target: Option<&'a mut dyn Target>,
    chunks: Option<Box<dyn Chunks + 'a>>,
    graph: &'a Graph,
    inputs: &'a Inputs,
    tol: &'a ToleranceSpec,
    outputs: HashSet<String>,
    heatmaps: bool,
    limit: usize,
    pending: Vec<(String, std::result::Result<Tensor, String>)>,
    bytes: usize,
    /// Value reports made so far.
    pub reports: HashMap<String, ValueReport>,
    /// Chunks asked of the target.
    pub chunks_asked: usize,
    /// The target's graph outputs up to [`KEPT_OUTPUT_ELEMENTS`], kept after their comparison.
    pub target_outputs: HashMap<String, Tensor>,
    /// The first error a target run met (reported after the reference run).
    pub error: Option<Error>,
    slice: Option<crate::compare::slice::SliceSpec>,
    /// The reference's RMS per value so far (operand scales of the default tolerance), recorded as values arrive.
    scales: &'a mut Scales,
    /// The expected-noise run's values, applied to each value as it is compared (with attribution).
    noise: Option<&'a mut Held>,
    /// Where the reference's values go from the first chunk holding a value that fails on ([`Self::keeping`]).
    keep: Option<Held>,
    /// Whether values still go to `keep` (a write that fails ends it: those values are computed again).
    writing: bool,
    /// A value compared so far fails: culprits will be sought, and every value read again.
    drifting: bool,
    /// Each computed value's producer, by its place in the graph's order, and whether the value depends on the
    /// model's input data ([`Self::take_chunk`]).
    position: HashMap<&'a str, (usize, bool)>,
    /// The reference has handed over every value: nothing is left for a later chunk.
    last: bool,
}

impl<'a> Chunker<'a> {
    pub fn new(
        target: &'a mut dyn Target,
        graph: &'a Graph,
        inputs: &'a Inputs,
        tol: &'a ToleranceSpec,
        budget: usize,
        (heatmaps, scales): (bool, &'a mut Scales),
    ) -> Chunker<'a> {
        Chunker {
            scales,
            outputs: graph.outputs.iter().map(|o| o.name.clone()).collect(),
            target: Some(target),
            chunks: None,
            graph,
            inputs,
            tol,
            heatmaps,
            limit: chunk_bytes(budget, graph),
            pending: vec![],
            bytes: 0,
            reports: HashMap::new(),
            chunks_asked: 0,
            target_outputs: HashMap::new(),
            error: None,
            slice: None,
            noise: None,
            keep: None,
            writing: true,
            drifting: false,
            position: positions(graph),
            last: false,
        }
    }

    /// Keeps the reference's values in `held` from the first chunk in which a value fails ([`culprit::sought`]):
    /// attribution will then run every node alone and read every value, and those need not be computed again.
    pub fn keeping(mut self, held: Held) -> Self {
        self.keep = Some(held);
        self
    }

    /// Whether a value compared so far fails ([`culprit::sought`]).
    pub fn drifting(&self) -> bool {
        self.drifting
    }

    /// The store given to [`Self::keeping`], with what it kept.
    pub fn kept(&mut self) -> Option<Held> {
        self.keep.take()
    }

    /// Applies the expected noise of each value (the reference rerun with the target's rounding) as it is compared.
    pub fn with_noise(mut self, noise: &'a mut Held) -> Self {
        self.noise = Some(noise);
        self
    }

    /// The expected-noise run's values, when the comparison applies them.
    pub fn noise(&self) -> Option<&Held> {
        self.noise.as_deref()
    }

    /// Compares only this slice of each tensor.
    pub fn with_slice(mut self, slice: Option<crate::compare::slice::SliceSpec>) -> Self {
        self.slice = slice;
        self
    }

    /// Takes one reference value; runs the target when the chunk is full.
    pub fn push(&mut self, name: &str, value: std::result::Result<Tensor, String>) {
        self.bytes += value.as_ref().map(|t| t.nbytes()).unwrap_or(0);
        if let Ok(t) = &value {
            self.scales.record(name, t);
        }
        self.pending.push((name.to_string(), value));
        if self.bytes >= self.limit {
            self.flush();
        }
    }

    /// Compares what is still pending once the reference has handed over every value.
    pub fn finish(&mut self) {
        self.last = true;
        self.flush();
    }

    /// The pending values to compare now. Values that do not depend on the input data (shapes, and what the graph
    /// computes from them and from constants), computed further down the graph than every value of the chunk that
    /// does, stay pending for a later chunk: the reference hands them over before the run, and a cut exposing one
    /// would run every node before it at once. They are compared now when they take half a chunk.
    fn take_chunk(&mut self) -> Vec<(String, std::result::Result<Tensor, String>)> {
        let all = std::mem::take(&mut self.pending);
        self.bytes = 0;
        let size = |v: &std::result::Result<Tensor, String>| v.as_ref().map_or(0, Tensor::nbytes);
        let at = |n: &str| self.position.get(n).copied();
        let frontier = (all.iter())
            .filter_map(|(n, _)| at(n).filter(|&(_, data)| data))
            .map(|(p, _)| p)
            .max();
        let Some(frontier) = frontier.filter(|_| !self.last) else {
            return all;
        };
        let ahead = |n: &str| at(n).is_some_and(|(p, data)| !data && p > frontier);
        let (later, now): (Vec<_>, Vec<_>) = all.into_iter().partition(|(n, _)| ahead(n));
        let bytes = later.iter().map(|(_, v)| size(v)).sum();
        if bytes >= self.limit / 2 {
            return now.into_iter().chain(later).collect();
        }
        self.bytes = bytes;
        self.pending = later;
        now
    }

    /// Compares what is pending against one target run exposing it.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pending = self.take_chunk();
        let names: Vec<&str> = pending
            .iter()
            .filter(|(_, v)| v.is_ok())
            .map(|(n, _)| n.as_str())
            .collect();
        let mut got: HashMap<String, Tensor> = HashMap::new();
        if !names.is_empty() && self.error.is_none() {
            match self.run(&names) {
                Ok(g) => got = g,
                Err(e) => self.error = Some(e),
            }
        }
        let mut compared = Vec::with_capacity(pending.len());
        for (name, r) in pending {
            let t = got.remove(&name);
            if let Some(t) = t.as_ref().filter(|t| t.len() <= KEPT_OUTPUT_ELEMENTS) {
                if self.outputs.contains(&name) {
                    self.target_outputs.insert(name.clone(), t.clone());
                }
            }
            let report = self.judge(&name, &r, t);
            self.drifting |= culprit::sought(&report);
            self.reports.insert(name.clone(), report);
            if let (Some(_), true, Ok(r)) = (&self.keep, self.writing, r) {
                compared.push((name, r));
            }
        }
        self.keep_chunk(compared);
    }

    /// One value's report: the reference's against the target's (both sliced when asked), with its expected noise.
    fn judge(
        &mut self,
        name: &str,
        r: &std::result::Result<Tensor, String>,
        t: Option<Tensor>,
    ) -> ValueReport {
        let slice = self.slice.as_ref();
        let r = r.as_ref().map(|r| sliced(slice, r));
        let t = t.as_ref().map(|t| sliced(slice, t));
        let judged = |o: &str| self.reports.get(o).and_then(ValueReport::judged_dtype);
        let mut report = analysis::compare_pair(
            name,
            r.as_deref().map_err(|e| e.as_str()),
            t.as_deref().ok_or("not produced"),
            self.tol,
            // The value's RMS was measured as it arrived: not again, unless a slice of it is compared.
            match slice {
                None => self.scales.own(name, judged),
                Some(_) => self.scales.scaling_from(name, judged),
            },
            self.outputs.contains(name),
            self.heatmaps,
        );
        if let (Some(noise), Ok(r)) = (self.noise.as_deref_mut(), &r) {
            let e = noise.take(name).map(|e| match slice {
                Some(sp) => sp.apply(&e),
                None => e,
            });
            analysis::attribution::with_noise(&mut report, r, e, self.tol);
        }
        report
    }

    /// Keeps the chunk's reference values once the run drifts; the first write that fails ends the keeping (the
    /// values are then computed again).
    fn keep_chunk(&mut self, values: Vec<(String, Tensor)>) {
        let Some(held) = self.keep.as_mut().filter(|_| self.drifting) else {
            return;
        };
        for (name, t) in values {
            if held.insert(&name, t).is_err() {
                self.writing = false;
                return;
            }
        }
    }

    /// What the chunked run says about itself (a fallback it took).
    pub fn notes(&self) -> Vec<String> {
        self.chunks.as_ref().map(|c| c.notes()).unwrap_or_default()
    }

    /// How the target ran for the chunks.
    pub fn ran(&self) -> String {
        self.chunks.as_ref().map(|c| c.ran()).unwrap_or_default()
    }

    fn run(&mut self, names: &[&str]) -> Result<HashMap<String, Tensor>> {
        self.chunks_asked += 1;
        if let Some(t) = self.target.take() {
            self.chunks = Some(t.chunks(self.graph, self.inputs)?);
        }
        match self.chunks.as_mut() {
            Some(c) => c.next(names),
            None => Err(Error::Usage(
                "the target could not start its chunked run".into(),
            )),
        }
    }
}

/// Each value a node computes, by its producer's place in the graph's order, and whether it depends on the input
/// data: on a graph input through anything but the shape of a value (`Shape`, `Size`). A node with a body is taken
/// to depend on the data.
fn positions(graph: &Graph) -> HashMap<&str, (usize, bool)> {
    let mut data: std::collections::HashSet<&str> = (graph.inputs.iter())
        .map(|i| i.name.as_str())
        .filter(|n| !graph.initializers.contains_key(*n))
        .collect();
    let mut out = HashMap::new();
    for n in &graph.nodes {
        let shape_only = matches!(n.op_type.as_str(), "Shape" | "Size") && n.domain.is_empty();
        let reads = n.subgraph_nodes > 0 || n.inputs.iter().any(|i| data.contains(i.as_str()));
        let depends = reads && !shape_only;
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            if depends {
                data.insert(o);
            }
            out.insert(o.as_str(), (n.index, depends));
        }
    }
    out
}

/// `t`, or the part of it `slice` selects.
fn sliced<'t>(slice: Option<&crate::compare::slice::SliceSpec>, t: &'t Tensor) -> Cow<'t, Tensor> {
    match slice {
        Some(sp) => Cow::Owned(sp.apply(t)),
        None => Cow::Borrowed(t),
    }
}

#[cfg(test)]
mod tests {
    /// BERT's position ids and token types come from the shape of its input ids: they wait for the chunk that
    /// reaches their readers, while what is computed from the ids' values does not.
    #[test]
    fn values_computed_from_shapes_alone_do_not_depend_on_the_data() {
        let path = &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/contrib/bert_opt.onnx");
        let g = crate::model::import::load(path).unwrap();
        let p = super::positions(&g);
        for shape_only in [
            "ids_shape",
            "seq_len",
            "position_ids",
            "token_types",
            "position_ids_int32",
        ] {
            assert!(!p[shape_only].1, "{shape_only}");
        }
        for data in [
            "input_ids_int32",
            "attention_mask_int32",
            "EmbedLayerNormalization_0_output",
            "l1_ln2",
        ] {
            assert!(p[data].1, "{data}");
        }
        assert!(p["l1_ln2"].0 > p["position_ids"].0);
    }

    #[test]
    fn a_chunk_is_a_quarter_of_what_the_model_leaves() {
        let g = crate::model::import::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/convnet.onnx"),
        )
        .unwrap();
        let model = g.reference_weight_bytes() as usize + 2 * g.bytes.len();
        let budget = 64 * model;
        assert_eq!(
            super::chunk_bytes(budget, &g),
            (budget - model) / super::CHUNK_SHARE
        );
        assert_eq!(
            super::chunk_bytes(model, &g),
            model / 4 / super::CHUNK_SHARE,
            "at least a sixteenth"
        );
        assert_eq!(super::chunk_bytes(0, &g), 1);
    }

    #[test]
    fn sizes() {
        assert_eq!(crate::units::parse_size("2GiB"), Some(2 << 30));
        assert_eq!(crate::units::parse_size("512M"), Some(512 << 20));
        assert_eq!(crate::units::parse_size("1.5g"), Some(3 << 29));
        assert_eq!(crate::units::parse_size("4096"), Some(4096));
        assert_eq!(crate::units::parse_size("lots"), None);
    }
}
