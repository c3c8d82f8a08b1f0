//! Segment-wise comparison for models too big for one machine, in three commands a cluster scheduler can fan out:
//!
//! ```text
//! phantom plan MODEL -o PLAN/      cut the graph in topological order into segments; write the manifest and inputs
//! phantom segment PLAN/ --boundary each segment in order: store both sides' boundary values (reference in f64,
//!                                  expected noise in f64, target in its own type)
//! phantom segment PLAN/ --index I  one segment, fed those values: compare, attribute, explain; a partial report
//! phantom merge PLAN/              the partial reports joined into one report, verdict recomputed on the whole graph
//! ```
//!
//! A segment is a cut of the model ([`crate::model::cut::cut`]) run through the same stages as `phantom onnx`,
//! with each side fed its own values of the boundary: the target inherits its own drift exactly as in a whole-model
//! run, so the values inside a segment match the whole run's within rounding.

mod estimate;
mod feed;
pub mod merge;
pub mod plan;
pub mod run;
mod store;

pub use store::report_path as store_report_path;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{self, inputs::Inputs, Graph};
use crate::pipeline::CompareSettings;
use crate::tensor::DType;

pub const PLAN_SCHEMA: &str = "phantom-plan/1";
/// The manifest's file name inside PLAN/.
pub const MANIFEST: &str = "plan.json";

/// The manifest `phantom plan` writes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub schema: String,
    pub phantom_version: String,
    /// The model, as an absolute path (every segment job reads it).
    pub model: PathBuf,
    pub model_sha256: String,
    /// Target, tolerance and options; the inputs are the stored ones below.
    pub settings: CompareSettings,
    /// The model's inputs, made once and stored under `inputs/` so that every job runs on the same values.
    pub inputs: Vec<StoredInput>,
    pub segments: Vec<Segment>,
    /// Nodes in the model, for checking that a job sees the same graph.
    pub nodes: usize,
    pub notes: Vec<String>,
    /// `--custom-op-library` paths given to `phantom plan`: every segment job registers them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom_op_libraries: Vec<PathBuf>,
}

/// One graph input, stored as `.npy`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredInput {
    pub name: String,
    pub file: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub origin: String,
}

/// One segment: a run of consecutive nodes in topological order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Segment {
    pub index: usize,
    /// Topological indices of its first and last node.
    pub first: usize,
    pub last: usize,
    /// Node names, in order.
    pub nodes: Vec<String>,
    /// Values it reads that earlier segments compute, with the segment computing each.
    pub reads: Vec<BoundaryValue>,
    /// Graph inputs it reads.
    pub graph_inputs: Vec<String>,
    /// Values it computes that later segments read (its boundary outputs, stored by the boundary pass).
    pub hands_on: Vec<String>,
    /// The initializers it reads, where their bytes are.
    pub weights: Vec<Weight>,
    pub weight_bytes: u64,
    pub estimate: Estimate,
}

/// A value crossing into a segment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BoundaryValue {
    pub name: String,
    /// The segment computing it.
    pub from: usize,
}

/// An initializer a segment reads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Weight {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<i64>,
    pub bytes: u64,
    /// Where its data lives when it is external: the file (relative to the model) and the byte range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<ByteRange>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByteRange {
    pub file: String,
    pub offset: u64,
    pub length: u64,
}

/// A segment's estimated peak memory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Estimate {
    /// One `phantom segment` job, both sides at once: 2.5× its large float weights counted in float32 (the cut
    /// model, the reference's stored copy, ONNX Runtime's session), 2.75× its small weights in f64, its values as
    /// `phantom onnx` holds them, and 64 MiB for the process.
    pub job_bytes: u64,
    /// The f64 reference: its large float weights as stored and the largest widened, its small weights in f64, plus
    /// the intermediates it holds (where sized).
    pub reference_bytes: u64,
    /// The target: its weights as stored (plus the converted copy in fp16/bf16), plus its intermediates.
    pub target_bytes: u64,
    /// Values of the segment sized (from tract's typing of the model's structure, or declared shapes), of all it
    /// computes and reads.
    pub sized_values: usize,
    pub values: usize,
}

impl Plan {
    /// Reads PLAN/plan.json.
    pub fn load(dir: &Path) -> Result<Plan> {
        let path = dir.join(MANIFEST);
        let bytes = std::fs::read(&path).map_err(|e| {
            Error::Usage(format!(
                "{}: {e}; is {} a directory written by `phantom plan`?",
                path.display(),
                dir.display()
            ))
        })?;
        let plan: Plan = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Usage(format!("{}: not a phantom plan ({e})", path.display())))?;
        if plan.schema != PLAN_SCHEMA {
            return Err(Error::Usage(format!(
                "{}: schema `{}`, this phantom reads `{PLAN_SCHEMA}`; run `phantom plan` again",
                path.display(),
                plan.schema
            )));
        }
        Ok(plan)
    }

    /// The segment `index`, or an error naming the range.
    pub fn segment(&self, index: usize) -> Result<&Segment> {
        self.segments.get(index).ok_or_else(|| {
            Error::Usage(format!(
                "segment index {index} is out of range: the plan has {} segment(s), 0..{}",
                self.segments.len(),
                self.segments.len().saturating_sub(1)
            ))
        })
    }
}

/// The model as every stage sees it: loaded, its taken `If` branches inlined (unless the plan keeps control flow)
/// and its random nodes seeded, exactly as `phantom onnx` prepares it; checked against the plan's hash.
pub fn load_graph(plan: &Plan, inputs: &Inputs) -> Result<Graph> {
    let graph = model::load(&plan.model)?;
    if graph.sha256 != plan.model_sha256 {
        return Err(Error::Usage(format!(
            "{} changed since the plan was made (sha256 {} in the plan, {} now); run `phantom plan` again",
            plan.model.display(),
            short(&plan.model_sha256),
            short(&graph.sha256)
        )));
    }
    transformed(graph, &plan.settings, inputs)
}

/// The transformations `pipeline::prepare` applies before comparing.
pub fn transformed(graph: Graph, s: &CompareSettings, inputs: &Inputs) -> Result<Graph> {
    crate::pipeline::prepared_graph(graph, inputs, s.inputs.seed, s.keep_control_flow)
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// Peak resident memory of this process so far (Linux `VmHWM`), in bytes.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Where ONNX Runtime's CPU EP runs a float16/bfloat16 model (native, or phantom's conversion) cut into segments: it
/// computes such nodes in float32 behind casts it inserts, so in a whole run a value's readers can get the float32
/// value it never exposes, while a segment reads the value handed across the cut, rounded to the model's type. The
/// merged figures of the nodes just after a cut can then differ from a whole run's by that rounding.
fn low_precision_cuts_note(graph: &Graph, s: &CompareSettings, segments: usize) -> Option<String> {
    let native = graph
        .initializers
        .values()
        .any(|i| matches!(i.dtype, DType::F16 | DType::Bf16));
    let on_cpu =
        (s.targets.iter()).any(|t| t.is_ort_on("cpu") && (native || t.precision.is_some()));
    (segments > 1 && on_cpu).then(|| {
        "values handed across cuts are stored in the model's float16/bfloat16 type, but ONNX Runtime's CPU EP \
         computes such nodes in float32 behind casts it inserts: where a whole run's readers get a value in float32, \
         a segment's get it rounded, so the merged figures of the nodes just after a cut can differ from a whole \
         run's by that rounding"
            .to_string()
    })
}
