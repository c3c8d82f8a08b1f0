//! The report of `phantom diff`, as written to JSON (`schema/diff-report.schema.json` is generated from these
//! types).

use serde::Serialize;

use crate::compare::metrics::{Metrics, Stats, Worst};
use crate::compare::Tolerance;

/// One side of the diff.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct SideReport {
    /// The path given.
    pub path: String,
    /// Tensors found (shards counted once per rank).
    pub tensors: usize,
    /// Files that hold no tensor phantom reads (README, JSON...), by path inside the dump.
    pub ignored_files: Vec<String>,
    /// How this side's names were made when not from the full paths (container prefixes dropped so names pair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naming: Option<String>,
}

/// Whether a pair is within tolerance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PairStatus {
    Pass,
    Fail,
    /// Shapes that no allowed transformation reconciles (the pair counts as divergent).
    Mismatch,
}

/// One compared pair.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PairReport {
    /// The name both sides share (after `--rename`).
    pub name: String,
    /// Where each side's tensor came from (file, and key inside it), shards in rank order.
    pub a_origin: Vec<String>,
    pub b_origin: Vec<String>,
    pub a_shape: Vec<usize>,
    pub b_shape: Vec<usize>,
    pub a_dtype: String,
    pub b_dtype: String,
    /// Every transformation applied before comparing (shard joins, transposition, truncation, sums).
    pub transforms: Vec<String>,
    pub status: PairStatus,
    /// Why the pair was not compared (mismatch, error).
    pub reason: Option<String>,
    pub tolerance: Option<Tolerance>,
    pub metrics: Option<Metrics>,
    /// Mean squared difference.
    pub mse: Option<f64>,
    pub a_stats: Option<Stats>,
    pub b_stats: Option<Stats>,
    /// The worst element (A's value as `reference`, B's as `target`).
    pub worst: Option<Worst>,
    /// The values the HTML inspector shows (not in the JSON).
    #[serde(skip)]
    pub view: Option<super::inspect::View>,
}

/// The verdict.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct DiffVerdict {
    /// `clean` or `drift`.
    pub status: String,
    pub compared: usize,
    pub failed: usize,
    pub mismatched: usize,
    /// The first pair in the report's order that fails or mismatches.
    pub first_divergent: Option<String>,
}

/// The whole report.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct DiffReport {
    /// `phantom-diff/1`.
    pub schema: String,
    pub phantom_version: String,
    pub command: Vec<String>,
    pub a: SideReport,
    pub b: SideReport,
    /// `--order` pattern and the stage order used, when given.
    pub order: Option<String>,
    pub stages: Vec<String>,
    pub verdict: DiffVerdict,
    /// Pairs in the report's order.
    pub pairs: Vec<PairReport>,
    /// Names only A has / only B has.
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

/// JSON Schema of [`DiffReport`] (checked in as `schema/diff-report.schema.json`).
pub fn schema() -> String {
    let s = schemars::schema_for!(DiffReport);
    serde_json::to_string_pretty(&s).expect("schema serializes") + "\n"
}
