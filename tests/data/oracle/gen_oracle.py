"""Builds the float64 oracle cases behind tests/oracle.rs. Run: python3 tests/data/oracle/gen_oracle.py

For each ONNX backend node test (onnx.backend.test.case.node.collect_testcases) of the ops phantom's reference
must get right in f64 (FINDINGS' lists plus common float ops), the model is converted to float64 (every FLOAT
type, initializer, Constant and Cast target becomes DOUBLE) and evaluated by onnx.reference.ReferenceEvaluator on
the test inputs widened to float64 (with exact Gelu and HardSwish: onnx's function bodies round their
constants to float32). Each case directory keeps the original float32 model, its inputs (.npy, as
the test has them) and the float64 expected outputs (.npy). Needs `pip install onnx numpy scipy` (onnx 1.23.2 used).
"""
import os
import shutil
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx.backend.test.case.node import collect_testcases
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from scipy.special import erf  # noqa: E402  (pip install scipy)


class Gelu(OpRun):
    """Exact Gelu: onnx's function body rounds its constants (1/sqrt(2), sqrt(2/pi), 0.044715) to float32."""

    op_domain = ""

    def _run(self, x, approximate="none"):
        if approximate == "tanh":
            return (0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),)
        return (0.5 * x * (1 + erf(x / np.sqrt(2))),)


class HardSwish(OpRun):
    """Exact HardSwish: onnx's function body uses alpha = float32(1/6)."""

    op_domain = ""

    def _run(self, x):
        return (x * np.clip(x / 6 + 0.5, 0, 1),)

OPS = {
    # FINDINGS: no f64 kernel in tract
    "Sigmoid", "Erf", "Gelu", "HardSwish", "LeakyRelu", "Pow", "IsNaN", "IsInf", "Round", "LSTM", "GRU", "Attention",
    # FINDINGS: computed in f32 inside tract, or constants folded / truncated
    "Resize", "GridSample", "RMSNormalization", "Selu", "BatchNormalization", "Gemm",
    # common float ops the reference must get right
    "Conv", "MatMul", "Softmax", "LogSoftmax", "LayerNormalization", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal",
    "ReduceMean", "ReduceSum", "Div", "HardSigmoid", "Elu", "Softplus", "InstanceNormalization", "AveragePool",
    "GlobalAveragePool", "Mish", "Swish", "Clip", "Relu", "Cos", "Sin",
}
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cases")
MAX_BYTES = 48 * 1024


def to_double(g):
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        t = vi.type.tensor_type
        if t.elem_type == TensorProto.FLOAT:
            t.elem_type = TensorProto.DOUBLE
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
            if n.op_type in ("Cast", "EyeLike", "RandomNormal", "RandomUniform") and a.name in ("to", "dtype") and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
            if n.op_type == "Constant" and a.name in ("value_float", "value_floats"):
                v = np.array(a.f if a.name == "value_float" else list(a.floats), np.float64)
                a.CopyFrom(onnx.helper.make_attribute("value", numpy_helper.from_array(v)))
            if a.type == onnx.AttributeProto.GRAPH:
                to_double(a.g)


def main():
    warnings.simplefilter("ignore")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    kept = 0
    for case in collect_testcases(None):
        if case.kind != "node" or not case.data_sets:
            continue
        ops = {n.op_type for n in case.model.graph.node}
        if not ops & OPS or any(n.domain not in ("", "ai.onnx") for n in case.model.graph.node):
            continue
        inputs, test_outputs = case.data_sets[0]
        if not (isinstance(inputs[0], np.ndarray) and inputs[0].dtype == np.float32):
            continue
        if any(not isinstance(x, np.ndarray) for x in inputs):
            continue
        # Real models hold axes, scales, shapes and weights as initializers: bake every input but the first.
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        g = model.graph
        for vi, x in list(zip(g.input, inputs))[1:]:
            g.initializer.append(numpy_helper.from_array(x, vi.name))
        del g.input[1:]
        inputs = inputs[:1]
        m64 = onnx.ModelProto()
        m64.CopyFrom(model)
        to_double(m64.graph)
        feeds = {}
        for vi, x in zip(model.graph.input, inputs):
            feeds[vi.name] = x.astype(np.float64) if x.dtype == np.float32 else x
        try:
            expected = ReferenceEvaluator(m64, new_ops=[Gelu, HardSwish]).run(None, feeds)
        except Exception as e:  # the oracle cannot run this case in float64
            print("skip", case.name, type(e).__name__, str(e)[:80], file=sys.stderr)
            continue
        if any(not isinstance(y, np.ndarray) or y.dtype == object for y in expected):
            continue
        if sum(np.asarray(x).nbytes for x in inputs) + sum(np.asarray(y).nbytes * 2 for y in expected) > MAX_BYTES:
            continue  # keep the committed fixtures small
        d = os.path.join(OUT, case.name)
        os.makedirs(d)
        onnx.save(model, os.path.join(d, "model.onnx"))
        for i, (vi, x) in enumerate(zip(model.graph.input, inputs)):
            np.save(os.path.join(d, f"input_{i}_{vi.name}.npy"), np.ascontiguousarray(x))
        for i, (vi, y, t) in enumerate(zip(model.graph.output, expected, test_outputs)):
            y = np.asarray(y)
            if y.size == np.asarray(t).size:
                y = y.reshape(np.asarray(t).shape)  # the test's own output shape (scalar vs [1])
            if y.dtype == np.float32:
                y = y.astype(np.float64)
            np.save(os.path.join(d, f"expected_{i}_{vi.name}.npy"), np.ascontiguousarray(y))
        kept += 1
    print("cases:", kept)


if __name__ == "__main__":
    main()
