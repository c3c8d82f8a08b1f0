//! Command-line arguments (clap derive). Doc comments are the help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use super::args_groups::{JsonOut, JunitOut, ModelOnTarget, ReportArgs, ToleranceArgs};
pub use super::args_segment::{MergeArgs, PlanArgs, SegmentArgs};
pub use super::args_tools::{DiffArgs, EquivArgs, ProfileArgs, ReduceArgs, ServeArgs};

/// phantom: find where and why an ONNX model's numbers diverge between runtimes.
///
/// Exit codes: 0 = within tolerance, 1 = drift found, 2 = error.
#[derive(Debug, Parser)]
#[command(name = "phantom", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Stop with exit code 2 when the command runs longer than this many seconds, naming the stage and node it
    /// was in (0: no limit).
    #[arg(long, global = true, value_name = "SECS", default_value_t = crate::watchdog::DEFAULT_TIMEOUT_S)]
    pub timeout: u64,
    /// A shared library of custom ops (ONNX Runtime's `register_custom_ops_library`), registered with every ONNX
    /// Runtime session phantom makes (repeatable). onnxruntime-extensions' is found without it when a model uses its
    /// domains (python3's `onnxruntime_extensions`, else installed into phantom's cache).
    #[arg(long = "custom-op-library", global = true, value_name = "PATH")]
    pub custom_op_library: Vec<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compare every intermediate value of MODEL between the f64 reference and a target runtime.
    Onnx(Box<OnnxArgs>),
    /// Find nodes to keep in fp32 so an fp16/bf16 model meets the tolerance; write the mixed-precision model.
    Precision(Box<PrecisionArgs>),
    /// Run one side only (the f64 reference or ONNX Runtime) and summarize its outputs.
    Run(Box<RunArgs>),
    /// Run the target (and the reference) several times and report every value that changes between runs.
    Determinism(Box<DeterminismArgs>),
    /// Record a golden run: per value a hash, statistics and a sample, with inputs, options and environment.
    Record(Box<RecordArgs>),
    /// Run again and compare value by value against a golden record (exit 1 on regression).
    Check(Box<CheckArgs>),
    /// Run a saved run (`--save-run DIR`) again; say whether the verdict matches and what changed.
    Replay(ReplayArgs),
    /// Show a model's inputs, outputs, opsets and op histogram.
    Info(InfoArgs),
    /// One f64 reference run, no target: which nodes are numerically fragile in fp16/bf16, and why.
    Scan(Box<ScanArgs>),
    /// Show which ONNX Runtime phantom finds, its version and execution providers.
    Runtimes(RuntimeArgs),
    /// List the wgpu adapters (Vulkan, Metal, DX12; lavapipe in software) with their f16 support and limits.
    Devices(DevicesArgs),
    /// Compare two dumps of per-layer tensors from any framework (directories, .zip, .tar.gz; .pt/.pth, .npy/.npz,
    /// .safetensors, TensorProto .pb/.tensorproto), paired by name.
    Diff(Box<DiffArgs>),
    /// Do two graphs of one model compute the same function? Both run in f64 and their values are paired by what
    /// they compute (an optimizer's fusions, a simplifier's folds, a converter's renames); exit 1 names the first
    /// value where the second stops computing the first's function.
    Equiv(Box<EquivArgs>),
    /// A local web page (127.0.0.1) where two dumps are dropped and `phantom diff`'s inspector comes back.
    Serve(ServeArgs),
    /// Cut the first culprit (or --node) out as the smallest subgraph that still fails on the target, fed with the
    /// f64 reference's values: a bundle (model, test data, a numpy+onnxruntime script, README) for an upstream issue.
    Reduce(Box<ReduceArgs>),
    /// Per-node time on the target (ONNX Runtime's profiler), FLOPs and bytes per node, memory, top nodes and op
    /// types; a Chrome trace; two saved profiles compared.
    Profile(Box<ProfileArgs>),
    /// Cut a model too big for one machine into segments (manifest, inputs) that `phantom segment` runs one per
    /// job: a Slurm array, a Kubernetes Indexed Job, a CI matrix.
    Plan(Box<PlanArgs>),
    /// Run one segment of a plan: `--boundary` stores both sides' boundary values (in order), then each index
    /// compares its segment as `phantom onnx` does and writes a partial report.
    Segment(SegmentArgs),
    /// Join a plan's partial reports into the whole model's report (terminal, JSON, HTML, JUnit, Markdown).
    Merge(MergeArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    Auto,
    On,
    Off,
}

/// When the expected-noise run runs (`--expected-noise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NoiseWhen {
    /// Where the verdict may need it (see `--expected-noise`).
    Auto,
    /// On every run with attribution.
    Always,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PrecisionArg {
    Fp32,
    Fp16,
    Bf16,
}

impl PrecisionArg {
    /// The reduced precision, if any.
    pub fn low(self) -> Option<crate::precision::LowPrecision> {
        match self {
            PrecisionArg::Fp32 => None,
            PrecisionArg::Fp16 => Some(crate::precision::LowPrecision::F16),
            PrecisionArg::Bf16 => Some(crate::precision::LowPrecision::Bf16),
        }
    }
}

pub use crate::runner::facts::OptLevel;
use crate::runner::spec::Named;
pub use crate::runner::spec::{Accumulate, F16Mode};

/// The choices of an option whose values name themselves ([`Named`]): help lists the names, and the parsed value is
/// the one named.
fn named<T: Named + Send + Sync>() -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(T::ALL.iter().map(|v| v.name()))
        .map(|s| T::from_name(&s).expect("clap checked the name"))
}

/// The target a command runs: an ONNX Runtime execution provider with its options, or phantom's wgpu shaders.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// The target: an ONNX Runtime execution provider (cpu, cuda, tensorrt, rocm, migraphx, openvino, directml,
    /// coreml, qnn, webgpu, xnnpack) or `wgpu` (phantom's WGSL shaders on Vulkan/Metal/DX12). A provider that
    /// cannot load is an error, never a silent CPU fallback. `phantom onnx` takes several (--ep cpu --ep wgpu).
    #[arg(long = "ep", value_name = "EP", default_value = "cpu")]
    pub ep: Vec<String>,
    /// An option of the ONNX Runtime execution provider, e.g. --ep-option device_id=1 (repeatable).
    #[arg(long = "ep-option", value_name = "KEY=VALUE")]
    pub ep_options: Vec<String>,
    /// ONNX Runtime graph optimization level [default: all].
    #[arg(long, value_parser = named::<OptLevel>())]
    pub ort_opt_level: Option<OptLevel>,
    /// --ep wgpu: what sums (MatMul, Conv, reductions, normalizations) accumulate in [default: f32].
    #[arg(long, value_parser = named::<Accumulate>())]
    pub accumulate: Option<Accumulate>,
    /// --ep wgpu: the adapter whose name contains this (see `phantom devices`); default: the best there is.
    #[arg(long, value_name = "NAME")]
    pub adapter: Option<String>,
    /// --ep wgpu --precision fp16: native f16 (`enable f16;`, needs SHADER_F16) or emulated by rounding f32
    /// [default: auto].
    #[arg(long, value_parser = named::<F16Mode>())]
    pub f16_mode: Option<F16Mode>,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// Where ONNX Runtime comes from.
#[derive(Debug, Clone, Args)]
pub struct RuntimeArgs {
    /// Path to libonnxruntime (otherwise: ORT_DYLIB_PATH, python onnxruntime, node_modules, cache, system).
    #[arg(long, value_name = "PATH")]
    pub ort_lib: Option<PathBuf>,
    /// Never pip-install ONNX Runtime or onnxruntime-extensions when none is found (also: PHANTOM_NO_INSTALL=1).
    #[arg(long)]
    pub no_install: bool,
    /// A plugin execution provider library: NAME is an --ep name (webgpu) or ONNX Runtime's provider name
    /// (repeatable). Installed `onnxruntime_ep_*` Python packages are found without it.
    #[arg(long = "ep-library", value_name = "NAME=PATH")]
    pub ep_library: Vec<String>,
}

#[derive(Debug, Args)]
pub struct OnnxArgs {
    /// The ONNX model (the reference always runs this one).
    pub model: PathBuf,
    #[command(flatten)]
    pub on_target: ModelOnTarget,
    /// Introduced-vs-inherited error (every node rerun on the target with the reference's inputs: anomalies) and
    /// expected noise (the reference rerun with every value rounded to the target's precision: precision-limited
    /// values). auto: on (with --max-memory, the values they read again wait on disk: PHANTOM_SPILL_DIR).
    #[arg(long, value_enum, default_value = "auto")]
    pub attribution: Switch,
    /// Run every node alone for its introduced error. By default a run with no failing value runs alone only the
    /// nodes whose error in the graph reaches 1/8 of an anomaly's thresholds (the JSON's `coverage.introduced` says
    /// how many); a run with a failing value runs every node.
    #[arg(long)]
    pub attribute_all: bool,
    /// When the expected-noise run (part of attribution) runs. auto: whenever the verdict may need it — the target
    /// stores values below float32 or rounds the model's weights, several targets, discrete decisions, or (after a
    /// first pass without it) a value fails; otherwise a run whose values all pass skips it (the report's
    /// `coverage.noise_skipped` says so). always: on every run (each passing value's share of its tolerance that the
    /// precision alone uses).
    #[arg(long, value_enum, default_value = "auto")]
    pub expected_noise: NoiseWhen,
    /// Exit 1 on a precision-limited verdict too (by default only drift and anomalies fail).
    #[arg(long)]
    pub strict: bool,
    /// Let a passing run that could not compare more than 5% of the values the outputs depend on (a side failed
    /// to compute them) exit 0; without it the verdict is `incomplete`, exit 1.
    #[arg(long)]
    pub accept_incomplete: bool,
    /// Compare only a slice of each tensor: `:,:64,:64` (NumPy-style, leading axes) or `::4` (every 4th element).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true)]
    pub slice: Option<String>,
    /// Hold peak memory near this budget (e.g. 2GiB): the target exposes values chunk by chunk as the reference
    /// streams, instead of all at once; reference and expected-noise values wait on disk (PHANTOM_SPILL_DIR).
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<String>,
    /// Compare on N seeded input samples (seeds SEED..SEED+N): per value the worst sample decides and the report
    /// names it. Several test_data_set directories given with --input are a sample each.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub samples: u64,
    /// Find the first divergent value with O(log N) target runs, each exposing one value, memory bounded by one
    /// value (reference values wait on disk). Prints the probes; --json writes them.
    #[arg(long)]
    pub bisect: bool,
    /// Write the fp16/bf16 model the target runs here.
    #[arg(long, value_name = "OUT.onnx", requires = "precision")]
    pub save_target_model: Option<PathBuf>,
    /// KV-cache decoders: run N decoding steps (the prompt, then one greedy token at a time), each side fed its own
    /// cache from the step before; the report notes the drift per step.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub steps: u64,
    /// Run If and Loop nodes as the file has them: no branch the inputs decide is inlined, no loop with a known trip
    /// count unrolled (values inside bodies are then not compared, and tract must type every branch).
    #[arg(long)]
    pub keep_control_flow: bool,
    /// Keep the reference's own discrete decisions (float-to-integer casts, rounding, quantization levels): by
    /// default it takes the target's where the input lies within its tolerance of the boundary, and counts them.
    #[arg(long)]
    pub own_decisions: bool,
    #[command(flatten)]
    pub report: ReportArgs,
    /// Write the graph as GraphViz DOT, nodes coloured by drift.
    #[arg(long, value_name = "OUT.dot")]
    pub dot: Option<PathBuf>,
    /// Save a replay directory: inputs (test_data_set layout), options, model sha256, environment, verdict.
    #[arg(long, value_name = "DIR")]
    pub save_run: Option<PathBuf>,
    /// Write Model Explorer overlays here (node-data JSON: tolerance used, max abs error, noise multiple, verdict and
    /// cause per node); open them with `onnxvis MODEL --node_data_paths=DIR/a.json,...`.
    #[arg(long, value_name = "DIR")]
    pub model_explorer: Option<PathBuf>,
    /// Write every compared value of both sides as .npy (reference/ in f64, one directory per target, index.json
    /// mapping ONNX names to files), to diff or hand to other tools.
    #[arg(long, value_name = "DIR")]
    pub dump: Option<PathBuf>,
    /// Replace an existing --save-run, --dump or --model-explorer directory.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
    #[command(flatten)]
    pub inputs: InputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// How many of the worst nodes the summary lists.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print only the verdict line.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Only adapters whose name contains this (case-insensitive); no match is an error.
    #[arg(long, value_name = "NAME")]
    pub adapter: Option<String>,
    #[command(flatten)]
    pub json: JsonOut,
}

#[derive(Debug, Args)]
pub struct PrecisionArgs {
    /// The float32 ONNX model.
    pub model: PathBuf,
    /// The reduced precision to convert to.
    #[arg(long, value_enum, default_value = "fp16")]
    pub precision: PrecisionArg,
    /// Write the mixed-precision model here.
    #[arg(long, short, value_name = "OUT.onnx")]
    pub out: PathBuf,
    /// Start from these nodes kept in fp32.
    #[arg(long = "keep-fp32", value_name = "NODE", value_delimiter = ',')]
    pub keep_fp32: Vec<String>,
    /// Rounds of compare → keep culprits in fp32 → compare again.
    #[arg(long, default_value_t = 12)]
    pub max_rounds: usize,
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
    /// Replace OUT if it exists.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub inputs: InputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// How inputs are made.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Uniform range LO,HI for random float inputs (default N(0,1)).
    #[arg(long, value_name = "LO,HI", allow_hyphen_values = true)]
    pub val_range: Option<String>,
    /// Value of a symbolic dim, e.g. --dim batch=1 --dim seq=128.
    #[arg(long = "dim", value_name = "NAME=VALUE")]
    pub dims: Vec<String>,
    /// KV-cache decoders: tokens already in the cache fed to past inputs (`past_key_values.*`, `past_key`...);
    /// 0 (the default) is a first prompt. Total-length dims (`total_sequence_length`) follow as past + new.
    #[arg(long, value_name = "N")]
    pub past: Option<usize>,
    /// Whole shape of an input, e.g. --shape input=1x3x224x224.
    #[arg(long = "shape", value_name = "INPUT=AxBxC")]
    pub shapes: Vec<String>,
    /// Load inputs: NAME=file.npy, NAME=photo.jpg (JPEG/PNG/BMP: resized to the input's shape, NCHW or NHWC), an
    /// .npz with arrays named like the inputs, or a test_data_set_N directory.
    #[arg(long = "input", value_name = "NAME=FILE.npy|NAME=IMAGE|FILE.npz|DIR")]
    pub inputs: Vec<String>,
    /// Image inputs: pixel multiplier applied first (default 1/255).
    #[arg(long, value_name = "S")]
    pub scale: Option<f64>,
    /// Image inputs: subtracted after scaling, one value or one per channel (e.g. 0.485,0.456,0.406).
    #[arg(long, value_name = "M[,M,M]", allow_hyphen_values = true)]
    pub mean: Option<String>,
    /// Image inputs: divided last, one value or one per channel (e.g. 0.229,0.224,0.225).
    #[arg(long, value_name = "S[,S,S]")]
    pub std: Option<String>,
    /// Image inputs: channels in BGR order (models trained on OpenCV images).
    #[arg(long)]
    pub bgr: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Side {
    /// tract in f64, every value captured.
    Reference,
    /// The target (--ep), plain: the model's outputs only.
    #[value(alias = "ort")]
    Target,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    pub model: PathBuf,
    /// Which side to run.
    #[arg(long, value_enum, default_value = "reference")]
    pub runner: Side,
    /// With --runner target: expose every intermediate value, as `phantom onnx` captures them (the reference
    /// always computes every value).
    #[arg(long)]
    pub all_values: bool,
    /// Precision of the target: fp16/bf16 run phantom's conversion (ONNX Runtime) or f16 shaders (wgpu).
    #[arg(long, value_enum, default_value = "fp32")]
    pub precision: PrecisionArg,
    /// Write the graph outputs as `.npy` into DIR, laid out as `phantom onnx --dump` does (`index.json`; the
    /// reference's in f64 under `reference/`, the target's under its label).
    #[arg(long, value_name = "DIR")]
    pub dump: Option<PathBuf>,
    /// Replace an existing --dump directory.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub inputs: InputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct DeterminismArgs {
    pub model: PathBuf,
    /// Runs in fresh sessions, and as many repeated runs in one session.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..))]
    pub runs: u32,
    /// Also run with ORT's deterministic compute on, and say whether it helped (ONNX Runtime targets).
    #[arg(long)]
    pub ort_deterministic: bool,
    /// Precision of the target: fp16/bf16 run phantom's conversion (ONNX Runtime) or f16 shaders (wgpu).
    #[arg(long, value_enum, default_value = "fp32")]
    pub precision: PrecisionArg,
    #[command(flatten)]
    pub json: JsonOut,
    #[command(flatten)]
    pub inputs: InputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// The target configuration a golden run is recorded or checked with.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    #[command(flatten)]
    pub on_target: ModelOnTarget,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    pub model: PathBuf,
    /// Directory to write the golden record into (never overwritten without --force).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Replace an existing record.
    #[arg(long)]
    pub force: bool,
    /// Also save the model outputs in full (.npy).
    #[arg(long)]
    pub full_outputs: bool,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub inputs: InputArgs,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    pub model: PathBuf,
    /// The golden record to check against (its inputs are reused).
    #[arg(long, value_name = "DIR")]
    pub golden: PathBuf,
    /// Default drift budget: largest relative change of a value (sampled elements and statistics).
    #[arg(long, default_value_t = 1e-5)]
    pub budget: f64,
    /// Budget for an op type, e.g. --budget-op Softmax=1e-4 (repeatable).
    #[arg(long = "budget-op", value_name = "OP=BUDGET")]
    pub budget_op: Vec<String>,
    /// Budget for one node, e.g. --budget-node conv1=1e-3 (repeatable).
    #[arg(long = "budget-node", value_name = "NODE=BUDGET")]
    pub budget_node: Vec<String>,
    #[command(flatten)]
    pub json: JsonOut,
    #[command(flatten)]
    pub junit: JunitOut,
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A directory written by `phantom onnx --save-run`.
    pub dir: PathBuf,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    pub model: PathBuf,
    /// The precision to judge the risks for.
    #[arg(long, value_enum, default_value = "fp16")]
    pub precision: PrecisionArg,
    #[command(flatten)]
    pub json: JsonOut,
    /// How many nodes each list shows.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Write Model Explorer overlays here (fp16 headroom and the nodes at risk, per node).
    #[arg(long, value_name = "DIR")]
    pub model_explorer: Option<PathBuf>,
    /// Replace an existing --model-explorer directory.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub inputs: InputArgs,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The ONNX model.
    #[arg(required_unless_present = "json")]
    pub model: Option<PathBuf>,
    // `--json MODEL`, with no model after it, reads MODEL and prints to standard output, as the flag did when it
    // took no value (see `resolved`).
    #[command(flatten)]
    pub json: JsonOut,
}

impl InfoArgs {
    /// The model and where its JSON goes (`None`: the table), the older `--json MODEL` form read as it was meant.
    pub fn resolved(&self) -> anyhow::Result<(PathBuf, Option<PathBuf>)> {
        match (&self.model, &self.json.path) {
            (Some(m), j) => Ok((m.clone(), j.clone())),
            (None, Some(j)) if j.as_os_str() != "-" => Ok((j.clone(), Some("-".into()))),
            (None, _) => {
                anyhow::bail!("phantom info needs a model: phantom info MODEL [--json [PATH]]")
            }
        }
    }
}
