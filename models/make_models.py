"""Generates phantom's demo models (deterministic: fixed numpy seed). Run: python3 models/make_models.py

Needs `pip install onnx numpy`. The .onnx files are committed; this script records how they were made.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)


def init(name, *shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
    return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)


def save(model, name):
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name))
    print("wrote", name, len(model.graph.node), "nodes")


def convnet():
    """A small CNN classifier: Conv/BatchNorm/Relu/MaxPool, a SiLU block (Sigmoid*x), global pooling, Gemm, Softmax."""
    n = []
    inits = [
        init("c1.w", 16, 3, 3, 3), init("c1.b", 16, scale=0.1),
        numpy_helper.from_array(np.abs(rng.standard_normal(16)).astype(np.float32) + 0.5, "bn.scale"),
        numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "bn.bias"),
        numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "bn.mean"),
        numpy_helper.from_array(np.abs(rng.standard_normal(16)).astype(np.float32) + 0.5, "bn.var"),
        init("c2.w", 32, 16, 3, 3), init("c2.b", 32, scale=0.1),
        init("c3.w", 32, 1, 3, 3), init("fc.w", 10, 32), init("fc.b", 10, scale=0.1),
    ]
    n.append(helper.make_node("Conv", ["image", "c1.w", "c1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]))
    n.append(helper.make_node("BatchNormalization", ["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["bn1"], name="bn1", epsilon=1e-5))
    n.append(helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"))
    n.append(helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]))
    n.append(helper.make_node("Conv", ["p1", "c2.w", "c2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]))
    n.append(helper.make_node("Sigmoid", ["c2"], ["s2"], name="silu2.sigmoid"))
    n.append(helper.make_node("Mul", ["c2", "s2"], ["a2"], name="silu2.mul"))
    n.append(helper.make_node("Conv", ["a2", "c3.w"], ["c3"], name="dwconv3", pads=[1, 1, 1, 1], group=32))
    n.append(helper.make_node("Add", ["c3", "a2"], ["res3"], name="residual3"))
    n.append(helper.make_node("GlobalAveragePool", ["res3"], ["gap"], name="gap"))
    n.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"))
    n.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1))
    n.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1))
    g = helper.make_graph(
        n, "convnet",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        inits,
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="phantom-demo"), "convnet.onnx")


def encoder():
    """A one-block transformer encoder: token ids -> embedding Gather, LayerNorm, single-head attention with
    Softmax, exact Gelu through Erf, residuals, mean pooling. Exercises integer inputs and ops tract lacks in f64."""
    d, vocab, ff = 32, 100, 64
    inits = [
        init("emb", vocab, d, scale=1.0), init("pos", 1, 16, d, scale=0.1),
        numpy_helper.from_array(np.ones(d, np.float32), "ln1.g"), numpy_helper.from_array(np.zeros(d, np.float32), "ln1.b"),
        init("wq", d, d), init("wk", d, d), init("wv", d, d), init("wo", d, d),
        numpy_helper.from_array(np.array([1.0 / np.sqrt(d)], np.float32), "scale"),
        numpy_helper.from_array(np.ones(d, np.float32), "ln2.g"), numpy_helper.from_array(np.zeros(d, np.float32), "ln2.b"),
        init("w1", d, ff), init("b1", ff, scale=0.1), init("w2", ff, d), init("b2", d, scale=0.1),
        numpy_helper.from_array(np.array([np.sqrt(0.5)], np.float32), "rsqrt2"),
        numpy_helper.from_array(np.array([1.0], np.float32), "one"),
        numpy_helper.from_array(np.array([0.5], np.float32), "half"),
        numpy_helper.from_array(np.array([0, 2, 1], np.int64), "perm_k"),
    ]
    n = [
        helper.make_node("Gather", ["emb", "input_ids"], ["tok"], name="embed"),
        helper.make_node("Add", ["tok", "pos"], ["x0"], name="add_pos"),
        helper.make_node("LayerNormalization", ["x0", "ln1.g", "ln1.b"], ["h"], name="ln1", axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["h", "wq"], ["q"], name="q_proj"),
        helper.make_node("MatMul", ["h", "wk"], ["k"], name="k_proj"),
        helper.make_node("MatMul", ["h", "wv"], ["v"], name="v_proj"),
        helper.make_node("Transpose", ["k"], ["kt"], name="k_t", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores_raw"], name="qk"),
        helper.make_node("Mul", ["scores_raw", "scale"], ["scores"], name="scale_scores"),
        helper.make_node("Softmax", ["scores"], ["attn"], name="attn_softmax", axis=-1),
        helper.make_node("MatMul", ["attn", "v"], ["ctx"], name="attn_v"),
        helper.make_node("MatMul", ["ctx", "wo"], ["o"], name="o_proj"),
        helper.make_node("Add", ["x0", "o"], ["x1"], name="residual1"),
        helper.make_node("LayerNormalization", ["x1", "ln2.g", "ln2.b"], ["h2"], name="ln2", axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["h2", "w1"], ["f1m"], name="ff1"),
        helper.make_node("Add", ["f1m", "b1"], ["f1"], name="ff1_bias"),
        helper.make_node("Mul", ["f1", "rsqrt2"], ["g0"], name="gelu.div"),
        helper.make_node("Erf", ["g0"], ["g1"], name="gelu.erf"),
        helper.make_node("Add", ["g1", "one"], ["g2"], name="gelu.add"),
        helper.make_node("Mul", ["f1", "g2"], ["g3"], name="gelu.mul"),
        helper.make_node("Mul", ["g3", "half"], ["g4"], name="gelu.half"),
        helper.make_node("MatMul", ["g4", "w2"], ["f2m"], name="ff2"),
        helper.make_node("Add", ["f2m", "b2"], ["f2"], name="ff2_bias"),
        helper.make_node("Add", ["x1", "f2"], ["x2"], name="residual2"),
        helper.make_node("ReduceMean", ["x2"], ["pooled"], name="mean_pool", axes=[1], keepdims=0),
    ]
    g = helper.make_graph(
        n, "encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 16])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, d])],
        inits,
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="phantom-demo"), "encoder.onnx")


def noisy():
    """A model with an unseeded RandomNormal (a nondeterministic node) between deterministic ones."""
    n = [
        helper.make_node("Mul", ["x", "two"], ["scaled"], name="scale"),
        helper.make_node("RandomNormal", [], ["noise"], name="noise", shape=[1, 64], scale=0.01),
        helper.make_node("Add", ["scaled", "noise"], ["noisy"], name="add_noise"),
        helper.make_node("Relu", ["noisy"], ["y"], name="relu"),
    ]
    g = helper.make_graph(
        n, "noisy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(np.array([2.0], np.float32), "two")],
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="phantom-demo"), "noisy.onnx")


if __name__ == "__main__":
    convnet()
    encoder()
    noisy()
