#!/usr/bin/env python3
"""Export torchvision's Swin-T (random weights, seed 0) to ONNX: the >= 5,000-node transformer of the benchmark.

``torch.onnx.export`` (the TorchScript exporter, opset 17) writes 6,261 nodes for it: shifted windows as Slice and
Concat of computed shapes, relative position bias Gathers, attention masks, LayerNorm, GELU (Erf) and patch merging.
Weights are drawn by ``torch.manual_seed(0)``; timing does not depend on their values.

usage: python3 benches/export_swin_t.py OUT_DIR
needs: pip install torch torchvision onnx   (PyPI's CUDA wheel runs on the CPU too; about 4 GB with its libraries)
"""
import os
import sys

import onnx
import torch
import torchvision


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = torchvision.models.swin_t(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    path = os.path.join(out, "swin_t.onnx")
    torch.onnx.export(model, (x,), path, opset_version=17, dynamo=False, input_names=["input"], output_names=["output"])
    print(f"{path}: {len(onnx.load(path).graph.node)} nodes")


if __name__ == "__main__":
    main()
