"""Models written by onnxruntime-extensions' own pre/post-processing tools, at their defaults (run through make.sh,
which makes the environment from tests/locks/extensions.txt). The float model they wrap is small and made here with
onnx.helper, seeded; what the tool writes around it is its own.

- ext_mobilenet_ppp.onnx: `add_pre_post_processing_to_model.mobilenet` (ModelSource.PYTORCH) around a 224×224
  classifier: the input is an encoded image (`image`, uint8 bytes) that `DecodeImage` (com.microsoft.extensions, a
  custom op) decodes, then resize, crop, normalisation and, after the model, a Softmax.

usage: python make_extensions.py OUT_DIR
"""
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

RNG = np.random.default_rng(77)


def weight(name, *shape, scale=0.2):
    return nh.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def classifier():
    """Two strided convolutions, pooled, and a linear layer: [1, 3, 224, 224] -> [1, 10] (opset 16: the tool's)."""
    x = h.make_tensor_value_info("input", T.FLOAT, [1, 3, 224, 224])
    y = h.make_tensor_value_info("logits", T.FLOAT, [1, 10])
    inits = [weight("c1.w", 8, 3, 3, 3), weight("c1.b", 8), weight("c2.w", 16, 8, 3, 3, scale=0.1),
             weight("c2.b", 16), weight("fc.w", 16, 10), weight("fc.b", 10)]
    nodes = [
        h.make_node("Conv", ["input", "c1.w", "c1.b"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1], name="/c1/Conv"),
        h.make_node("Relu", ["c1"], ["r1"], name="/c1/Relu"),
        h.make_node("Conv", ["r1", "c2.w", "c2.b"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1], name="/c2/Conv"),
        h.make_node("Relu", ["c2"], ["r2"], name="/c2/Relu"),
        h.make_node("GlobalAveragePool", ["r2"], ["pool"], name="/pool"),
        h.make_node("Flatten", ["pool"], ["flat"], name="/Flatten"),
        h.make_node("MatMul", ["flat", "fc.w"], ["mm"], name="/fc/MatMul"),
        h.make_node("Add", ["mm", "fc.b"], ["logits"], name="/fc/Add"),
    ]
    graph = h.make_graph(nodes, "classifier", [x], [y], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 16)], ir_version=8)


def mobilenet_ppp(out, tmp):
    from onnxruntime_extensions.tools.add_pre_post_processing_to_model import ModelSource, mobilenet
    src = Path(tmp) / "classifier.onnx"
    onnx.save(classifier(), src)
    mobilenet(src, Path(out) / "ext_mobilenet_ppp.onnx", ModelSource.PYTORCH)


def main():
    out = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        mobilenet_ppp(out, tmp)
    m = onnx.load(os.path.join(out, "ext_mobilenet_ppp.onnx"))
    onnx.checker.check_model(m)
    print("ext_mobilenet_ppp.onnx", sorted({(n.domain, n.op_type) for n in m.graph.node}))


if __name__ == "__main__":
    main()
