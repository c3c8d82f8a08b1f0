//! Which nodes run alone on the target (the introduced error), planned from the comparison: every node when a value
//! fails, else only those whose values may be anomalous; and which reference values those nodes read and write.

use std::collections::HashSet;

use super::explain::operands_of;
use super::stream::Compared;
use super::{CompareSettings, Lane, Prepared};
use crate::analysis::{anomaly, culprit};
use crate::report::model::IntroducedScope;

/// The attribution stage of one lane: which nodes ran alone and what that measured, and its time.
#[derive(Default)]
pub struct Attribution {
    /// The nodes to run alone (None: every node), by name.
    pub alone: Option<HashSet<String>>,
    /// Which values the stage ran alone (when it ran).
    pub scope: Option<IntroducedScope>,
    /// Its time (with the reference's second run, for the first target, when one was needed).
    pub ms: f64,
}

/// The nodes to run alone (None: every node), and how many values that measures. Every node when asked
/// (`--attribute-all`) or when a value fails, in the graph or in the correctly rounded run (culprits are chosen from
/// what nodes do alone); otherwise only the nodes of values whose error in the graph leaves room for an anomaly
/// ([`anomaly::may_be_anomalous`]): on a clean run, a node whose graph error is within rounding need not run again
/// to be cleared.
pub fn plan(
    s: &CompareSettings,
    p: &Prepared,
    cmp: &Compared,
    lane: &Lane,
) -> (Option<HashSet<String>>, IntroducedScope) {
    // Culprits will be sought: where a value fails, or where even the correctly rounded run fails.
    let fails = lane.reports.values().any(culprit::sought);
    let compared = lane
        .reports
        .values()
        .filter(|v| v.metrics.is_some())
        .count();
    if s.attribute_all || fails {
        let scope = IntroducedScope {
            all: true,
            measured: compared,
            compared,
        };
        return (None, scope);
    }
    let round = lane.rounding.as_ref();
    let keep: HashSet<&str> = (lane.reports.iter())
        .filter(|(name, v)| {
            anomaly::may_be_anomalous(v, operands_of(cmp, round, name), lane.spec.sums_f32())
        })
        .map(|(name, _)| name.as_str())
        .collect();
    let nodes: Vec<&crate::model::Node> = (p.graph.nodes.iter())
        .filter(|n| n.outputs.iter().any(|o| keep.contains(o.as_str())))
        .collect();
    let measured = (nodes.iter())
        .flat_map(|n| &n.outputs)
        .filter(|o| lane.reports.get(*o).is_some_and(|v| v.metrics.is_some()))
        .count();
    let scope = IntroducedScope {
        all: false,
        measured,
        compared,
    };
    (Some(nodes.iter().map(|n| n.name.clone()).collect()), scope)
}

/// The values the nodes to run alone read and write (every value when every node runs alone): what the reference
/// must hold for attribution and for the causes of what it finds.
pub fn reads(p: &Prepared, alone: Option<&HashSet<String>>) -> Option<HashSet<String>> {
    let alone = alone?;
    let nodes = p.graph.nodes.iter().filter(|n| alone.contains(&n.name));
    Some(
        nodes
            .flat_map(|n| n.inputs.iter().chain(&n.outputs).cloned())
            .collect(),
    )
}
