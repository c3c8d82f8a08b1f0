"""scikit-learn pipelines converted by skl2onnx (the `ai.onnx.ml` ops phantom evaluates in f64: LinearClassifier,
LinearRegressor, Normalizer, Scaler, TreeEnsembleRegressor, SVMRegressor), one per op and aggregate. Deterministic (fixed seeds). Run:
    python3 tests/data/ml/make_ml.py      (needs `pip install scikit-learn skl2onnx onnx numpy`)
The .onnx files are committed; this script records how they were made.
"""
import os

import numpy as np
from skl2onnx import to_onnx
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer, StandardScaler
from sklearn.svm import SVR

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(33)
X = rng.standard_normal((64, 5)).astype(np.float32)
y3 = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 0.5).astype(int)
y2 = (X[:, 0] - X[:, 3] > 0).astype(int)
yr = X @ np.array([0.5, -1.0, 2.0, 0.1, 0.0], np.float32) + 0.3


def save(model, name):
    onx = to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(onx.SerializeToString())
    print("wrote", name, [n.op_type for n in onx.graph.node])


save(make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(X, y3), "scaler_logreg3.onnx")
save(make_pipeline(Normalizer(norm="l2"), LogisticRegression(max_iter=500)).fit(X, y2), "normalizer_logreg2.onnx")
save(make_pipeline(StandardScaler(), LinearRegression()).fit(X, yr), "scaler_linreg.onnx")
save(RandomForestRegressor(n_estimators=6, max_depth=4, random_state=0).fit(X, yr), "forest_reg.onnx")
save(GradientBoostingRegressor(n_estimators=8, max_depth=3, random_state=0).fit(X, yr), "boosting_reg.onnx")
save(make_pipeline(StandardScaler(), SVR(kernel="rbf")).fit(X, yr), "scaler_svr_rbf.onnx")


def misfit_classifier():
    """A LinearClassifier whose 12 coefficients do not fit its 3 classes × 2 declared features (ONNX Runtime's own
    `logreg_iris` test model has this shape: ORT reads the first 6, tract another layout)."""
    from onnx import TensorProto, helper
    node = helper.make_node("LinearClassifier", ["x"], ["label", "scores"], domain="ai.onnx.ml",
                            coefficients=list(np.linspace(-1, 1, 12)), intercepts=[0.1, 0.2, -0.3],
                            classlabels_ints=[0, 1, 2], post_transform="LOGISTIC")
    g = helper.make_graph([node], "misfit", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
                          [helper.make_tensor_value_info("label", TensorProto.INT64, [3]),
                           helper.make_tensor_value_info("scores", TensorProto.FLOAT, [3, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    with open(os.path.join(HERE, "misfit_classifier.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    print("wrote misfit_classifier.onnx")


misfit_classifier()


def preprocessing():
    """SimpleImputer → Binarizer → LinearRegression (Imputer, Binarizer, LinearRegressor), and a one-hot encoding of
    two int64 columns into a LinearRegression (ArrayFeatureExtractor, OneHotEncoder with int64 categories)."""
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import Binarizer, OneHotEncoder
    save(make_pipeline(SimpleImputer(strategy="mean"), Binarizer(threshold=0.2), LinearRegression()).fit(X, yr),
         "imputer_binarizer_linreg.onnx")
    xi = rng.integers(0, 4, (64, 2)).astype(np.int64)
    yi = (xi[:, 0] * 0.5 - xi[:, 1]).astype(np.float32)
    model = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LinearRegression()).fit(xi, yi)
    onx = to_onnx(model, xi[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    with open(os.path.join(HERE, "onehot_linreg.onnx"), "wb") as f:
        f.write(onx.SerializeToString())
    print("wrote onehot_linreg.onnx", [n.op_type for n in onx.graph.node])


preprocessing()


def classifiers():
    """Classifiers and a clustering, with scikit-learn's own predictions beside them (`<name>.sk.npz`: `label`,
    and `proba` or `distances`) on the inputs `ml_x.npy` (the 64 rows above): TreeEnsembleClassifier (random forest
    of three classes, gradient boosting binary and three-class), SVMClassifier (RBF SVC, three classes), and
    k-means (ONNX ops: distances and an ArgMin)."""
    from sklearn.cluster import KMeans
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.svm import SVC
    np.save(os.path.join(HERE, "ml_x.npy"), X)
    no_zipmap = {"zipmap": False}
    for name, model, options in [
        ("forest_cls3.onnx", RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X, y3), None),
        ("boosting_cls2.onnx", GradientBoostingClassifier(n_estimators=6, max_depth=2, random_state=0).fit(X, y2),
         no_zipmap),
        ("boosting_cls3.onnx", GradientBoostingClassifier(n_estimators=4, max_depth=2, random_state=0).fit(X, y3),
         no_zipmap),
        ("svc_rbf3.onnx", SVC(kernel="rbf", probability=False).fit(X, y3), no_zipmap),
        ("svc_rbf2.onnx", SVC(kernel="rbf", probability=False).fit(X, y2), no_zipmap),
        ("kmeans.onnx", KMeans(n_clusters=4, n_init=3, random_state=0).fit(X), None),
    ]:
        opts = {id(model): options} if options else None
        onx = to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options=opts)
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(onx.SerializeToString())
        expected = {"label": model.predict(X).astype(np.int64)}
        if hasattr(model, "predict_proba") and not isinstance(model, SVC):
            expected["proba"] = model.predict_proba(X)
        elif isinstance(model, SVC):
            expected["scores"] = model.decision_function(X)
        else:
            expected["distances"] = model.transform(X)
        np.savez(os.path.join(HERE, name.replace(".onnx", ".sk.npz")), **expected)
        print("wrote", name, [n.op_type for n in onx.graph.node])


classifiers()


def label_encoders():
    """label_encoders.onnx: int64 codes → strings → floats → int64 again, through three LabelEncoders (ai.onnx.ml
    opset 2: int, string and float keys; 7 is no key and takes each default), the floats scaling an input."""
    from onnx import TensorProto, helper
    le = lambda i, o, **kw: helper.make_node("LabelEncoder", [i], [o], domain="ai.onnx.ml", **kw)
    nodes = [
        le("codes", "names", keys_int64s=[0, 1, 2], values_strings=["low", "mid", "high"], default_string="none"),
        le("names", "weights", keys_strings=["low", "mid", "high"], values_floats=[0.25, 1.5, 3.0], default_float=-1.0),
        helper.make_node("Mul", ["weights", "x"], ["scaled"]),
        le("weights", "back", keys_floats=[0.25, 1.5, 3.0], values_int64s=[10, 20, 30], default_int64=-7),
    ]
    g = helper.make_graph(nodes, "label_encoders",
                          [helper.make_tensor_value_info("codes", TensorProto.INT64, [6]),
                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                          [helper.make_tensor_value_info("scaled", TensorProto.FLOAT, [6]),
                           helper.make_tensor_value_info("back", TensorProto.INT64, [6])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 2)])
    m.ir_version = 8
    with open(os.path.join(HERE, "label_encoders.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    np.save(os.path.join(HERE, "label_codes.npy"), np.array([0, 1, 2, 7, 1, 0], np.int64))
    print("wrote label_encoders.onnx")


label_encoders()


def near_thresholds():
    """scaler_forest.onnx: StandardScaler → RandomForestClassifier (Scaler, TreeEnsembleClassifier), and inputs
    `scaler_forest_x.npy` whose features, once scaled, land on the forest's split thresholds: the float32 Scaler
    of ONNX Runtime and phantom's float64 one put them on either side of a threshold (label flips within noise)."""
    from sklearn.ensemble import RandomForestClassifier
    model = make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0))
    model.fit(X, y3)
    save(model, "scaler_forest.onnx")
    scaler, forest = model[0], model[1]
    splits = [(f, t) for est in forest.estimators_ for f, t in zip(est.tree_.feature, est.tree_.threshold) if f >= 0]
    rows = X[np.arange(len(splits)) % len(X)].astype(np.float64)
    for k, (f, t) in enumerate(splits):
        # The threshold as skl2onnx stores it (float32), unscaled into the input's space.
        rows[k, f] = float(np.float32(t)) * scaler.scale_[f] + scaler.mean_[f]
    np.save(os.path.join(HERE, "scaler_forest_x.npy"), rows.astype(np.float32))
    print("wrote scaler_forest_x.npy", rows.shape)


near_thresholds()


def near_thresholds_fault():
    """scaler_forest_fault.onnx: scaler_forest.onnx with its Scaler's scale 1% larger (a fault the threshold
    decisions must not hide)."""
    import onnx
    m = onnx.load(os.path.join(HERE, "scaler_forest.onnx"))
    for n in m.graph.node:
        if n.op_type == "Scaler":
            for a in n.attribute:
                if a.name == "scale":
                    a.floats[:] = [v * 1.01 for v in a.floats]
    onnx.save(m, os.path.join(HERE, "scaler_forest_fault.onnx"))
    print("wrote scaler_forest_fault.onnx")


near_thresholds_fault()
