//! The one report model behind every rendering (terminal, JSON, and later HTML/JUnit). Field docs here are
//! the documentation of the JSON report; `schema/report.schema.json` is generated from these types.

use std::collections::BTreeMap;

pub use crate::precision::conversion::ConversionReport;
pub use phantom_engine::computed::RefPrecision;
pub use phantom_engine::facts::{HostKind, HostPlacement, Instrumentation, TargetFacts};
use serde::Serialize;

mod findings;
pub mod multi;
mod pairing;
pub use findings::{Anomaly, Basis, Cause, CauseKind, Confidence, Culprit, FusedSaturation};
pub use pairing::Pairing;

use crate::compare::{Detail, Metrics, Stats, Tolerance, Worst};
use crate::model::inputs::InputSummary;
use crate::model::HiddenValue;
use crate::tensor::DType;

/// Version of the report layout; bumped on incompatible changes.
pub const SCHEMA_VERSION: &str = "phantom-report/3";

/// A whole comparison run.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Report {
    /// Always [`SCHEMA_VERSION`].
    pub schema: String,
    pub phantom_version: String,
    /// The command line that produced this report.
    pub command: Vec<String>,
    pub model: ModelSummary,
    /// A second model run on the target (`--target-model`), values matched by name.
    pub target_model: Option<ModelRef>,
    /// What phantom's fp16/bf16 conversion did (`--precision`).
    pub conversion: Option<ConversionReport>,
    pub environment: Environment,
    pub reference: RunnerInfo,
    pub target: TargetInfo,
    pub tolerance: ToleranceReport,
    pub inputs: Vec<InputSummary>,
    pub verdict: Verdict,
    pub coverage: Coverage,
    /// Whether exposing intermediates changed the target's final outputs.
    pub instrumentation: Option<Instrumentation>,
    /// Every top-level node in topological order.
    pub nodes: Vec<NodeReport>,
    pub timings: Timings,
    /// Things the user should know about this run (defaulted dims, reference fallbacks...).
    pub notes: Vec<String>,
    /// With several input samples (`--samples`, several test_data_set directories): each sample's own verdict.
    /// Per value the worst sample's figures are shown (`sample` on the value); `inputs` are the worst sample's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<SampleVerdict>,
}

/// One input sample's own verdict, in a report merged over several samples.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SampleVerdict {
    pub index: usize,
    /// `seed 3`, or the test_data_set directory.
    pub label: String,
    pub status: Status,
    pub failing_values: usize,
    pub first_divergence: Option<NodeRef>,
    /// Culprit node names.
    pub culprits: Vec<String>,
    /// Anomalous node names.
    pub anomalies: Vec<String>,
    /// Whether the report's verdict, culprits and inputs come from this sample (the worst).
    pub decides: bool,
}

#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ModelRef {
    pub path: String,
    pub sha256: String,
    /// How its values were paired with the model's (`--target-model`: by what they compute in f64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairing: Option<Pairing>,
}

#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ModelSummary {
    pub path: String,
    pub sha256: String,
    pub ir_version: i64,
    /// Opset imports as (domain, version); the default domain is written `ai.onnx`.
    pub opsets: BTreeMap<String, i64>,
    pub producer: String,
    pub nodes: usize,
    /// True when the file's node order was not topological.
    pub was_unsorted: bool,
    /// Values inside `If`/`Loop`/`Scan` bodies: graph outputs cannot reach them, so they are not compared.
    pub hidden_values: Vec<HiddenValue>,
}

/// Where the run happened.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Environment {
    pub os: String,
    pub arch: String,
    pub cpu: String,
    pub cores: usize,
}

/// One side of the comparison.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RunnerInfo {
    /// `tract-f64` or `onnxruntime`.
    pub name: String,
    pub version: String,
    /// Free-form key/value facts: ORT build string, library path, EP requested and EP that ran, opt level...
    pub details: BTreeMap<String, String>,
}

/// The target: what was asked for and what ran.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TargetInfo {
    /// `onnxruntime` or `wgpu`.
    pub name: String,
    pub version: String,
    /// A short name: `ort-cpu`, `ort-cuda-fp16`, `wgpu-fp16`.
    pub label: String,
    /// What the command line asked for.
    pub spec: crate::spec::TargetSpec,
    /// What actually ran: provider placement, adapter and driver.
    pub details: TargetFacts,
}

#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ToleranceReport {
    /// `--atol`, when given.
    pub atol: Option<f64>,
    /// `--rtol`, when given.
    pub rtol: Option<f64>,
    /// The tolerance applied to float values of each target element type.
    pub by_dtype: BTreeMap<String, Tolerance>,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every compared value is within tolerance and no node introduces more error than rounding explains.
    Clean,
    /// Values out of tolerance that the target's precision does not explain (first divergence and culprits).
    Drift,
    /// Every value within tolerance, but a node introduces far more error than correct rounding explains (a fault
    /// hiding under the tolerance): see `verdict.anomalies`.
    Anomalous,
    /// Values out of tolerance only where the target's precision itself cannot meet the tolerance (the ideal run,
    /// every value correctly rounded, fails there too) while its kernels are faithful, and the final outputs pass.
    PrecisionLimited,
    /// As precision-limited, but the final outputs fail: the runtime is faithful and the model does not survive
    /// this precision. A gate fails (exit 1): keep the culprits in float32 (`--keep-fp32`) or use a wider type.
    PrecisionInsufficient,
    /// What was compared passes (clean or precision-limited), but more than [`INCOMPLETE_PERCENT`]% of the values
    /// the outputs depend on could not be computed on one side (`coverage.unchecked_by_reason` says why), so the
    /// run cannot vouch for them. A gate fails (exit 1) unless `--accept-incomplete`.
    Incomplete,
}

/// The share of values (in percent) a passing run may leave unchecked before it is [`Status::Incomplete`].
pub const INCOMPLETE_PERCENT: usize = 5;

impl Status {
    /// The word the headline, JUnit and Markdown use.
    pub fn name(self) -> &'static str {
        match self {
            Status::Clean => "clean",
            Status::Drift => "drift",
            Status::Anomalous => "anomalous",
            Status::PrecisionLimited => "precision-limited",
            Status::PrecisionInsufficient => "precision-insufficient",
            Status::Incomplete => "incomplete",
        }
    }

    /// Drift > precision-insufficient > anomalous > incomplete > precision-limited > clean.
    pub fn severity(self) -> u8 {
        match self {
            Status::Clean => 0,
            Status::PrecisionLimited => 1,
            Status::Incomplete => 2,
            Status::Anomalous => 3,
            Status::PrecisionInsufficient => 4,
            Status::Drift => 5,
        }
    }

    /// Whether the run should fail a CI gate (precision-limited only with `--strict`).
    pub fn fails(self, strict: bool) -> bool {
        match self {
            Status::Clean => false,
            Status::Drift
            | Status::Anomalous
            | Status::PrecisionInsufficient
            | Status::Incomplete => true,
            Status::PrecisionLimited => strict,
        }
    }
}

/// A value named in a verdict.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct NodeRef {
    pub node_index: usize,
    pub node: String,
    pub op_type: String,
    pub value: String,
}

#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    pub status: Status,
    /// First node in topological order with an output out of tolerance.
    pub first_divergence: Option<NodeRef>,
    /// Number of values out of tolerance.
    pub failing_values: usize,
    /// Up to ten failing values, worst (highest fail fraction, then max relative error) first.
    pub worst: Vec<NodeRef>,
    /// Whether the final graph outputs are within tolerance.
    pub outputs_pass: bool,
    /// Nodes to blame: in topological order, those the target's precision explains (basis `ideal`) after the
    /// others, each node whose own (introduced) error is out of tolerance while its inputs pass (or, basis `origin`,
    /// where the error a culprit amplifies starts), with the likely causes and the path to the outputs it spoils.
    #[serde(default)]
    pub culprits: Vec<Culprit>,
    /// Nodes that introduce far more error than correct rounding explains, in topological order: within tolerance,
    /// or failing in the graph on error they inherit without being culprits.
    #[serde(default)]
    pub anomalies: Vec<Anomaly>,
    /// Failing values the target's precision explains (the ideal, correctly rounded run fails there too).
    #[serde(default)]
    pub precision_limited: Vec<NodeRef>,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Coverage {
    /// Values computed by top-level nodes.
    pub values: usize,
    pub compared: usize,
    pub unchecked: usize,
    /// Unchecked values counted by reason.
    pub unchecked_by_reason: BTreeMap<String, usize>,
    /// Values inside control-flow bodies (see `model.hidden_values`).
    pub hidden: usize,
    /// Unchecked values the outputs depend on (a side failed to compute them): what an incomplete run hides.
    /// Values no output depends on and values ONNX leaves undefined are not counted.
    #[serde(default)]
    pub unchecked_hiding: usize,
    /// Where the introduced error was measured (each node run alone on the reference's inputs); absent when
    /// attribution was off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introduced: Option<IntroducedScope>,
    /// Why the expected-noise run did not run although attribution was on (`--expected-noise auto` and no value
    /// failed); the values then carry `rounding` instead of `noise`. Absent when it ran or attribution was off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_skipped: Option<String>,
}

/// The values whose node ran alone on the target, fed with the reference's inputs.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct IntroducedScope {
    /// Every node ran alone (`--attribute-all`, or some value failed); otherwise only the nodes of values whose
    /// error in the graph reaches 1/8 of both anomaly thresholds: the rest cannot be anomalous alone unless their
    /// own error is 8× what the graph shows.
    pub all: bool,
    /// Compared values whose node ran alone.
    pub measured: usize,
    /// Compared values.
    pub compared: usize,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ValueStatus {
    Pass,
    Fail,
    /// Not compared; `reason` says why.
    Unchecked,
}

/// One compared (or unchecked) value.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ValueReport {
    pub name: String,
    pub status: ValueStatus,
    /// Why the value is unchecked or failed without metrics (shape mismatch...).
    pub reason: Option<String>,
    pub shape: Vec<usize>,
    /// Element type the target produced.
    pub target_dtype: Option<DType>,
    /// The coarser precision the value was judged in, where it was computed from values rounded to it (a float64
    /// Softmax of a float32 value cast up carries float32's rounding; a widening Cast adds no precision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged_in: Option<DType>,
    pub tolerance: Option<Tolerance>,
    pub metrics: Option<Metrics>,
    pub reference_stats: Option<Stats>,
    pub target_stats: Option<Stats>,
    pub worst: Option<Worst>,
    /// Expected noise: how far an ideal target that stores every value in its own precision (the f64 reference
    /// rerun with each value rounded to the target's element type) ends up from f64 here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<Noise>,
    /// Largest |round(r) − r| rounding the f64 value to the type the target stores it in (the error of one correct
    /// rounding, which the anomaly screen measures against), measured as the value is compared; absent where
    /// `noise` carries it (`noise.rounding`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounding: Option<f64>,
    /// The error this node makes on its own: the target's node fed with the reference's inputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub introduced: Option<Introduced>,
    /// Error histogram and worst elements; the heatmap only when an HTML report was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<Detail>,
    /// True for a final graph output.
    pub is_output: bool,
    /// With several input samples: the sample whose figures these are (the worst for this value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<usize>,
    /// A discrete decision (rounding to integers, quantization): the elements where the reference took the
    /// target's decision because its input lay within its tolerance of the boundary, or the conversion is undefined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted: Option<phantom_engine::computed::Adopted>,
    /// A graph output of a quantized model read from ONNX Runtime's fused run, judged against the variation of
    /// faithful integer kernels (a reference run rounding every quantization's near-ties the other way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variation: Option<Variation>,
}

/// How far another faithful execution of a quantized graph carries a value: the reference rerun with every
/// quantization's near-ties (inputs within a few roundings of a boundary) rounded to the other neighbour.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Variation {
    /// Quantized elements that run moved by one level, in the whole graph.
    pub flips: u64,
    /// The largest |v − ref| of that run on this value.
    pub max_abs: f64,
    /// The largest |target − ref| on this value (the reference on its own decisions, none adopted).
    pub error: f64,
    /// The target's error lies within the allowed multiple of `max_abs`: passed as a faithful variation.
    pub excused: bool,
    /// Where it is not, on a CPU without VNNI: the pairs the fused integer kernels saturate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation: Option<FusedSaturation>,
}

impl ValueReport {
    /// The precision this value was judged in: its own element type, or the coarser one it was computed from.
    pub fn judged_dtype(&self) -> Option<DType> {
        self.judged_in.or(self.target_dtype)
    }
}

#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct NodeReport {
    pub index: usize,
    pub name: String,
    pub op_type: String,
    pub domain: String,
    /// Input value names (empty for omitted optional inputs), for drawing the graph.
    pub inputs: Vec<String>,
    pub reference: RefPrecision,
    /// Worst status among the node's outputs (fail > pass > unchecked).
    pub status: ValueStatus,
    pub values: Vec<ValueReport>,
    /// Where the target computed this node when not on its device, and why (wgpu target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_placement: Option<HostPlacement>,
    /// The execution provider ONNX Runtime ran this node on, from its placement log (`P, inside a node it fused`
    /// where a provider compiled it into a node of its own); absent for other targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_on: Option<String>,
    /// Figures of this node an optional stage could not measure, by figure (`introduced error`, `expected noise`,
    /// `causes`, `the fusion check`), with the reason. The verdict stands on the compared values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_measured: BTreeMap<String, String>,
}

/// Wall-clock milliseconds per stage.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Timings {
    pub import_ms: f64,
    /// The f64 reference, its comparisons excluded.
    pub reference_ms: f64,
    pub target_ms: f64,
    /// The reference rerun with the target's rounding (expected noise; 0 without attribution).
    #[serde(default)]
    pub noise_ms: f64,
    /// The expected-noise run ran beside the reference, on a second thread: its time overlaps the reference's and
    /// the comparison's instead of adding to them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub noise_beside: bool,
    /// The reference ran on its own thread, ahead of the comparison: `reference_ms` is its own time and overlaps
    /// `compare_ms` instead of adding to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reference_ahead: bool,
    /// Comparing the values as the reference produced them.
    pub compare_ms: f64,
    /// Every node alone on the target, and those runs compared (0 without attribution).
    #[serde(default)]
    pub attribution_ms: f64,
    /// First divergence, culprits and causes (a fusion rerun included), and the report assembled.
    #[serde(default)]
    pub explain_ms: f64,
    pub total_ms: f64,
    /// The reference and the comparison by the op type that produced each value (a run bounded in memory compares
    /// per chunk of the target, so there only the reference's time is split).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_op: BTreeMap<String, OpTiming>,
}

/// Where one op type's time went in a streamed run.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct OpTiming {
    /// Values its nodes produced.
    pub values: u64,
    /// The reference computing them (the time since the previous value arrived; the first value's includes the
    /// run's start).
    pub reference_ms: f64,
    /// Comparing them with every target (the expected noise applied included); 0 in a run bounded in memory.
    pub compare_ms: f64,
}

impl Report {
    /// Iterates over (node, value) pairs.
    pub fn values(&self) -> impl Iterator<Item = (&NodeReport, &ValueReport)> {
        self.nodes
            .iter()
            .flat_map(|n| n.values.iter().map(move |v| (n, v)))
    }

    /// The value report of `name`, with its node.
    pub fn find_value(&self, name: &str) -> Option<(&NodeReport, &ValueReport)> {
        self.values().find(|(_, v)| v.name == name)
    }
}

impl NodeRef {
    pub fn of(n: &NodeReport, v: &ValueReport) -> NodeRef {
        NodeRef {
            node_index: n.index,
            node: n.name.clone(),
            op_type: n.op_type.clone(),
            value: v.name.clone(),
        }
    }
}

/// Expected noise of one value and how the target's error compares with it.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Noise {
    /// Largest |ideal − f64| over elements finite on both sides.
    pub max_abs: f64,
    pub rms: f64,
    /// Largest share of its tolerance an element of the ideal run uses (above 1: the precision itself cannot
    /// meet the tolerance here).
    pub tolerance_used: f64,
    /// Elements where the ideal run overflows to ±inf or makes NaN and f64 does not.
    pub nonfinite: u64,
    /// Elements the ideal run keeps finite within 8× its own error (the noise factor) of the type's overflow
    /// threshold: a target rounding otherwise may take them to ±inf, as precision, not drift.
    #[serde(default)]
    pub near_overflow: u64,
    /// Largest |round(r) − r| rounding the f64 value to the type the target stores it in: the error of one correct
    /// rounding (what the anomaly test measures a node's own error against).
    #[serde(default)]
    pub rounding: f64,
    /// The target's max |t − r| over the noise's max_abs: "k× above expected noise" (null when the noise is 0).
    pub ratio: Option<f64>,
    /// Out of the dtype tolerance, but within the allowed multiple of a noise that itself meets the tolerance:
    /// passed as expected rounding.
    pub excused: bool,
}

/// Error a node introduces on its own.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Introduced {
    pub status: ValueStatus,
    pub metrics: Metrics,
    /// Largest |round(r) − r| when r is rounded to the element type the target stores this value in: the error a
    /// correctly rounded node makes.
    pub expected: f64,
    /// metrics.max_abs / expected (null when expected is 0).
    pub ratio: Option<f64>,
}
