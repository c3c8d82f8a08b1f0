"""String fixtures (ONNX STRING tensors), beside make_ml.py. Run:
    python3 tests/data/ml/make_ml_strings.py      (needs `pip install scikit-learn skl2onnx onnx numpy`)
- logreg_labels.onnx: LogisticRegression over ml_x.npy with string class labels (`label` is a string tensor,
  `probabilities` goes through ZipMap), scikit-learn's labels in `logreg_labels.sk.npy` (`<U`);
- onehot_strings.onnx: OneHotEncoder over a string column (categories "cat", "dog", "emu") then LinearRegression,
  with scikit-learn's predictions for `onehot_strings_x.npy` in `onehot_strings.sk.npy`.
"""
import os
import warnings

import numpy as np
from skl2onnx import convert_sklearn, to_onnx
from skl2onnx.common.data_types import StringTensorType

HERE = os.path.dirname(os.path.abspath(__file__))
warnings.filterwarnings("ignore", category=FutureWarning)
X = np.load(os.path.join(HERE, "ml_x.npy"))
NAMES = np.array(["setosa", "versicolor", "virginica"])


def save(name, model):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(model.SerializeToString())


def labels():
    from sklearn.linear_model import LogisticRegression
    y = NAMES[(X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 0.5).astype(int)]
    m = LogisticRegression(max_iter=500).fit(X, y)
    save("logreg_labels.onnx", to_onnx(m, X[:1], target_opset={"": 17, "ai.onnx.ml": 3}))
    np.save(os.path.join(HERE, "logreg_labels.sk.npy"), m.predict(X))


def onehot():
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder
    rng = np.random.default_rng(0)
    x = rng.choice(["cat", "dog", "emu"], size=(40, 1))
    y = (x[:, 0] == "dog") * 2.0 + (x[:, 0] == "emu") * -1.5 + 0.25
    m = make_pipeline(OneHotEncoder(), LinearRegression()).fit(x, y)
    types = [("animal", StringTensorType([None, 1]))]
    save("onehot_strings.onnx", convert_sklearn(m, initial_types=types, target_opset={"": 17, "ai.onnx.ml": 3}))
    np.save(os.path.join(HERE, "onehot_strings_x.npy"), x[:8])
    np.save(os.path.join(HERE, "onehot_strings.sk.npy"), m.predict(x[:8]).astype(np.float32))


if __name__ == "__main__":
    labels()
    onehot()
