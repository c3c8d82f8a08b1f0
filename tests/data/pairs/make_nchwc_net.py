"""Writes nchwc_net.onnx: a small convolutional network (PyTorch's TorchScript exporter, opset 17, seeded weights)
whose ONNX Runtime `ORT_ENABLE_ALL` optimization uses every NCHWc op: a first Conv on 3 channels (a plain input,
an OIHWBo filter), a depthwise Conv with HardSwish, channel counts that are not a multiple of the block (24, 20:
padded channels), a Conv with a fused residual Sum and Sigmoid, MaxPool, nearest Upsample, AveragePool and
GlobalAveragePool. tests/it/nchwc.rs optimizes it with ONNX Runtime on the machine that runs the test.

usage: python make_nchwc_net.py OUT.onnx      (torch 2.x)
"""
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        s.b1 = nn.BatchNorm2d(16)
        s.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        s.pw = nn.Conv2d(16, 24, 1)
        s.c3 = nn.Conv2d(24, 32, 3, padding=1)
        s.c4 = nn.Conv2d(32, 32, 3, padding=1)
        s.up = nn.Upsample(scale_factor=2, mode="nearest")
        s.c5 = nn.Conv2d(32, 20, 1)

    def forward(s, x):
        x = torch.relu(s.b1(s.c1(x)))
        x = nn.functional.hardswish(s.dw(x))
        x = s.pw(x)
        x = nn.functional.max_pool2d(torch.relu(s.c3(x)), 2)
        y = torch.sigmoid(s.c4(x) + x)
        y = nn.functional.avg_pool2d(s.up(y), 2)
        return s.c5(y).mean(dim=(2, 3)), nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)


m = Net().eval()
with torch.no_grad():
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 1.5)
torch.onnx.export(m, (torch.randn(1, 3, 32, 32),), sys.argv[1], input_names=["x"], output_names=["a", "b"],
                  dynamo=False, opset_version=17)
