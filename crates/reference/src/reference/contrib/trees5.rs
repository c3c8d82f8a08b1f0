//! `TreeEnsemble` (`ai.onnx.ml` opset 5, the successor of `TreeEnsembleRegressor`/`Classifier`) in f64: tract has
//! none. The definition's layout: interior nodes indexed by `nodes_*` (modes as a uint8 tensor, splits as a tensor
//! of the input's type), each branch pointing at an interior node or, where `nodes_trueleafs`/`nodes_falseleafs`
//! say so, at a leaf of `leaf_targetids`/`leaf_weights`; `tree_roots` names each tree's root; `BRANCH_MEMBER` (6)
//! tests the feature against the node's set in `membership_values` (the sets in the order of the member nodes,
//! each ended by a NaN). The walk, the aggregation (`aggregate_function` 0 AVERAGE, 1 SUM, 2 MIN, 3 MAX) and the
//! post-transform (0 NONE, 1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO, 4 PROBIT) are the regressor's
//! ([`super::trees`]), which ONNX Runtime's kernel for this op also reuses. The splits are the stored values; the
//! comparisons are in f64.

use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::trees::{attr, regressor_facts, targets, Forest, Mode, TreeNode};
use super::util::f64s;

pub(super) const TABLE: &[Row] = &[Row::new("TreeEnsemble", &Ensemble)];

/// A tensor attribute as f64 (empty when absent).
fn tensor_attr(n: &Node, name: &str) -> TractResult<Vec<f64>> {
    let Some(t) = attr(n, name).and_then(|a| a.t.as_ref()) else {
        return Ok(vec![]);
    };
    let host = crate::model::proto::tensor_from_proto(t, None)
        .map_err(|e| anyhow::anyhow!("{}: {name}: {e}", n.proto.name))?;
    Ok(host.to_f64_array().iter().copied().collect())
}

fn mode(code: f64) -> Option<Mode> {
    Some(match code as i64 {
        0 => Mode::Leq,
        1 => Mode::Lt,
        2 => Mode::Gte,
        3 => Mode::Gt,
        4 => Mode::Eq,
        5 => Mode::Neq,
        6 => Mode::Member,
        _ => return None,
    })
}

/// The member sets, one per `BRANCH_MEMBER` node in node order, from NaN-delimited `membership_values`.
fn member_sets(values: &[f64]) -> Vec<Vec<f64>> {
    let mut sets = vec![vec![]];
    for &v in values {
        match v.is_nan() {
            true => sets.push(vec![]),
            false => sets.last_mut().expect("one set").push(v),
        }
    }
    sets
}

/// The forest: interior nodes first (their `nodes_*` index), then one node per leaf.
fn forest(n: &Node) -> TractResult<Forest> {
    let bad = |what: String| anyhow::anyhow!("TreeEnsemble `{}`: {what}", n.proto.name);
    let (features, splits) = (n.ints("nodes_featureids"), tensor_attr(n, "nodes_splits")?);
    let modes = tensor_attr(n, "nodes_modes")?;
    let (yes, no) = (n.ints("nodes_truenodeids"), n.ints("nodes_falsenodeids"));
    let (yes_leaf, no_leaf) = (n.ints("nodes_trueleafs"), n.ints("nodes_falseleafs"));
    let missing = n.ints("nodes_missing_value_tracks_true");
    let (targets, weights) = (n.ints("leaf_targetids"), tensor_attr(n, "leaf_weights")?);
    let count = features.len();
    let lengths = [
        splits.len(),
        modes.len(),
        yes.len(),
        no.len(),
        yes_leaf.len(),
        no_leaf.len(),
    ];
    anyhow::ensure!(
        lengths.iter().all(|&l| l == count),
        bad(format!(
            "the nodes_* attributes differ in length ({count} features, {lengths:?})"
        ))
    );
    anyhow::ensure!(
        targets.len() == weights.len(),
        bad(format!(
            "{} leaf targets but {} leaf weights",
            targets.len(),
            weights.len()
        ))
    );
    let mut sets = member_sets(&tensor_attr(n, "membership_values")?).into_iter();
    let index = |id: i64, leaf: bool| -> TractResult<usize> {
        let (limit, base) = if leaf {
            (targets.len(), count)
        } else {
            (count, 0)
        };
        usize::try_from(id)
            .ok()
            .filter(|&k| k < limit)
            .map(|k| base + k)
            .ok_or_else(|| {
                bad(format!(
                    "a branch to {} {id} of {limit}",
                    if leaf { "leaf" } else { "node" }
                ))
            })
    };
    let mut nodes = Vec::with_capacity(count + targets.len());
    for k in 0..count {
        let m =
            mode(modes[k]).ok_or_else(|| bad(format!("node {k}: unknown mode {}", modes[k])))?;
        let members = match m {
            Mode::Member => sets.next().filter(|s| !s.is_empty()).ok_or_else(|| {
                bad(format!(
                    "node {k} tests set membership, but membership_values has no set for it"
                ))
            })?,
            _ => vec![],
        };
        nodes.push(TreeNode {
            mode: m,
            feature: usize::try_from(features[k])
                .map_err(|_| bad(format!("node {k}: a negative feature id")))?,
            threshold: splits[k],
            members,
            missing_true: missing.get(k).is_some_and(|&v| v != 0),
            children: (
                index(yes[k], yes_leaf[k] != 0)?,
                index(no[k], no_leaf[k] != 0)?,
            ),
            leaf: vec![],
        });
    }
    for (j, (&t, &w)) in targets.iter().zip(&weights).enumerate() {
        let target =
            usize::try_from(t).map_err(|_| bad(format!("leaf {j}: a negative target id")))?;
        nodes.push(TreeNode {
            mode: Mode::Leaf,
            feature: 0,
            threshold: 0.0,
            members: vec![],
            missing_true: false,
            children: (count + j, count + j),
            leaf: vec![(target, w)],
        });
    }
    let roots = (n.ints("tree_roots").iter())
        .map(|&r| index(r, false))
        .collect::<TractResult<Vec<_>>>()?;
    Ok(Forest { nodes, roots })
}

struct Ensemble;

impl Kernel for Ensemble {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        regressor_facts(n, ins)
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let how = match n.int("aggregate_function", 1) {
            0 => "AVERAGE",
            1 => "SUM",
            2 => "MIN",
            3 => "MAX",
            other => anyhow::bail!(
                "TreeEnsemble `{}`: aggregate_function {other}",
                n.proto.name
            ),
        };
        let post = match n.int("post_transform", 0) {
            0 => "NONE",
            1 => "SOFTMAX",
            2 => "LOGISTIC",
            3 => "SOFTMAX_ZERO",
            4 => "PROBIT",
            other => anyhow::bail!("TreeEnsemble `{}`: post_transform {other}", n.proto.name),
        };
        let x = f64s(n, ins, 0)?;
        Ok(vec![forest(n)?.regress(
            n,
            &x,
            targets(n),
            (how, post),
            &[],
        )?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_sets_split_at_each_nan() {
        let nan = f64::NAN;
        assert_eq!(
            member_sets(&[1.0, 3.0, nan, 0.0, nan]),
            vec![vec![1.0, 3.0], vec![0.0], vec![]]
        );
        assert_eq!(member_sets(&[]), vec![Vec::<f64>::new()]);
    }
}
