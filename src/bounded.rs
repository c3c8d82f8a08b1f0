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
            error: None,
            slice: None,
            noise: None,
            keep: None,
            writing: true,
            drifting: false,
        }
    }

    /// Keeps the reference's values in `held` from the first chunk in which a value fails ([`culprit::sought`]):
    /// attribution will then run every node alone and read every value, and those need not be computed again.
    pub fn keeping(mut self, held: Held) -> Self {
        self.keep = Some(held);
        self
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

    /// Compares what is pending against one target run exposing it.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        self.bytes = 0;
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
            let report = self.judge(&name, &r, got.remove(&name));
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
        let mut report = analysis::compare_pair(
            name,
            r.as_deref().map_err(|e| e.as_str()),
            t.as_deref().ok_or("not produced"),
            self.tol,
            self.scales.scaling_from(name, |o| {
                self.reports.get(o).and_then(ValueReport::judged_dtype)
            }),
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

/// `t`, or the part of it `slice` selects.
fn sliced<'t>(slice: Option<&crate::compare::slice::SliceSpec>, t: &'t Tensor) -> Cow<'t, Tensor> {
    match slice {
        Some(sp) => Cow::Owned(sp.apply(t)),
        None => Cow::Borrowed(t),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_chunk_is_a_quarter_of_what_the_model_leaves() {
        let g = crate::model::import::load(std::path::Path::new("models/convnet.onnx")).unwrap();
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
