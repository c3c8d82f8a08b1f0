//! `TreeEnsembleRegressor` (`ai.onnx.ml`: random forests, gradient boosting, as skl2onnx converts them) in f64:
//! tract has none. Written from ONNX Runtime's CPU kernel (`tree_ensemble_common.h`): each tree is walked from its
//! root (the node no other node of the tree points to) by `nodes_modes` — `BRANCH_LEQ`, `LT`, `GTE`, `GT`, `EQ`,
//! `NEQ`, with a NaN feature going where `nodes_missing_value_tracks_true` says — to a leaf whose `target_*`
//! weights are aggregated over the trees (`SUM`, `AVERAGE`, `MIN`, `MAX`), `base_values` added, then the
//! post-transform. Thresholds are the float32 values the model stores (or `nodes_values_as_tensor`'s); the
//! comparisons are in f64, so a feature computed upstream that lands on the other side of a threshold in f64 than
//! in the target's float32 takes the other branch: a discrete decision the reference adopts from the target's
//! features where they lie within noise ([`crate::reference::thresholds`]).

use std::collections::HashMap;

use tract_onnx::pb::AttributeProto;
use tract_onnx::prelude::*;

use super::kernel::{Kernel, Row};
use super::node::{Fact, Node};
use super::util::{f64s, fact};

pub(super) const TABLE: &[Row] = &[Row::new("TreeEnsembleRegressor", &Regressor)];

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Mode {
    Leq,
    Lt,
    Gte,
    Gt,
    Eq,
    Neq,
    /// Opset 5's `BRANCH_MEMBER`: true when the feature is one of the node's `members`.
    Member,
    Leaf,
}

impl Mode {
    fn parse(s: &[u8]) -> Option<Mode> {
        Some(match s {
            b"BRANCH_LEQ" => Mode::Leq,
            b"BRANCH_LT" => Mode::Lt,
            b"BRANCH_GTE" => Mode::Gte,
            b"BRANCH_GT" => Mode::Gt,
            b"BRANCH_EQ" => Mode::Eq,
            b"BRANCH_NEQ" => Mode::Neq,
            b"LEAF" => Mode::Leaf,
            _ => return None,
        })
    }

    /// Whether `x` takes the true branch at `threshold`.
    fn holds(self, x: f64, threshold: f64) -> bool {
        match self {
            Mode::Leq => x <= threshold,
            Mode::Lt => x < threshold,
            Mode::Gte => x >= threshold,
            Mode::Gt => x > threshold,
            Mode::Eq => x == threshold,
            Mode::Neq => x != threshold,
            Mode::Member | Mode::Leaf => false,
        }
    }
}

/// One node: a branch on a feature, or a leaf with its (target, weight) pairs.
pub(super) struct TreeNode {
    pub(super) mode: Mode,
    pub(super) feature: usize,
    pub(super) threshold: f64,
    /// The set a `Member` node tests (empty otherwise).
    pub(super) members: Vec<f64>,
    pub(super) missing_true: bool,
    pub(super) children: (usize, usize),
    pub(super) leaf: Vec<(usize, f64)>,
}

/// The forest as the attributes describe it.
pub(super) struct Forest {
    pub(super) nodes: Vec<TreeNode>,
    pub(super) roots: Vec<usize>,
}

pub(super) fn attr<'a>(n: &'a Node, name: &str) -> Option<&'a AttributeProto> {
    n.proto.attribute.iter().find(|a| a.name == name)
}

/// A float list attribute, or its `_as_tensor` form (doubles), as f64.
pub(super) fn reals(n: &Node, name: &str) -> TractResult<Vec<f64>> {
    if let Some(t) = attr(n, &format!("{name}_as_tensor")).and_then(|a| a.t.as_ref()) {
        let host = crate::model::proto::tensor_from_proto(t, None)
            .map_err(|e| anyhow::anyhow!("{}: {name}_as_tensor: {e}", n.proto.name))?;
        return Ok(host.to_f64_array().iter().copied().collect());
    }
    Ok(n.floats(name))
}

impl Forest {
    /// The forest of `n`, its leaf weights read from the `{leaves}_treeids`, `_nodeids`, `_ids` and `_weights`
    /// attributes (`target` for a regressor, `class` for a classifier).
    pub(super) fn of(n: &Node, leaves: &str) -> TractResult<Forest> {
        let bad = |what: &str| anyhow::anyhow!("{}: {what}", n.proto.name);
        let (trees, ids) = (n.ints("nodes_treeids"), n.ints("nodes_nodeids"));
        let (features, values) = (n.ints("nodes_featureids"), reals(n, "nodes_values")?);
        let (yes, no) = (n.ints("nodes_truenodeids"), n.ints("nodes_falsenodeids"));
        let missing = n.ints("nodes_missing_value_tracks_true");
        let modes = attr(n, "nodes_modes")
            .map(|a| a.strings.clone())
            .unwrap_or_default();
        let count = ids.len();
        anyhow::ensure!(
            [
                trees.len(),
                features.len(),
                values.len(),
                yes.len(),
                no.len(),
                modes.len()
            ]
            .iter()
            .all(|&l| l == count),
            bad("the nodes_* attributes differ in length")
        );
        let at: HashMap<(i64, i64), usize> = (0..count).map(|k| ((trees[k], ids[k]), k)).collect();
        let child = |k: usize, id: i64| at.get(&(trees[k], id)).copied();
        let mut nodes = Vec::with_capacity(count);
        for k in 0..count {
            let mode = Mode::parse(&modes[k]).ok_or_else(|| bad("unknown node mode"))?;
            let children = match mode {
                Mode::Leaf => (k, k),
                _ => (
                    child(k, yes[k]).ok_or_else(|| bad("a true branch to no node"))?,
                    child(k, no[k]).ok_or_else(|| bad("a false branch to no node"))?,
                ),
            };
            nodes.push(TreeNode {
                mode,
                feature: usize::try_from(features[k]).map_err(|_| bad("a negative feature id"))?,
                threshold: values[k],
                members: vec![],
                missing_true: missing.get(k).is_some_and(|&m| m != 0),
                children,
                leaf: vec![],
            });
        }
        let (t_trees, t_nodes, t_ids) = (
            n.ints(&format!("{leaves}_treeids")),
            n.ints(&format!("{leaves}_nodeids")),
            n.ints(&format!("{leaves}_ids")),
        );
        let weights = reals(n, &format!("{leaves}_weights"))?;
        anyhow::ensure!(
            [t_trees.len(), t_ids.len(), weights.len()]
                .iter()
                .all(|&l| l == t_nodes.len()),
            bad(&format!("the {leaves}_* attributes differ in length"))
        );
        for j in 0..t_nodes.len() {
            let k = *at
                .get(&(t_trees[j], t_nodes[j]))
                .ok_or_else(|| bad("a target weight on no node"))?;
            let target = usize::try_from(t_ids[j]).map_err(|_| bad("a negative target id"))?;
            nodes[k].leaf.push((target, weights[j]));
        }
        let pointed: std::collections::HashSet<usize> = nodes
            .iter()
            .filter(|t| t.mode != Mode::Leaf)
            .flat_map(|t| [t.children.0, t.children.1])
            .collect();
        let roots = (0..count).filter(|k| !pointed.contains(k)).collect();
        Ok(Forest { nodes, roots })
    }

    /// The leaf `row` reaches from `root`.
    pub(super) fn leaf(&self, root: usize, row: &[f64]) -> TractResult<&TreeNode> {
        let mut k = root;
        for _ in 0..=self.nodes.len() {
            let t = &self.nodes[k];
            if t.mode == Mode::Leaf {
                return Ok(t);
            }
            let x = *row.get(t.feature).ok_or_else(|| {
                anyhow::anyhow!("feature {} beyond the row's {}", t.feature, row.len())
            })?;
            let yes = match t.mode {
                Mode::Member => t.members.contains(&x),
                m => m.holds(x, t.threshold),
            } || (x.is_nan() && t.missing_true);
            k = if yes { t.children.0 } else { t.children.1 };
        }
        anyhow::bail!("a tree that cycles")
    }
}

struct Regressor;

pub(super) fn targets(n: &Node) -> usize {
    n.int("n_targets", 1).max(1) as usize
}

/// A regressor's one output: a row of `n_targets` per input row, in f64 (opset 5's `TreeEnsemble` too).
pub(super) fn regressor_facts(n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
    let (_, shape) = fact(n, ins, 0)?;
    let rows = if shape.len() == 1 { 1 } else { shape[0] };
    Ok(vec![(f64::datum_type(), vec![rows, targets(n)])])
}

impl Kernel for Regressor {
    fn facts(&self, n: &Node, ins: &[Option<&Fact>]) -> TractResult<Vec<Fact>> {
        regressor_facts(n, ins)
    }

    fn eval(&self, n: &Node, ins: &[Option<&Tensor>]) -> TractResult<Vec<Tensor>> {
        let forest = Forest::of(n, "target")?;
        let how = super::ml::string_attr(n, "aggregate_function", "SUM");
        let post = super::ml::string_attr(n, "post_transform", "NONE");
        let base = reals(n, "base_values")?;
        let x = f64s(n, ins, 0)?;
        Ok(vec![forest.regress(
            n,
            &x,
            targets(n),
            (&how, &post),
            &base,
        )?])
    }
}

impl Forest {
    /// Every row's `t` targets: the leaves' weights aggregated over the trees (`how`: SUM, AVERAGE, MIN, MAX),
    /// `base` added, then the post-transform (`post`), as ONNX Runtime's regressor does.
    pub(super) fn regress(
        &self,
        n: &Node,
        x: &tract_ndarray::ArrayD<f64>,
        t: usize,
        (how, post): (&str, &str),
        base: &[f64],
    ) -> TractResult<Tensor> {
        let width = x.shape().last().copied().unwrap_or(1).max(1);
        let rows: Vec<f64> = x.iter().copied().collect();
        let mut out = Vec::with_capacity(rows.len() / width * t);
        for row in rows.chunks(width) {
            let mut acc: Vec<Option<f64>> = vec![None; t];
            for &root in &self.roots {
                for &(target, w) in &self.leaf(root, row)?.leaf {
                    let slot = acc.get_mut(target).ok_or_else(|| {
                        anyhow::anyhow!("{}: target {target} of {t}", n.proto.name)
                    })?;
                    *slot = Some(match (slot.take(), how) {
                        (None, _) => w,
                        (Some(a), "MIN") => a.min(w),
                        (Some(a), "MAX") => a.max(w),
                        (Some(a), _) => a + w,
                    });
                }
            }
            for (j, a) in acc.into_iter().enumerate() {
                let mut v = a.unwrap_or(0.0);
                if how == "AVERAGE" {
                    v /= self.roots.len().max(1) as f64;
                }
                out.push(v + base.get(j).copied().unwrap_or(0.0));
            }
        }
        if t > 1 {
            super::ml::transform(n, &mut out, t, post)?;
        } else if post == "PROBIT" {
            out.iter_mut().for_each(|v| *v = super::ml::probit(*v));
        }
        let count = out.len() / t;
        super::util::shaped(&[count, t], out)
    }
}
