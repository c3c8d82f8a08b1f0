"""unknown_op.onnx: a model with a node tract cannot type (`Unique`, which ONNX Runtime runs and phantom has no kernel
for: its output's length depends on the values), beside a branch it
can: the reference stands in for the node, marks it and what depends on it not computed, and compares the rest.
Run: python3 tests/data/degrade/make_degrade.py (needs onnx)."""
import os

import onnx
from onnx import TensorProto as T
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
vi = helper.make_tensor_value_info
nodes = [
    helper.make_node("Relu", ["x"], ["r"]),
    helper.make_node("Unique", ["r"], ["d"]),
    helper.make_node("Mul", ["d", "d"], ["y"]),
    helper.make_node("Sigmoid", ["r"], ["s"]),
]
g = helper.make_graph(nodes, "unknown_op", [vi("x", T.FLOAT, [4, 3, 3])], [vi("y", T.FLOAT, ["n"]), vi("s", T.FLOAT, [4, 3, 3])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
m.ir_version = 8
onnx.save(m, os.path.join(HERE, "unknown_op.onnx"))
