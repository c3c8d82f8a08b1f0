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
