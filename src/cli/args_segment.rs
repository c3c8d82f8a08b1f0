//! Arguments of the segment-wise commands: `plan`, `segment`, `merge` (clap derive; doc comments are the help
//! text).

use std::path::PathBuf;

use clap::Args;

use super::args::{EngineArgs, InputArgs, ReportArgs, Switch, ToleranceArgs};
use super::args_groups::ModelOnTarget;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The ONNX model (external data is read by byte range, never loaded whole).
    pub model: PathBuf,
    /// Write the plan (manifest, inputs; later the boundary values and partial reports) to this directory.
    #[arg(long, short, value_name = "PLAN")]
    pub out: PathBuf,
    /// Cut into this many segments.
    #[arg(long, conflicts_with = "segment_memory", value_parser = clap::value_parser!(u64).range(1..))]
    pub segments: Option<u64>,
    /// Cut into the fewest segments whose jobs' estimated peak memory fits this size (e.g. 6GiB).
    #[arg(long, value_name = "SIZE")]
    pub segment_memory: Option<String>,
    /// Replace an existing PLAN directory.
    #[arg(long)]
    pub force: bool,
    /// The target's model: MODEL, phantom's fp16/bf16 conversion of each segment, or another file cut at the
    /// same node names.
    #[command(flatten)]
    pub model_on_target: ModelOnTarget,
    /// Introduced-vs-inherited error and expected noise in each segment (as `phantom onnx`).
    #[arg(long, value_enum, default_value = "auto")]
    pub attribution: Switch,
    /// Run If and Loop nodes as the file has them (see `phantom onnx --keep-control-flow`).
    #[arg(long)]
    pub keep_control_flow: bool,
    /// Let `merge` pass a run that could not compare many values (see `phantom onnx --accept-incomplete`).
    #[arg(long)]
    pub accept_incomplete: bool,
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
    #[command(flatten)]
    pub inputs: InputArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct SegmentArgs {
    /// The directory `phantom plan` wrote.
    pub plan: PathBuf,
    /// The segment to run; default: the variable named by --index-env, else SLURM_ARRAY_TASK_ID, else
    /// JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs).
    #[arg(long)]
    pub index: Option<usize>,
    /// Read the index from this environment variable (a CI matrix's, say).
    #[arg(long, value_name = "VAR")]
    pub index_env: Option<String>,
    /// The boundary pass: store each side's boundary values (run the segments in order; without an index, all
    /// of them one after the other).
    #[arg(long)]
    pub boundary: bool,
    /// Print only the verdict line.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The directory `phantom plan` wrote, with every segment's partial report.
    pub plan: PathBuf,
    #[command(flatten)]
    pub report: ReportArgs,
    /// Exit 1 on a precision-limited verdict too.
    #[arg(long)]
    pub strict: bool,
    /// Print only the verdict line.
    #[arg(long, short)]
    pub quiet: bool,
    /// How many of the worst nodes the summary lists.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}
