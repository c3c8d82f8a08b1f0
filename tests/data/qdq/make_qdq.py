"""The demo CNN (models/convnet.onnx) quantized by ONNX Runtime's `quantize_static` in the QDQ format (per-channel
int8 weights, uint8 activations, 8 calibration inputs of seeds 0–7): the format ORT, TensorRT and QNN deployments
use. Run:
    python3 tests/data/qdq/make_qdq.py      (needs `pip install onnxruntime onnx numpy ml_dtypes`)
The .onnx file is committed; this script records how it was made.
"""
import os

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..", "..", "models", "convnet.onnx")
inp = ort.InferenceSession(SRC).get_inputs()[0]
shape = [d if isinstance(d, int) else 1 for d in inp.shape]


class Calibration(CalibrationDataReader):
    def __init__(self):
        self.feeds = iter([{inp.name: np.random.RandomState(k).randn(*shape).astype(np.float32)} for k in range(8)])

    def get_next(self):
        return next(self.feeds, None)


quantize_static(SRC, os.path.join(HERE, "convnet_qdq.onnx"), Calibration(), quant_format=QuantFormat.QDQ,
                per_channel=True, weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)


# The same CNN in the QOperator format (QLinearConv, QLinearSigmoid, QLinearMul, QLinearAdd, QLinearGlobalAveragePool,
# QGemm, QLinearSoftmax), with 7-bit weights (`reduce_range`: ONNX Runtime's x86 u8s8 kernels sum pairs of products
# in 16 bits, which full-range int8 weights overflow), and a copy whose second convolution's weight scales are 5%
# larger (a fault).
QOP = os.path.join(HERE, "convnet_qop.onnx")
quantize_static(SRC, QOP, Calibration(), quant_format=QuantFormat.QOperator, per_channel=True, reduce_range=True,
                weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

m = onnx.load(QOP)
for t in m.graph.initializer:
    if t.name == "c2.w_scale":
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(1.05), t.name))
onnx.save(m, os.path.join(HERE, "convnet_qop_fault.onnx"))
