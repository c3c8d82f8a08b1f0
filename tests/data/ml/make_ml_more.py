"""More classic-ML fixtures, beside make_ml.py (which rewrites every file it makes; this one only its own). Run:
    python3 tests/data/ml/make_ml_more.py      (needs `pip install scikit-learn skl2onnx onnx numpy`)
- svc_proba2.onnx, svc_proba3.onnx: SVC(probability=True), binary and three classes (SVMClassifier with prob_a,
  prob_b: Platt scaling and pairwise coupling), with scikit-learn's `label` and `proba` in `<name>.sk.npz`;
- tree_ensemble5.onnx: forest_reg.onnx's TreeEnsembleRegressor rewritten as ai.onnx.ml opset 5's `TreeEnsemble`
  (leaves as their own nodes, modes as uint8, splits and weights as tensors), with scikit-learn's predictions in
  `tree_ensemble5.sk.npz`, and the same with a set-membership split
  (`tree_member5.onnx`, inputs `tree_member5_x.npy` whose split feature holds small integers).
Inputs: `ml_x.npy` (the 64 rows make_ml.py writes).
"""
import os
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from skl2onnx import to_onnx

HERE = os.path.dirname(os.path.abspath(__file__))
warnings.filterwarnings("ignore", category=FutureWarning)
X = np.load(os.path.join(HERE, "ml_x.npy"))
y3 = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 0.5).astype(int)
y2 = (X[:, 0] - X[:, 3] > 0).astype(int)
yr = X @ np.array([0.5, -1.0, 2.0, 0.1, 0.0], np.float32) + 0.3


def svc_probabilities():
    from sklearn.svm import SVC
    for name, y in [("svc_proba2", y2), ("svc_proba3", y3)]:
        model = SVC(kernel="rbf", probability=True, random_state=0).fit(X, y)
        onx = to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options={id(model): {"zipmap": False}})
        onnx.save(onx, os.path.join(HERE, name + ".onnx"))
        np.savez(os.path.join(HERE, name + ".sk.npz"), label=model.predict(X).astype(np.int64),
                 proba=model.predict_proba(X))
        print("wrote", name, [n.op_type for n in onx.graph.node])


def tree_ensemble5(name, member):
    """A forest as opset 5's TreeEnsemble. With `member`, the first split of the first tree becomes a set
    membership (BRANCH_MEMBER) over a few values of its feature."""
    from sklearn.ensemble import RandomForestRegressor
    forest = RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0).fit(X, yr)
    splits, modes, feats, trues, tleaf, falses, fleaf, roots = [], [], [], [], [], [], [], []
    leaf_w, leaf_t, members = [], [], []
    for est in forest.estimators_:
        t = est.tree_
        index = {}  # sklearn node -> interior index
        for k in range(t.node_count):
            if t.children_left[k] >= 0:
                index[k] = len(index) + len(splits)
        base = len(splits)
        order = sorted(index, key=lambda k: index[k])
        roots.append(base)
        for k in order:
            feats.append(int(t.feature[k]))
            splits.append(float(t.threshold[k]))
            modes.append(0)  # BRANCH_LEQ
            for child, ids, leafs in [(t.children_left[k], trues, tleaf), (t.children_right[k], falses, fleaf)]:
                if t.children_left[child] >= 0:
                    ids.append(index[child])
                    leafs.append(0)
                else:
                    ids.append(len(leaf_w))
                    leafs.append(1)
                    leaf_w.append(float(t.value[child][0][0]) / len(forest.estimators_))
                    leaf_t.append(0)
    if member:
        # ONNX Runtime implements membership for small integers only: the feature is made integer in the inputs.
        f = feats[0]
        xm = X.copy()
        xm[:, f] = np.clip(np.round(X[:, f] * 2), -3, 3)
        np.save(os.path.join(HERE, name + "_x.npy"), xm)
        modes[0] = 6  # BRANCH_MEMBER: true when the feature is one of the values
        splits[0] = 0.0
        members = [1.0, 3.0, -2.0, float("nan")]
    node = helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml",
        aggregate_function=1, n_targets=1, post_transform=0,
        tree_roots=roots, nodes_featureids=feats,
        nodes_modes=numpy_helper.from_array(np.array(modes, np.uint8), "nodes_modes"),
        nodes_splits=numpy_helper.from_array(np.array(splits, np.float32), "nodes_splits"),
        nodes_truenodeids=trues, nodes_trueleafs=tleaf, nodes_falsenodeids=falses, nodes_falseleafs=fleaf,
        leaf_targetids=leaf_t, leaf_weights=numpy_helper.from_array(np.array(leaf_w, np.float32), "leaf_weights"),
        **({"membership_values": numpy_helper.from_array(np.array(members, np.float32), "membership_values")}
           if member else {}))
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 5])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, name + ".onnx"))
    if not member:
        np.savez(os.path.join(HERE, name + ".sk.npz"), predictions=forest.predict(X))
    print("wrote", name, len(splits), "splits", len(leaf_w), "leaves")


svc_probabilities()
tree_ensemble5("tree_ensemble5", member=False)
tree_ensemble5("tree_member5", member=True)
