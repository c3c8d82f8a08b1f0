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

use std::collections::{HashMap, HashSet};

use crate::error::Result;
use crate::model::cut::{cut, Boundary, Feed};
use crate::model::inputs::Inputs;
use crate::model::surgery::base_name;
use crate::model::Graph;
use crate::runner::ort::{run_session, OrtRunner};
use crate::spill::{Spill, Values};
use crate::targets::Chunks;
use crate::tensor::Tensor;

/// The target model run range by range.
pub struct CutRuns<'a> {
    runner: &'a mut OrtRunner,
    /// The reference's graph (for whole-model reruns once a cut failed).
    graph: &'a Graph,
    /// Why a cut failed, after which every chunk reran the whole model exposing its values.
    fallback: Option<String>,
    /// The model the target runs (its own, or the reference's).
    model: Graph,
    inputs: &'a Inputs,
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
}

impl<'a> CutRuns<'a> {
    /// Whether `model` can be cut node by node (no control-flow bodies).
    pub fn applies(model: &Graph) -> bool {
        model.nodes.iter().all(|n| n.subgraph_nodes == 0)
    }

    /// Starts on `graph` (or the target's own model): runs the unmodified model for the declared outputs.
    pub fn new(
        runner: &'a mut OrtRunner,
        graph: &'a Graph,
        inputs: &'a Inputs,
    ) -> Result<CutRuns<'a>> {
        let plain = runner.run_plain(graph, inputs)?.values;
        let model = runner.target_model.clone().unwrap_or_else(|| graph.clone());
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
        Ok(CutRuns {
            runner,
            graph,
            fallback: None,
            model,
            inputs,
            done: HashSet::new(),
            producer,
            consumers,
            kept: Spill::new("target")?,
            shapes,
            constants,
            plain,
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
    /// those later nodes read, kept on disk.
    fn run_cut(&mut self, keep: HashSet<usize>, names: &[&str]) -> Result<HashMap<String, Tensor>> {
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
        let path = self.model.path.with_extension("chunk.onnx");
        let c = cut(&self.model, &keep, &keep, &boundary, &path)?;
        let mut feeds = Inputs::default();
        for f in &c.feeds {
            let t = match self.inputs.tensors.iter().find(|(n, _)| *n == f.name) {
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
        let mut session = self.runner.session_for(&c.graph)?;
        let outputs = run_session(&mut session, &feeds, &c.graph)?;
        drop(session);
        self.done.extend(keep);
        let mut fresh = HashMap::new();
        for (name, v) in outputs {
            let Ok(t) = v else { continue };
            self.shapes
                .insert(base_name(&name).to_string(), t.shape().to_vec());
            let read_later = self
                .consumers
                .get(&name)
                .is_some_and(|c| c.iter().any(|i| !self.done.contains(i)));
            let asked = names.contains(&name.as_str());
            if read_later || !asked || self.constants.contains(&name) {
                self.kept.put(&name, &t)?;
            }
            if asked {
                fresh.insert(name, t);
            }
        }
        Ok(fresh)
    }
}

impl Chunks for CutRuns<'_> {
    /// The values of `names` from a cut; once a cut has failed, from a rerun of the whole model exposing them.
    fn next(&mut self, names: &[&str]) -> Result<HashMap<String, Tensor>> {
        if self.fallback.is_none() {
            match self.cut_next(names) {
                Ok(out) => return Ok(out),
                Err(e) => self.fallback = Some(e.to_string()),
            }
        }
        Ok(self
            .runner
            .run_names(self.graph, self.inputs, names)?
            .values)
    }

    fn notes(&self) -> Vec<String> {
        let Some(why) = &self.fallback else {
            return vec![];
        };
        let why = why.lines().next().unwrap_or("");
        vec![format!(
            "chunked capture: a cut of the target model failed ({why}); from that chunk on, each chunk reran the \
             whole model exposing its values, where ONNX Runtime may fuse across the others"
        )]
    }
}

impl CutRuns<'_> {
    /// The values of `names`: the declared outputs from the unmodified run, the rest from a cut of the nodes not
    /// run yet that they need.
    fn cut_next(&mut self, names: &[&str]) -> Result<HashMap<String, Tensor>> {
        let keep = self.needed(names);
        let mut fresh = match keep.is_empty() {
            true => HashMap::new(),
            false => self.run_cut(keep, names)?,
        };
        let mut out = HashMap::new();
        for n in names {
            let v = match self.plain.get(*n) {
                Some(t) if !self.model.handed_on.contains(&n.to_string()) => Some(t.clone()),
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
