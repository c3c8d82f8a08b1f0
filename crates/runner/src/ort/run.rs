//! ONNX Runtime runs: the unmodified model (declared outputs), every value exposed (plus the unmodified model, to
//! tell whether exposing moved the outputs), or chosen values only (bounded memory, bisection). Sessions are kept
//! between runs when [`OrtRunner::reuse`] is set.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::{instrumented_bytes, run_session, OrtRunner};
use crate::error::{Error, Result};
use crate::facts::Instrumentation;
use crate::model::inputs::Inputs;
use crate::model::surgery::with_outputs;
use crate::model::Graph;
use crate::tensor::Tensor;
use crate::RunOutput;

type Outputs = Vec<(String, std::result::Result<Tensor, String>)>;

/// Which model bytes a session is built from.
enum Bytes<'a> {
    Plain,
    Instrumented,
    Extra(&'a [&'a str]),
}

impl OrtRunner {
    /// Runs `graph` built from `bytes` on `inputs`, in the cached session of that key when sessions are reused.
    fn run_with(&mut self, graph: &Graph, bytes: Bytes, inputs: &Inputs) -> Result<Outputs> {
        let key = match &bytes {
            Bytes::Plain => "plain".to_string(),
            Bytes::Instrumented => "every value".to_string(),
            Bytes::Extra(n) => n.join("\u{1f}"),
        };
        if let Some(s) = self.cache.get_mut(&key) {
            return run_session(s, inputs, graph);
        }
        let data = match bytes {
            Bytes::Plain => None,
            Bytes::Instrumented => Some(instrumented_bytes(graph)),
            Bytes::Extra(n) => Some(with_outputs(&graph.bytes, n)),
        };
        let placements: Arc<Mutex<super::placement::Log>> = Arc::default();
        let mut session = self.session(
            graph,
            data.as_deref().unwrap_or(&graph.bytes),
            placements.clone(),
        )?;
        let placed = super::placement::parse(&placements.lock().expect("placement log").messages);
        if let Some(e) = super::placement::refused(&placed, self.ep_name(), &self.widen_hint()) {
            return Err(e);
        }
        if !placed.is_empty() {
            self.placed = super::placement::summary(&placed, self.ep_name());
            self.placement = placed;
        }
        let out = run_session(&mut session, inputs, graph)?;
        if self.reuse {
            self.cache.insert(key, session);
        }
        Ok(out)
    }

    /// Runs `f` on the model the target runs (its own, or `graph`).
    fn on_target<R>(
        &mut self,
        graph: &Graph,
        f: impl FnOnce(&mut Self, &Graph) -> Result<R>,
    ) -> Result<R> {
        let own = self.target_model.take();
        let r = f(self, own.as_ref().unwrap_or(graph));
        self.target_model = own;
        r
    }

    /// Runs the model the target runs `runs` times in one session with ONNX Runtime's profiler on; the trace's
    /// text (a Chrome trace, read back from the file ONNX Runtime writes).
    pub fn profiled(&mut self, graph: &Graph, inputs: &Inputs, runs: usize) -> Result<String> {
        let dir = tempfile::tempdir()
            .map_err(|e| crate::error::temp_error("ONNX Runtime's profile", e))?;
        self.profiling = Some(dir.path().join("ort"));
        let g = self.target_model.clone().unwrap_or_else(|| graph.clone());
        let session = self.session_for(&g);
        self.profiling = None;
        let mut session = session?;
        for _ in 0..runs {
            run_session(&mut session, inputs, &g)?;
        }
        let path = session.end_profiling().map_err(|e| Error::Ort {
            reason: format!("ONNX Runtime's profiler: {e}"),
        })?;
        std::fs::read_to_string(&path).map_err(|e| Error::Io {
            path: path.into(),
            source: e,
        })
    }

    /// Runs the unmodified model once and returns its declared outputs only.
    pub fn run_plain(&mut self, graph: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        self.on_target(graph, |me, g| {
            let mut out = RunOutput::default();
            sort_into(&mut out, me.run_with(g, Bytes::Plain, inputs)?);
            out.facts = Some(me.facts(g, &me.placed.clone()));
            Ok(out)
        })
    }

    /// Runs the model exposing only `names` (besides its declared outputs) and returns those values.
    pub fn run_names(
        &mut self,
        graph: &Graph,
        inputs: &Inputs,
        names: &[&str],
    ) -> Result<RunOutput> {
        self.on_target(graph, |me, g| {
            let declared: HashSet<&str> = g.outputs.iter().map(|o| o.name.as_str()).collect();
            let exposable: HashSet<&str> = g.computed_values().into_iter().collect();
            let extra: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| !declared.contains(n) && exposable.contains(n))
                .collect();
            let wanted: HashSet<&str> = names.iter().copied().collect();
            let got = me.run_with(g, Bytes::Extra(&extra), inputs)?;
            let mut out = RunOutput::default();
            sort_into(
                &mut out,
                got.into_iter().filter(|(n, _)| wanted.contains(n.as_str())),
            );
            out.facts = Some(me.facts(g, &me.placed.clone()));
            Ok(out)
        })
    }

    /// Every value exposed; the declared outputs from the unmodified model.
    fn run_all(&mut self, g: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        let plain = self.run_with(g, Bytes::Plain, inputs)?;
        let placed = self.placed.clone();
        let every = self.run_with(g, Bytes::Instrumented, inputs)?;
        let mut out = RunOutput::default();
        sort_into(&mut out, every);
        self.instrumentation = None;
        for (name, v) in plain {
            let Ok(t) = v else { continue };
            if g.handed_on.contains(&name) {
                continue;
            }
            if let Some(i) = out.values.get(&name) {
                note_moved(&mut self.instrumentation, &t, i);
            }
            out.values.insert(name, t);
        }
        out.facts = Some(self.facts(g, &placed));
        Ok(out)
    }
}

/// Records in `instrumentation` whether a declared output of the plain run differs from the same value computed
/// with every value exposed (the outputs the verdict reads are the plain run's).
pub fn note_moved(instrumentation: &mut Option<Instrumentation>, plain: &Tensor, exposed: &Tensor) {
    let i = instrumentation.get_or_insert(Instrumentation {
        outputs_moved: false,
        max_abs_change: 0.0,
        outputs_from_plain_run: true,
    });
    if plain != exposed {
        i.outputs_moved = true;
        i.max_abs_change = i.max_abs_change.max(largest_change(exposed, plain));
    }
}

/// Largest element-wise change between two versions of a value (infinite when the shapes differ).
fn largest_change(a: &Tensor, b: &Tensor) -> f64 {
    if a.shape() != b.shape() {
        return f64::INFINITY;
    }
    let (a, b) = (a.to_f64_array(), b.to_f64_array());
    a.iter()
        .zip(b.iter())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Values into `out.values`, failures into `out.missing`.
fn sort_into(
    out: &mut RunOutput,
    got: impl IntoIterator<Item = (String, std::result::Result<Tensor, String>)>,
) {
    for (name, v) in got {
        match v {
            Ok(t) => {
                out.values.insert(name, t);
            }
            Err(why) => {
                out.missing.insert(name, why);
            }
        }
    }
}

/// The engine's name and version, and one run capturing every value it can.
impl OrtRunner {
    /// Short name used in reports (`tract-f64`, `onnxruntime`, `wgpu`).
    pub fn name(&self) -> String {
        "onnxruntime".into()
    }

    /// Version string of the underlying engine.
    pub fn version(&self) -> String {
        self.env.2.clone()
    }

    /// Evaluates `graph` on `inputs`, capturing every value it can.
    pub fn run(&mut self, graph: &Graph, inputs: &Inputs) -> Result<RunOutput> {
        self.on_target(graph, |me, g| me.run_all(g, inputs))
    }
}
