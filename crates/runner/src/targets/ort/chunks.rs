//! Bounded memory on ONNX Runtime, chunk by chunk without rerunning the prefix: each chunk runs only the target
//! model's nodes it needs that have not run yet, cut out as a model of its own with every value it computes
//! exposed, fed with the values earlier chunks computed (kept on disk in the target's own types).
//!
//! A whole run exposes every value, which keeps ONNX Runtime from fusing across any of them; a chunk exposing only
//! its own values would let it fuse across the others and round differently (an fp16 model moved from 371 to 160
//! failing values that way). A cut exposes every value it computes and reads every other as an input, so nothing
//! fuses across a value here either, and each value is the whole run's. The declared outputs come from one run of
//! the unmodified model, as in a whole run. Models with control-flow nodes run each chunk as the whole model
//! exposing that chunk instead ([`crate::targets::Reruns`]).
//!
//! The state (nodes run, values kept on disk) can outlive one chunked run: after [`crate::targets::Target::keep_chunks`]
//! the next run keeps every value it computes, and the run after it, on the same model and inputs, goes on from
//! there. A bounded comparison fetches the target's discrete decisions first, which runs most of the model; the
//! comparison then reads those values from disk instead of running the model a second time.

use std::collections::{HashMap, HashSet};

use crate::error::Result;
use crate::model::cut::{cut_as, Boundary, Feed, Weights};
use crate::model::inputs::Inputs;
use crate::model::surgery::base_name;
use crate::model::Graph;
use crate::ort::{note_moved, run_session, OrtRunner};
use crate::spill::{Spill, Values};
use crate::targets::Chunks;
use crate::tensor::Tensor;

/// The target model run range by range; its state lives in the target, so a later run can go on from it.
pub struct CutRuns<'a> {
    runner: &'a mut OrtRunner,
    /// The reference's graph (for whole-model reruns once a cut failed).
    graph: &'a Graph,
    inputs: &'a Inputs,
    /// What has run and what it computed; `Some` while this run lasts.
    state: &'a mut Option<CutState>,
    /// Whether the next run goes on from this one: it then keeps every value, also those it handed back.
    keep: bool,
}

/// What a chunked run has done so far.
pub struct CutState {
    /// The model and inputs this state is for.
    key: u64,
    /// Why a cut failed, after which every chunk reran the whole model exposing its values.
    fallback: Option<String>,
    /// The model the target runs (its own, or the reference's).
    model: Graph,
    /// Nodes of `model` run so far.
    done: HashSet<usize>,
    /// The node producing each value, and those reading it (by target name).
    producer: HashMap<String, usize>,
    consumers: HashMap<String, Vec<usize>>,
    /// Every value computed so far, by target name.
    kept: Spill,
    /// Shapes of the values computed so far and of the inputs, by the original value's name.
    shapes: HashMap<String, Vec<usize>>,
    /// Values computed from initializers alone: embedded in a cut as the constants they are.
    constants: HashSet<String>,
    /// The declared outputs, from the unmodified model.
    plain: HashMap<String, Tensor>,
    /// Cuts run so far, and how many of them an earlier chunked run made (the discrete decisions' fetch).
    cuts: usize,
    earlier: usize,
}

impl<'a> CutRuns<'a> {
    /// Whether `model` can be cut node by node (no control-flow bodies).
    pub fn applies(model: &Graph) -> bool {
        model.nodes.iter().all(|n| n.subgraph_nodes == 0)
    }

    /// Goes on from `state` when it is for this model and these inputs; otherwise starts on `graph` (or the
    /// target's own model), running the unmodified model for the declared outputs. `keep`: the next run goes on
    /// from this one.
    pub fn new(
        runner: &'a mut OrtRunner,
        (graph, inputs): (&'a Graph, &'a Inputs),
        state: &'a mut Option<CutState>,
        keep: bool,
    ) -> Result<CutRuns<'a>> {
        let key = key(runner.target_model.as_ref().unwrap_or(graph), inputs);
        match state.as_mut() {
            Some(s) if s.key == key => s.earlier = s.cuts,
            _ => {
                *state = None;
                runner.instrumentation = None;
                let plain = runner.run_plain(graph, inputs)?.values;
                let model = runner.target_model.clone().unwrap_or_else(|| graph.clone());
                *state = Some(CutState::new(model, inputs, plain, key)?);
            }
        }
        Ok(CutRuns {
            runner,
            graph,
            inputs,
            state,
            keep,
        })
    }
}

impl Drop for CutRuns<'_> {
    fn drop(&mut self) {
        if !self.keep {
            *self.state = None;
        }
    }
}

/// What identifies a chunked run's model and inputs (their names, shapes and elements).
fn key(model: &Graph, inputs: &Inputs) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&model.path, model.nodes.len()).hash(&mut h);
    for (name, t) in &inputs.tensors {
        (name, t.shape(), t.dtype().name()).hash(&mut h);
        // Element by element, without a widened copy of an input that may take gigabytes.
        crate::dispatch_tensor!(
            t,
            a => a.iter().for_each(|v| crate::tensor::ToF64::to_f64(*v).to_bits().hash(&mut h)),
            s => s.iter().for_each(|v| v.hash(&mut h))
        );
    }
    h.finish()
}

impl CutState {
    fn new(
        model: Graph,
        inputs: &Inputs,
        plain: HashMap<String, Tensor>,
        key: u64,
    ) -> Result<CutState> {
        let producer = model
            .nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(move |o| (o.clone(), n.index)))
            .collect();
        let mut consumers: HashMap<String, Vec<usize>> = HashMap::new();
        for n in &model.nodes {
            for i in n.inputs.iter().filter(|i| !i.is_empty()) {
                consumers.entry(i.clone()).or_default().push(n.index);
            }
        }
        let shapes = inputs
            .tensors
            .iter()
            .map(|(n, t)| (n.clone(), t.shape().to_vec()))
            .collect();
        let constants = model
            .constant_derived()
            .into_iter()
            .map(String::from)
            .collect();
        Ok(CutState {
            key,
            fallback: None,
            model,
            done: HashSet::new(),
            producer,
            consumers,
            kept: Spill::new("target")?,
            shapes,
            constants,
            plain,
            cuts: 0,
            earlier: 0,
        })
    }

    /// The nodes not run yet that `names` need: their producers and, up the graph, those producers' own.
    fn needed(&self, names: &[&str]) -> HashSet<usize> {
        let mut keep = HashSet::new();
        let mut stack: Vec<usize> = names
            .iter()
            .filter_map(|n| self.producer.get(*n).copied())
            .collect();
        while let Some(i) = stack.pop() {
            if self.done.contains(&i) || !keep.insert(i) {
                continue;
            }
            let reads = self.model.nodes[i].inputs.iter();
            stack.extend(reads.filter_map(|v| self.producer.get(v).copied()));
        }
        keep
    }

    /// Runs the nodes `keep` as one cut: the values of `names` it computes, handed back; every other value, and
    /// those later nodes read, kept on disk (all of them with `hold_all`).
    fn run_cut(
        &mut self,
        runner: &mut OrtRunner,
        inputs: &Inputs,
        (keep, names): (HashSet<usize>, &[&str]),
        hold_all: bool,
    ) -> Result<HashMap<String, Tensor>> {
        crate::error::injected("chunked-capture")?;
        let shapes = &self.shapes;
        let shape_of = |base: &str| shapes.get(base).cloned();
        let (kept, constants) = (&self.kept, &self.constants);
        let embed = |f: &Feed| -> Result<Option<Tensor>> {
            Ok(match constants.contains(&f.name) {
                true => kept.tensor(&f.name).map(|t| t.into_owned()),
                false => None,
            })
        };
        let boundary = Boundary {
            shape_of: &shape_of,
            embed: &embed,
        };
        // Beside the model, so that its external data resolves there: the session reads the cut's weights itself.
        let path = self.model.path.with_extension("chunk.onnx");
        let c = cut_as(
            &self.model,
            (&keep, &keep),
            &boundary,
            &path,
            Weights::Referenced,
        )?;
        let mut feeds = Inputs::default();
        for f in &c.feeds {
            let t = match inputs.tensors.iter().find(|(n, _)| *n == f.name) {
                Some((_, t)) => t.clone(),
                None => self
                    .kept
                    .tensor(&f.name)
                    .map(|t| t.into_owned())
                    .ok_or_else(|| crate::error::Error::Ort {
                        reason: format!(
                            "bounded run: the target's value `{}` was not kept",
                            f.name
                        ),
                    })?,
            };
            feeds.tensors.push((f.name.clone(), t));
        }
        let mut session = runner.session_for(&c.graph)?;
        let outputs = run_session(&mut session, &feeds, &c.graph)?;
        drop(session);
        self.cuts += 1;
        self.done.extend(keep);
        let asked: HashSet<&str> = names.iter().copied().collect();
        let mut fresh = HashMap::new();
        for (name, v) in outputs {
            let Ok(t) = v else { continue };
            self.shapes
                .insert(base_name(&name).to_string(), t.shape().to_vec());
            let read_later = self
                .consumers
                .get(&name)
                .is_some_and(|c| c.iter().any(|i| !self.done.contains(i)));
            let asked = asked.contains(name.as_str());
            if hold_all || read_later || !asked || self.constants.contains(&name) {
                self.kept.put(&name, &t)?;
            }
            if asked {
                fresh.insert(name, t);
            }
        }
        Ok(fresh)
    }

    /// The values of `names`: the declared outputs from the unmodified run, the rest from a cut of the nodes not
    /// run yet that they need.
    fn cut_next(
        &mut self,
        runner: &mut OrtRunner,
        inputs: &Inputs,
        names: &[&str],
        hold_all: bool,
    ) -> Result<HashMap<String, Tensor>> {
        let keep = self.needed(names);
        let mut fresh = match keep.is_empty() {
            true => HashMap::new(),
            false => self.run_cut(runner, inputs, (keep, names), hold_all)?,
        };
        let mut out = HashMap::new();
        for n in names {
            let v = match self.plain.get(*n) {
                Some(t) if !self.model.handed_on.contains(&n.to_string()) => {
                    if let Some(exposed) = fresh.get(*n) {
                        note_moved(&mut runner.instrumentation, t, exposed);
                    }
                    Some(t.clone())
                }
                _ => fresh
                    .remove(*n)
                    .or_else(|| self.kept.tensor(n).map(|t| t.into_owned())),
            };
            if let Some(t) = v {
                out.insert(n.to_string(), t);
            }
        }
        Ok(out)
    }
}

impl Chunks for CutRuns<'_> {
    /// The values of `names` from a cut; once a cut has failed, from a rerun of the whole model exposing them.
    fn next(&mut self, names: &[&str]) -> Result<HashMap<String, Tensor>> {
        let st = self.state.as_mut().expect("a chunked run's state");
        if st.fallback.is_none() {
            match st.cut_next(self.runner, self.inputs, names, self.keep) {
                Ok(out) => return Ok(out),
                Err(e) => st.fallback = Some(e.to_string()),
            }
        }
        Ok(self
            .runner
            .run_names(self.graph, self.inputs, names)?
            .values)
    }

    fn ran(&self) -> String {
        let Some(st) = self.state.as_ref() else {
            return String::new();
        };
        let earlier = match st.earlier {
            0 => String::new(),
            n => format!(
                " ({n} of them run before the comparison, for the target's discrete decisions, their values read \
                 again from disk)"
            ),
        };
        format!(
            "the target ran the unmodified model once for its outputs and its nodes once each, in {} cut(s) \
             exposing every value they compute{earlier}",
            st.cuts
        )
    }

    fn notes(&self) -> Vec<String> {
        let Some(why) = self.state.as_ref().and_then(|s| s.fallback.as_ref()) else {
            return vec![];
        };
        let why = why.lines().next().unwrap_or("");
        vec![format!(
            "chunked capture: a cut of the target model failed ({why}); from that chunk on, each chunk reran the \
             whole model exposing its values, where ONNX Runtime may fuse across the others"
        )]
    }
}
