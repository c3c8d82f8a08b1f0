//! The report of several targets in one run (`phantom onnx --ep cpu --ep wgpu`): each target's full report
//! against the one f64 reference run, and how the targets agree with each other — per node, which target is
//! closer to f64, and the first node where they disagree beyond tolerance.

use serde::Serialize;

use super::{NodeRef, Report, Status, ValueStatus};

/// Version of the several-targets layout; each entry of `targets` is a `phantom-report/3` report.
pub const MULTI_SCHEMA_VERSION: &str = "phantom-multi/1";

/// Several targets compared with one f64 reference run and with each other.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct MultiReport {
    /// Always [`MULTI_SCHEMA_VERSION`].
    pub schema: String,
    pub phantom_version: String,
    /// The command line that produced this report.
    pub command: Vec<String>,
    /// The most severe of the targets' verdicts (drift > anomalous > precision-limited > clean).
    pub status: Status,
    /// One full report per target, in `--ep` order, all against the same reference run.
    pub targets: Vec<Report>,
    pub agreement: Agreement,
}

/// How the targets compare with each other, with f64 as the arbiter.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Agreement {
    /// Target labels, in the order of `targets` (the columns of every per-target list below).
    pub labels: Vec<String>,
    /// Whether every pair of targets agrees within tolerance on every value both computed.
    pub status: AgreeStatus,
    /// The first node in topological order where two targets disagree beyond tolerance.
    pub first_disagreement: Option<Disagreement>,
    /// Per target (in the order of `labels`): how many nodes it is clearly (at least 2×) closer to f64 on than
    /// every other target.
    pub closer_nodes: Vec<usize>,
    /// Per node, in topological order.
    pub nodes: Vec<NodeAgreement>,
    /// The answer in one paragraph: who disagrees where, which target f64 sides with, where the other goes wrong.
    pub conclusion: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgreeStatus {
    /// Every pair of targets is within tolerance of each other on every value both computed.
    Agree,
    /// At least one value differs between two targets beyond tolerance.
    Disagree,
}

/// One node across targets.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct NodeAgreement {
    pub index: usize,
    pub name: String,
    pub op_type: String,
    /// Per target: the node's status against f64.
    pub status: Vec<ValueStatus>,
    /// Per target: the largest share of its tolerance a value of this node uses against f64 (null: unchecked).
    pub tolerance_used: Vec<Option<f64>>,
    /// Per target: the largest |t − f64| over this node's values (null: unchecked).
    pub max_abs: Vec<Option<f64>>,
    /// The target clearly closest to f64 here: its error at most half of every other's (null: no clear winner).
    pub closer: Option<String>,
    /// How many times smaller the closer target's max |t − f64| is than the next one's.
    pub closer_by: Option<f64>,
    /// Target pairs compared with each other on this node's values: the worst value per pair.
    pub pairs: Vec<PairValue>,
}

/// One value compared between two targets (`a` taken as the reference of the tolerance test).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PairValue {
    pub value: String,
    pub a: String,
    pub b: String,
    /// Fail when |a − b| is beyond the tolerance of b's element type; unchecked when shapes or types differ.
    pub status: ValueStatus,
    /// Largest |a − b|.
    pub max_abs: Option<f64>,
    /// Largest share of the tolerance |a − b| uses.
    pub tolerance_used: Option<f64>,
    /// Why the pair is unchecked or failed without metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where two targets first disagree, and which one f64 says is wrong there.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Disagreement {
    pub at: NodeRef,
    pub a: String,
    pub b: String,
    /// Largest |a − b| on that value.
    pub max_abs: f64,
    pub tolerance_used: f64,
    /// Largest |a − f64| and |b − f64| on that value.
    pub a_error: Option<f64>,
    pub b_error: Option<f64>,
    /// The target at least 2× further from f64 on that value: the one that is wrong (null: both about equally far).
    pub wrong: Option<String>,
    /// The wrong target's own first divergence from f64 (it may come before the disagreement).
    pub wrong_first_divergence: Option<NodeRef>,
    /// The wrong target's culprits (nodes whose own error is out of tolerance), first few.
    pub wrong_culprits: Vec<NodeRef>,
}

/// "wgpu (3.2× closer)", or "≈" when no target is clearly closer.
pub fn closer_text(n: &NodeAgreement) -> String {
    match (&n.closer, n.closer_by) {
        (Some(c), Some(by)) if by.is_finite() && by < 10.0 => format!("{c} ({by:.1}× closer)"),
        (Some(c), Some(by)) if by.is_finite() => format!("{c} ({by:.0}× closer)"),
        (Some(c), _) => format!("{c} (exact)"),
        _ => "≈".into(),
    }
}

impl MultiReport {
    pub fn new(command: Vec<String>, targets: Vec<Report>, agreement: Agreement) -> MultiReport {
        let status = targets
            .iter()
            .map(|r| r.verdict.status)
            .max_by_key(|s| s.severity())
            .unwrap_or(Status::Clean);
        MultiReport {
            schema: MULTI_SCHEMA_VERSION.into(),
            phantom_version: env!("CARGO_PKG_VERSION").into(),
            command,
            status,
            targets,
            agreement,
        }
    }
}
