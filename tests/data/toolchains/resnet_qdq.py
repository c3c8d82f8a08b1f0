"""A ResNet-18 (the torchvision layout: 7x7 stem, max pool, four stages of two basic blocks, 1000 logits; batch
normalization folded into the convolutions, seeded random weights) quantized by ONNX Runtime's `quantize_static`
in QDQ format, as users run it: its defaults (S8 activations and weights, per tensor, MinMax), and per channel
with U8 activations calibrated by Entropy. Written at test time by the tests' own locked environment
(tests/locks/conformance.txt: onnx, onnxruntime, numpy); ONNX Runtime fuses these graphs into QLinearConv/QGemm
kernels whose levels differ from its unfused run where a level's input lies near a boundary.

usage: python resnet_qdq.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

RNG = np.random.default_rng(18)
SIZE = 224


class Builder:
    def __init__(self):
        self.inits, self.nodes = [], []

    def conv(self, x, cin, cout, k, stride, name, relu=True):
        fan = cin * k * k
        w = RNG.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / fan)
        self.inits += [nh.from_array(w.astype(np.float32), name + ".w"),
                       nh.from_array((RNG.standard_normal(cout) * 0.1).astype(np.float32), name + ".b")]
        self.nodes.append(h.make_node("Conv", [x, name + ".w", name + ".b"], [name], pads=[k // 2] * 4,
                                      strides=[stride] * 2, name=name + "/Conv"))
        if not relu:
            return name
        self.nodes.append(h.make_node("Relu", [name], [name + "_r"], name=name + "/Relu"))
        return name + "_r"

    def block(self, x, cin, cout, stride, name):
        a = self.conv(x, cin, cout, 3, stride, name + ".c1")
        b = self.conv(a, cout, cout, 3, 1, name + ".c2", relu=False)
        short = x if stride == 1 and cin == cout else self.conv(x, cin, cout, 1, stride, name + ".down", relu=False)
        self.nodes += [h.make_node("Add", [b, short], [name + ".add"], name=name + "/Add"),
                       h.make_node("Relu", [name + ".add"], [name + ".out"], name=name + "/Relu")]
        return name + ".out"


def resnet18():
    b = Builder()
    x = b.conv("images", 3, 64, 7, 2, "stem")
    b.nodes.append(h.make_node("MaxPool", [x], ["pool0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4,
                               name="/maxpool"))
    x, cin = "pool0", 64
    stages = [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)]
    for i, (cout, stride) in enumerate(stages):
        x, cin = b.block(x, cin, cout, stride, f"b{i}"), cout
    fc = RNG.standard_normal((1000, cin)) * np.sqrt(2.0 / cin)
    b.inits += [nh.from_array(fc.astype(np.float32), "fc.w"), nh.from_array(np.zeros(1000, np.float32), "fc.b")]
    b.nodes += [h.make_node("GlobalAveragePool", [x], ["pool"], name="/avgpool"),
                h.make_node("Flatten", ["pool"], ["flat"], name="/flatten"),
                h.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1, name="/fc/Gemm")]
    graph = h.make_graph(b.nodes, "resnet18", [h.make_tensor_value_info("images", T.FLOAT, [1, 3, SIZE, SIZE])],
                         [h.make_tensor_value_info("logits", T.FLOAT, [1, 1000])], b.inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def images():
    from onnxruntime.quantization import CalibrationDataReader

    class Images(CalibrationDataReader):
        def __init__(self):
            self.left = [{"images": RNG.standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)} for _ in range(8)]

        def get_next(self):
            return self.left.pop() if self.left else None

    return Images()


def main():
    from onnxruntime.quantization import CalibrationMethod, QuantType, quantize_static
    out = sys.argv[1]
    src = os.path.join(out, "resnet18_float.onnx")
    onnx.save(resnet18(), src)
    quantize_static(src, os.path.join(out, "resnet18_qdq.onnx"), images())
    quantize_static(src, os.path.join(out, "resnet18_qdq_pc_u8_entropy.onnx"), images(), per_channel=True,
                    activation_type=QuantType.QUInt8, calibrate_method=CalibrationMethod.Entropy)
    os.remove(src)


if __name__ == "__main__":
    main()
