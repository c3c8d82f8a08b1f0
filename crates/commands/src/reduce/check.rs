//! Feeding and judging a cut: the reference's values rounded as the target stores them, shape-fixed values embedded,
//! each output against the full model's f64 reference under `phantom onnx`'s tolerance, and the same cut on the
//! f64 reference.

use std::collections::{HashMap, HashSet};

use super::{OutputCheck, ReduceSettings};
use crate::analysis::compare_pair;
use crate::compare::tolerance::Tolerance;
use crate::compare::Scales;
use crate::error::{Error, Result};
use crate::model::cut::{cut, Boundary, Cut, Feed};
use crate::model::inputs::Inputs;
use crate::model::Graph;
use crate::report::model::ValueStatus;
use crate::runner::reference::{ReferenceRunner, Rounding};
use crate::spill::Spill;
use crate::tensor::Tensor;

/// Values of `g` that the input shapes alone fix: computed from initializers, constants and `Shape`/`Size` of
/// the data, never from its values. A cut embeds them as initializers (tract needs a Resize's scales or a
/// Reshape's shape as constants); they are exact for the shapes this run used.
fn shape_fixed(g: &Graph) -> HashSet<String> {
    let mut data: HashSet<&str> = g.inputs.iter().map(|i| i.name.as_str()).collect();
    let mut fixed = HashSet::new();
    for n in &g.nodes {
        let reads_data = !matches!(n.op_type.as_str(), "Shape" | "Size")
            && n.inputs.iter().any(|i| data.contains(i.as_str()));
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            match reads_data {
                true => data.insert(o.as_str()),
                false => fixed.insert(o.clone()),
            };
        }
    }
    fixed
}

/// The reference's values and the target's storage types: what feeds and judges a cut.
pub(super) struct Ctx<'a> {
    /// The model's inputs (the reference parks computed values only).
    pub(super) inputs: &'a Inputs,
    pub(super) parked: &'a Spill,
    pub(super) scales: &'a Scales,
    pub(super) rounding: &'a Rounding,
    pub(super) settings: &'a ReduceSettings,
}

impl Ctx<'_> {
    /// Cuts `keep` out of `g`, exposing the outputs of node `expose`; a boundary value the reference lacks pulls
    /// its producer in.
    pub(super) fn cut(&self, g: &Graph, keep: &HashSet<usize>, expose: usize) -> Result<Cut> {
        let fixed = shape_fixed(g);
        let shape_of = |base: &str| self.value(base).map(|t| t.shape().to_vec());
        let embed = |f: &Feed| match fixed.contains(&f.name) {
            true => self.stored(f).map(Some),
            false => Ok(None),
        };
        let boundary = Boundary {
            shape_of: &shape_of,
            embed: &embed,
        };
        let path = self.settings.out.join("model.onnx");
        cut(g, keep, &HashSet::from([expose]), &boundary, &path)
    }

    /// The producers of the cut's inputs the reference has no value for (a value only the target model has); an
    /// error when such an input has no producer.
    pub(super) fn unfed(&self, g: &Graph, feeds: &[Feed]) -> Result<Option<HashSet<usize>>> {
        let producers = g.producers();
        let mut more = HashSet::new();
        for f in feeds.iter().filter(|f| self.value(&f.base).is_none()) {
            let p = producers.get(f.name.as_str()).ok_or_else(|| {
                Error::Usage(format!(
                    "the reference has no value for `{}`, which the cut reads, and nothing computes it",
                    f.base
                ))
            })?;
            more.insert(*p);
        }
        Ok((!more.is_empty()).then_some(more))
    }

    /// The target's own values of the cut's inputs, from a run of the whole model exposing them (typed as the cut
    /// reads them); `None` when the target does not hand one of them back.
    pub(super) fn target_values(
        &self,
        target: &mut dyn crate::targets::Target,
        original: &Graph,
        feeds: &[Feed],
    ) -> Result<Option<Inputs>> {
        let names: Vec<&str> = feeds.iter().map(|f| f.name.as_str()).collect();
        let got = target
            .run(
                original,
                self.inputs,
                crate::targets::Capture::Names(&names),
            )?
            .values;
        let mut inputs = Inputs::default();
        for f in feeds {
            let model_input = self
                .inputs
                .tensors
                .iter()
                .find(|(n, _)| *n == f.name)
                .map(|(_, t)| t);
            let Some(t) = got
                .get(&f.name)
                .or(model_input)
                .and_then(|t| t.cast(f.dtype))
            else {
                return Ok(None);
            };
            inputs.tensors.push((f.name.clone(), t));
        }
        Ok(Some(inputs))
    }

    /// The reference's value of `name`: a model input, or a value it computed.
    pub(super) fn value(&self, name: &str) -> Option<Tensor> {
        let input = self.inputs.tensors.iter().find(|(n, _)| n == name);
        input
            .map(|(_, t)| t.clone())
            .or_else(|| self.parked.get(name))
    }

    /// The cut's inputs: each reference value rounded to the type the target stores it in, then typed as read.
    pub(super) fn feed(&self, feeds: &[Feed]) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        for f in feeds {
            inputs.tensors.push((f.name.clone(), self.stored(f)?));
        }
        Ok(inputs)
    }

    /// The reference's value of a boundary value, rounded to the type the target stores it in, typed as read.
    pub(super) fn stored(&self, f: &Feed) -> Result<Tensor> {
        let r = self.value(&f.base).ok_or_else(|| {
            Error::Usage(format!(
                "the reference has no value for `{}`, which the cut reads; name a later node with --node",
                f.base
            ))
        })?;
        let stored = match self.rounding.get(&f.base) {
            Some(&d) if f.dtype.is_float() => r.cast(d).expect("float casts"),
            _ => r,
        };
        stored.cast(f.dtype).ok_or_else(|| Error::Ort {
            reason: format!("reduce: cannot feed `{}` as {}", f.base, f.dtype),
        })
    }

    /// Each output of the cut against the full model's reference value.
    pub(super) fn judge(
        &self,
        c: &Cut,
        got: &HashMap<String, Tensor>,
    ) -> Result<Vec<OutputCheckDraft>> {
        let mut out = vec![];
        for (name, base) in &c.outputs {
            let Some(r) = self.parked.get(base) else {
                continue;
            };
            let t = got.get(name).ok_or_else(|| Error::Ort {
                reason: format!("reduce: the target did not produce `{name}` from the cut"),
            })?;
            let v = compare_pair(
                base,
                Ok(&r),
                Ok(t),
                &self.settings.compare.tolerance,
                self.scales.scaling(base),
                false,
                false,
            );
            let m = v.metrics.clone().ok_or_else(|| Error::Ort {
                reason: format!(
                    "reduce: `{name}` could not be compared: {}",
                    v.reason.clone().unwrap_or_default()
                ),
            })?;
            out.push(OutputCheckDraft {
                name: name.clone(),
                value: base.clone(),
                tolerance: v.tolerance.unwrap_or(Tolerance {
                    atol: 0.0,
                    rtol: 0.0,
                    floor: 0.0,
                }),
                scale: m.scale,
                target_fails: v.status == ValueStatus::Fail,
                target_max_abs: m.max_abs,
                target_failing: m.failed,
                target_nonfinite: m.nonfinite_mismatch,
                elements: m.elements,
                tolerance_used: m.tolerance_used,
            });
        }
        Ok(out)
    }

    /// The same cut taken from the original model, run by the f64 reference on the same (rounded) inputs.
    pub(super) fn on_reference(
        &self,
        original: &Graph,
        runs: &Graph,
        keep: &HashSet<usize>,
        node: &str,
        drafts: Vec<OutputCheckDraft>,
        used: &HashMap<String, Tensor>,
    ) -> Result<Vec<OutputCheck>> {
        let names: HashSet<&str> = runs
            .nodes
            .iter()
            .filter(|n| keep.contains(&n.index))
            .map(|n| n.name.as_str())
            .collect();
        let keep_o: HashSet<usize> = original
            .nodes
            .iter()
            .filter(|n| names.contains(n.name.as_str()))
            .map(|n| n.index)
            .collect();
        let expose = original
            .nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| n.index);
        let (Some(expose), false) = (expose, keep_o.is_empty()) else {
            return Err(Error::Usage(format!(
                "the original model has no node `{node}` to check on the reference"
            )));
        };
        let c = self.cut(original, &keep_o, expose)?;
        let mut inputs = Inputs::default();
        for f in &c.feeds {
            let t = match used.get(&f.base).and_then(|t| t.cast(f.dtype)) {
                Some(t) => t,
                None => self.stored(f)?,
            };
            inputs.tensors.push((f.name.clone(), t));
        }
        let got = ReferenceRunner::default().run(&c.graph, &inputs)?.values;
        let by_value: HashMap<&str, &Tensor> = c
            .outputs
            .iter()
            .filter_map(|(n, b)| got.get(n).map(|t| (b.as_str(), t)))
            .collect();
        let mut out = vec![];
        for d in drafts {
            let (passes, max_abs) =
                match (by_value.get(d.value.as_str()), self.parked.get(&d.value)) {
                    (Some(t), Some(r)) => within(&d, &r, t),
                    _ => (false, f64::NAN),
                };
            out.push(d.finish(passes, max_abs));
        }
        Ok(out)
    }
}

/// Whether `t` is within the tolerance the target was judged by (same scale), and the largest |t − r|.
fn within(d: &OutputCheckDraft, r: &Tensor, t: &Tensor) -> (bool, f64) {
    let (r, t) = (r.to_f64_array(), t.to_f64_array());
    if r.shape() != t.shape() {
        return (false, f64::NAN);
    }
    let mut max_abs = 0.0f64;
    let mut ok = true;
    for (&a, &b) in r.iter().zip(t.iter()) {
        ok &= d.tolerance.accepts(a, b, d.scale);
        max_abs = max_abs.max((a - b).abs());
    }
    (ok, max_abs)
}

/// An output check before the reference has run the cut.
pub(super) struct OutputCheckDraft {
    name: String,
    value: String,
    tolerance: Tolerance,
    scale: f64,
    pub(super) target_fails: bool,
    target_max_abs: f64,
    target_failing: u64,
    target_nonfinite: u64,
    elements: u64,
    pub(super) tolerance_used: f64,
}

impl OutputCheckDraft {
    fn finish(self, reference_passes: bool, reference_max_abs: f64) -> OutputCheck {
        OutputCheck {
            name: self.name,
            value: self.value,
            tolerance: self.tolerance,
            scale: self.scale,
            target_fails: self.target_fails,
            target_max_abs: self.target_max_abs,
            target_failing: self.target_failing,
            target_nonfinite: self.target_nonfinite,
            elements: self.elements,
            reference_passes,
            reference_max_abs,
        }
    }
}
