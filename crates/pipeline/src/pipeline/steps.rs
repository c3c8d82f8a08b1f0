//! `--steps N` on a KV-cache decoder: N forward passes, the first on the prompt, each later one on one new token
//! with each side fed its **own** cache from the step before (the reference its f64 `present` values, the target
//! its own), so drift that accumulates in the cache shows step by step. The new token is the reference's greedy
//! choice from its last logits, fed to both sides (when the target would have chosen another, the step says so).
//! The report is that of the first step that fails (else the last), with one note per step.

use std::collections::HashMap;
use std::time::Instant;

use ndarray::{ArrayD, IxDyn};

use super::{prepare, stages, CompareSettings, Prepared};
use crate::error::{Error, Result};
use crate::model::inputs::{InputSummary, Inputs};
use crate::model::Graph;
use crate::report::model::Report;
use crate::tensor::{DType, Tensor};

/// Which inputs and outputs carry a decoder's state from one step to the next.
struct Decoder {
    ids: String,
    mask: Option<String>,
    positions: Option<String>,
    /// (past input, present output).
    cache: Vec<(String, String)>,
    logits: String,
    /// optimum's merged decoders: the boolean input choosing the first-step branch (false) or the with-past one.
    branch: Option<String>,
}

fn usage(why: String) -> Error {
    Error::Usage(format!("--steps: {why}"))
}

impl Decoder {
    fn of(g: &Graph) -> Result<Decoder> {
        let find_in = |k: &str| {
            g.inputs
                .iter()
                .find(|i| i.name.to_lowercase().contains(k))
                .map(|i| i.name.clone())
        };
        let ids = find_in("input_ids")
            .or_else(|| find_in("ids"))
            .ok_or_else(|| {
                usage("the model has no `input_ids` input to feed the next token to".into())
            })?;
        let outputs: Vec<&str> = g.outputs.iter().map(|o| o.name.as_str()).collect();
        let mut cache = vec![];
        for i in g
            .inputs
            .iter()
            .filter(|i| i.name.to_lowercase().contains("past"))
        {
            let candidates = [
                i.name.replace("past_key_values", "present"),
                i.name.replace("past_key_values", "present_key_values"),
                i.name.replace("past", "present"),
            ];
            let present = candidates
                .iter()
                .find(|c| outputs.contains(&c.as_str()))
                .ok_or_else(|| {
                    usage(format!(
                        "no output pairs with the cache input `{}` (tried {candidates:?})",
                        i.name
                    ))
                })?;
            cache.push((i.name.clone(), present.clone()));
        }
        if cache.is_empty() {
            return Err(usage(
                "the model has no past key/value inputs: it is not a KV-cache decoder".into(),
            ));
        }
        let logits = g
            .outputs
            .iter()
            .find(|o| o.name.to_lowercase().contains("logits"))
            .or_else(|| g.outputs.first())
            .map(|o| o.name.clone())
            .ok_or_else(|| usage("the model has no output".into()))?;
        Ok(Decoder {
            ids,
            mask: find_in("attention_mask"),
            positions: find_in("position_ids"),
            cache,
            logits,
            branch: find_in("use_cache_branch"),
        })
    }

    /// The branch input set to `on` in `inputs` (a no-op where the model has none); whether it changed.
    fn set_branch(&self, inputs: &mut Inputs, on: bool) -> bool {
        let Some(name) = &self.branch else {
            return false;
        };
        let Some((_, t)) = inputs.tensors.iter_mut().find(|(k, _)| k == name) else {
            return false;
        };
        let want = Tensor::from_f64(
            t.dtype(),
            ArrayD::from_elem(IxDyn(t.shape()), on as u8 as f64),
        );
        let Some(want) = want.filter(|w| w != t) else {
            return false;
        };
        *t = want;
        if let Some(s) = inputs.summaries.iter_mut().find(|s| &s.name == name) {
            s.origin = match on {
                true => "true: the with-past branch, after the first step".into(),
                false => "false: the first step's branch (no past yet)".into(),
            };
        }
        true
    }

    /// The inputs of the next step: one token, the mask one longer, the next position, `outputs`' cache.
    fn next(
        &self,
        prev: &Inputs,
        outputs: &HashMap<String, Tensor>,
        token: i64,
        side: &str,
    ) -> Result<Inputs> {
        let mut next = Inputs {
            notes: vec![],
            ..prev.clone()
        };
        let get = |n: &str| prev.tensors.iter().find(|(k, _)| k == n).map(|(_, t)| t);
        let ids =
            get(&self.ids).ok_or_else(|| usage(format!("no `{}` input was prepared", self.ids)))?;
        let batch = ids.shape().first().copied().unwrap_or(1);
        let past_len = self
            .mask
            .as_ref()
            .and_then(|m| get(m))
            .and_then(|m| m.shape().last().copied());
        let mut set = |name: &str, t: Tensor, origin: String| {
            if let Some(slot) = next.tensors.iter_mut().find(|(k, _)| k == name) {
                slot.1 = t.clone();
            }
            if let Some(s) = next.summaries.iter_mut().find(|s| s.name == name) {
                *s = InputSummary {
                    shape: t.shape().to_vec(),
                    origin,
                    dims_from: vec![],
                    non_finite: crate::model::inputs::non_finite(&t),
                    ..s.clone()
                };
            }
        };
        let ints = |dtype: DType, shape: &[usize], v: i64| {
            Tensor::from_f64(dtype, ArrayD::from_elem(IxDyn(shape), v as f64))
                .expect("integer types cast")
        };
        set(
            &self.ids,
            ints(ids.dtype(), &[batch, 1], token),
            format!("token {token}: the reference's greedy choice"),
        );
        if let (Some(m), Some(len)) = (&self.mask, past_len) {
            let dtype = get(m).map(|t| t.dtype()).unwrap_or(DType::I64);
            set(
                m,
                ints(dtype, &[batch, len + 1], 1),
                "ones, one longer".into(),
            );
            if let Some(p) = &self.positions {
                let dtype = get(p).map(|t| t.dtype()).unwrap_or(DType::I64);
                set(
                    p,
                    ints(dtype, &[batch, 1], len as i64),
                    format!("position {len}"),
                );
            }
        }
        for (past, present) in &self.cache {
            let t = outputs.get(present).ok_or_else(|| {
                usage(format!(
                    "the {side} produced no `{present}` to feed back as `{past}`"
                ))
            })?;
            // A merged decoder's with-past branch passes the cross-attention cache on empty: it stays as it was.
            if t.is_empty() && get(past).is_some_and(|p| !p.is_empty()) {
                continue;
            }
            let declared = get(past).map(|t| t.dtype()).unwrap_or(DType::F32);
            let t = if side == "reference" {
                t.clone()
            } else {
                t.cast(declared).unwrap_or_else(|| t.clone())
            };
            set(
                past,
                t,
                format!("the {side}'s own `{present}` from the step before"),
            );
        }
        self.set_branch(&mut next, true);
        Ok(next)
    }
}

/// The graph prepared again for the inputs as they are now (a merged decoder's branch changed), and the targets
/// opened on it.
fn reprepared(s: &CompareSettings, p: &mut Prepared) -> Result<()> {
    let graph = crate::model::load(&s.model)?;
    p.graph = super::prepared_graph(graph, &p.inputs, s.inputs.seed, s.keep_control_flow)?;
    p.targets = (s.targets.iter())
        .map(|spec| crate::targets::open(spec, &p.graph, &p.lib))
        .collect::<Result<Vec<_>>>()?;
    p.paired = (p.targets.iter_mut())
        .map(|t| super::paired::pair(s, t.as_mut(), &p.graph, &p.inputs))
        .collect();
    Ok(())
}

/// A merged decoder's first step takes the branch with no past (unless `--past` gives one, or the input was
/// given): the graph is prepared again for it.
fn first_branch(s: &CompareSettings, p: &mut Prepared, d: &Decoder) -> Result<()> {
    let generated = (d.branch.as_ref())
        .and_then(|b| p.inputs.summaries.iter().find(|x| &x.name == b))
        .is_some_and(|x| x.origin.starts_with("ones"));
    if generated && s.inputs.past == 0 && d.set_branch(&mut p.inputs, false) {
        reprepared(s, p)?;
    }
    Ok(())
}

/// The token with the largest logit at the last position of the first sequence.
fn greedy(logits: &Tensor) -> Option<i64> {
    let a = logits.to_f64_array();
    let vocab = *a.shape().last()?;
    let rows = a.len() / vocab.max(1);
    // [batch, seq, vocab]: the first sequence's last position; [batch, vocab]: the first row.
    let first_seq = match a.ndim() {
        0..=2 => 1,
        _ => a.shape()[1].max(1),
    };
    let row = (first_seq.min(rows)).checked_sub(1)?;
    let last = a.as_slice()?.get(row * vocab..(row + 1) * vocab)?;
    last.iter()
        .enumerate()
        .max_by(|x, y| x.1.total_cmp(y.1))
        .map(|(i, _)| i as i64)
}

/// Runs the steps; returns the report to show (first failing step, else the last) and its inputs.
pub fn compare_steps(s: &CompareSettings) -> Result<(Report, Inputs)> {
    if s.targets.len() != 1 || s.budget().is_some() {
        return Err(usage(
            "runs one target with every value held: drop extra --ep and --max-memory".into(),
        ));
    }
    let t_all = Instant::now();
    let mut p: Prepared = prepare(s)?;
    let decoder = Decoder::of(&p.graph)?;
    first_branch(s, &mut p, &decoder)?;
    let mut lines = vec![];
    let mut shown: Option<(usize, Report, Inputs)> = None;
    for step in 0..s.steps {
        let began = std::time::Instant::now();
        let f = stages(s, &mut p, t_all, false)?;
        let took = began.elapsed().as_secs_f64();
        let report = f.reports.into_iter().next().expect("one target");
        let logits = |o: &HashMap<String, Tensor>| o.get(&decoder.logits).and_then(greedy);
        let (r_tok, t_tok) = (logits(&f.ref_outputs), logits(&f.target_outputs));
        let out = report
            .nodes
            .iter()
            .flat_map(|n| n.values.iter())
            .find(|v| v.name == decoder.logits);
        let err = out
            .and_then(|v| v.metrics.as_ref())
            .map(|m| format!("max |Δ| {:.3e}", m.max_abs))
            .unwrap_or_default();
        let flip = match (r_tok, t_tok) {
            (Some(a), Some(b)) if a != b => {
                format!("; the target would pick token {b}, the reference {a}")
            }
            _ => String::new(),
        };
        let first = report
            .verdict
            .first_divergence
            .as_ref()
            .map(|d| format!("; first divergence `{}`", d.node))
            .unwrap_or_default();
        let status = format!("{:?}", report.verdict.status).to_lowercase();
        lines.push(format!(
            "step {step}: {status} — `{}` {err}{first}{flip} ({took:.1} s)",
            decoder.logits
        ));
        let fails = report.verdict.status.fails(false);
        if shown
            .as_ref()
            .is_none_or(|(_, r, _)| !r.verdict.status.fails(false))
            && (fails || step + 1 == s.steps)
        {
            shown = Some((step, report, p.inputs.clone()));
        }
        if step + 1 == s.steps {
            break;
        }
        let token = r_tok.ok_or_else(|| {
            usage(format!(
                "no logits `{}` from the reference to pick a token",
                decoder.logits
            ))
        })?;
        let target_prev = p.target_inputs.clone().unwrap_or_else(|| p.inputs.clone());
        p.target_inputs = Some(decoder.next(&target_prev, &f.target_outputs, token, "target")?);
        let branch = |i: &Inputs| {
            decoder
                .branch
                .as_ref()
                .and_then(|b| i.tensors.iter().find(|(k, _)| k == b))
                .cloned()
        };
        let before = branch(&p.inputs);
        p.inputs = decoder.next(&p.inputs, &f.ref_outputs, token, "reference")?;
        if branch(&p.inputs) != before {
            reprepared(s, &mut p)?;
        }
    }
    let (step, mut report, inputs) = shown.expect("at least one step");
    report.notes.insert(
        0,
        format!("decoding steps ({}; this report is step {step}):", s.steps),
    );
    for (k, l) in lines.into_iter().enumerate() {
        report.notes.insert(1 + k, l);
    }
    Ok((report, inputs))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logits of `shape`, zero but for a 1 at each of `hot` (flat indices).
    fn logits(shape: &[usize], hot: &[usize]) -> Tensor {
        let mut v = vec![0.0; shape.iter().product()];
        hot.iter().for_each(|&k| v[k] = 1.0 + k as f64);
        Tensor::F64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
    }

    #[test]
    fn greedy_reads_the_first_sequences_last_position() {
        // [batch 2, seq 3, vocab 4]: the first sequence's last position is elements 8..12; the second sequence's
        // larger logit (element 13) is not read.
        assert_eq!(greedy(&logits(&[2, 3, 4], &[8 + 2, 13])), Some(2));
        // [batch 2, vocab 4]: the first row.
        assert_eq!(greedy(&logits(&[2, 4], &[1, 4 + 3])), Some(1));
    }
}
