//! Arguments of the commands around the comparison: `reduce`, `profile`, `diff` and `serve` (clap derive; doc
//! comments are the help text).

use std::path::PathBuf;

use clap::Args;

use super::args::{EngineArgs, InputArgs, ModelOnTarget, ReportArgs, ToleranceArgs};

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// Timed runs (after one warm-up run); each node's min and median are reported.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10000))]
    pub runs: u64,
    // The profile as JSON (`phantom-profile/1`) is what another profile compares with via --compare.
    #[command(flatten)]
    pub json: super::args_groups::JsonOut,
    /// Write a Chrome trace here (opens in Perfetto or chrome://tracing).
    #[arg(long, value_name = "OUT.json")]
    pub trace: Option<PathBuf>,
    /// A profile saved with --json to compare this one with (other ORT version, provider or optimization level).
    #[arg(long, value_name = "PROFILE.json")]
    pub compare: Option<PathBuf>,
    /// How many nodes and op types the summary lists.
    #[arg(long, default_value_t = 15)]
    pub top: usize,
    /// Write Model Explorer overlays here (median time and share of the run per node).
    #[arg(long, value_name = "DIR")]
    pub model_explorer: Option<PathBuf>,
    /// Replace an existing --model-explorer directory.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub model_on_target: ModelOnTarget,
    #[command(flatten)]
    pub inputs: InputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct ReduceArgs {
    /// The ONNX model (the reference always runs this one).
    pub model: PathBuf,
    /// Write the bundle to this directory.
    #[arg(long, short, value_name = "BUNDLE")]
    pub out: PathBuf,
    /// The node to cut out (default: the first culprit of a full comparison, else its first divergence).
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// The most model nodes the cut may grow to while it does not fail on its own.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub max_nodes: u64,
    /// Replace an existing BUNDLE directory.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub model_on_target: ModelOnTarget,
    /// Run If and Loop nodes as the file has them (see `phantom onnx --keep-control-flow`).
    #[arg(long)]
    pub keep_control_flow: bool,
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
    #[command(flatten)]
    pub inputs: InputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The reference side (A): a directory, an archive or one file.
    pub a: PathBuf,
    /// The side compared with it (B).
    pub b: PathBuf,
    /// Rewrite names on both sides: `REGEX=REPLACEMENT` (`$1` for groups); repeatable, applied in order.
    #[arg(long, value_name = "REGEX=REPL")]
    pub rename: Vec<String>,
    /// Like --rename, on A only (after the shared rules).
    #[arg(long, value_name = "REGEX=REPL")]
    pub rename_a: Vec<String>,
    /// Like --rename, on B only (after the shared rules).
    #[arg(long, value_name = "REGEX=REPL")]
    pub rename_b: Vec<String>,
    /// Sort the report by a name pattern, e.g. `{layer}_{stage}` (numbers numerically, stages as --stages says or
    /// in the order first met); the first divergent tensor is the first failing one in this order.
    #[arg(long, value_name = "PATTERN")]
    pub order: Option<String>,
    /// The order of the `{stage}` field's values, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "S1,S2,...")]
    pub stages: Vec<String>,
    /// Where the sides differ along exactly one axis, compare the shorter length (padding rows on rank 0, say).
    #[arg(long)]
    pub truncate: bool,
    /// A fused residual: `X+Y=Z` compares the sum of X and Y on one side with Z on the other; repeatable.
    #[arg(long, value_name = "X+Y=Z")]
    pub sum: Vec<String>,
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
    /// The most an archive may unpack to (e.g. 16G).
    #[arg(long, value_name = "SIZE", default_value = "16G")]
    pub max_unpacked: String,
    /// Pairs shown in the terminal (failing ones first when there are more).
    #[arg(long, default_value_t = 40)]
    pub show: usize,
    /// The report's files; `--html` writes the value inspector (both sides' values, coloured, with a jump to the
    /// largest difference; tensors above 16384 elements show a window around it).
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port on 127.0.0.1 (0: any free port; the address is printed).
    #[arg(long, default_value_t = 8765)]
    pub port: u16,
    /// The largest upload accepted per side.
    #[arg(long, value_name = "SIZE", default_value = "500M")]
    pub max_upload: String,
    /// The most an uploaded archive may unpack to.
    #[arg(long, value_name = "SIZE", default_value = "4G")]
    pub max_unpacked: String,
}

#[derive(Debug, Args)]
pub struct EquivArgs {
    /// The model as it was (the reference function).
    pub model: PathBuf,
    /// The transformed model (optimized, simplified, fused, converted): paired with MODEL by what its values
    /// compute in f64, not by their names.
    pub transformed: PathBuf,
    /// Pair values within this fraction of each value's scale (default: set by the narrowest float type of
    /// TRANSFORMED's weights: 1e-4 for float32, 3e-2 for float16, 2e-1 for bfloat16).
    #[arg(long, value_name = "REL")]
    pub tolerance: Option<f64>,
    /// How many paired values the table lists (the outputs and the divergence are always shown).
    #[arg(long, default_value_t = 0)]
    pub list: usize,
    /// Write Model Explorer overlays here: over MODEL, what became of each node's value; over TRANSFORMED, what
    /// each node's value equals and where the function changes.
    #[arg(long, value_name = "DIR")]
    pub model_explorer: Option<PathBuf>,
    /// Replace an existing --model-explorer directory.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub json: super::args_groups::JsonOut,
    #[command(flatten)]
    pub inputs: InputArgs,
}
