"""gap_fc.onnx: GlobalAveragePool (which onnxruntime-ggml 0.2.0 lacks) then Flatten, MatMul and Add (which it has),
seeded weights: with `--ep-option partial=1` ggml runs part of the graph and ONNX Runtime's CPU provider the rest.

usage: python3 make_gap_fc.py      (needs onnx and numpy: tests/locks/toolchains.txt)
"""
import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

rng = np.random.default_rng(0)
w = nh.from_array(rng.standard_normal((8, 16)).astype(np.float32), "W")
b = nh.from_array(rng.standard_normal(16).astype(np.float32), "b")
nodes = [
    h.make_node("GlobalAveragePool", ["x"], ["gap"], name="gap"),
    h.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
    h.make_node("MatMul", ["flat", "W"], ["mm"], name="fc"),
    h.make_node("Add", ["mm", "b"], ["y"], name="bias"),
]
g = h.make_graph(nodes, "gap_fc", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 4, 4])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, 16])], [w, b])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, "gap_fc.onnx")
