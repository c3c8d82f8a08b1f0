#!/usr/bin/env python3
"""Build benchmark ONNX models of two standard architectures with random weights.

Writes, into OUT_DIR:

* ``resnet18.onnx``  - torchvision ResNet-18 laid out the way ``torch.onnx.export``
  emits it in eval mode at opset 17 (Conv / un-folded BatchNormalization / Relu /
  MaxPool, BasicBlocks with 1x1 downsample, GlobalAveragePool, Flatten, Gemm).
* ``vit_tiny.onnx``  - ViT-Ti/16 (timm ``vit_tiny_patch16_224``): patch-embedding
  Conv, class token, position embedding, 12 pre-norm encoder blocks with
  LayerNormalization, multi-head attention (3 heads x 64) and an Erf-based GELU
  MLP, final LayerNorm, class-token Gather and a linear head.
* ``convnext_tiny.onnx`` - torchvision ConvNeXt-T: 4x4 patchify stem, stages of
  (3, 3, 9, 3) blocks of widths (96, 192, 384, 768) - depthwise 7x7 Conv,
  channels-last LayerNormalization between Transposes, an inverted MLP (4x)
  with Erf GELU, layer scale and the residual Add - with LayerNorm + 2x2 Conv
  downsampling, global average pool, LayerNorm and a linear head.

Both take ``input`` float32 [1,3,224,224] and produce ``output`` [1,1000].

These are benchmark models: timing does not depend on the weights' values, so
instead of shipping pretrained checkpoints (and needing torch) the weights are
drawn deterministically from ``numpy.random.default_rng(0)`` with He/Xavier
scaling so activations stay O(1) and numerical comparisons remain meaningful.

Usage: python3 benches/make_bench_models.py OUT_DIR
Requires only numpy, onnx and onnxruntime.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # the IR version that goes with opset 17


class Graph:
    """Tiny graph builder: unique node/tensor names, weights as initializers."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inits = [], []
        self.count = {}

    def _name(self, prefix):
        n = self.count.get(prefix, 0)
        self.count[prefix] = n + 1
        return f"{prefix}_{n}"

    def const(self, prefix, array):
        name = self._name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, n_out=1, **attrs):
        name = self._name(op_type)
        outs = [f"{name}_out{i}" if n_out > 1 else f"{name}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs if n_out > 1 else outs[0]

    # ---- random parameters -------------------------------------------------
    def normal(self, prefix, shape, std):
        return self.const(prefix, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def uniform(self, prefix, shape, lo, hi):
        return self.const(prefix, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def model(self, name, x_name, y_name, out_shape):
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(x_name, TensorProto.FLOAT, [1, 3, 224, 224])],
            [helper.make_tensor_value_info(y_name, TensorProto.FLOAT, out_shape)],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="make_bench_models.py")
        m.ir_version = IR_VERSION
        return m


# ---------------------------------------------------------------- ResNet-18 --
# Scale of the last BN's gamma in each residual branch.  With He init every
# branch roughly preserves the second moment, so identity + branch would double
# the variance per block (std ~90 after 8 blocks); trained ResNets have small
# gammas there (cf. torchvision's zero_init_residual), which keeps activations O(1).
RESIDUAL_GAMMA_SCALE = 0.3


def conv_bn(g, x, cin, cout, k, stride, pad, relu=True, gamma_scale=1.0):
    w = g.normal("conv.weight", (cout, cin, k, k), np.sqrt(2.0 / (cin * k * k)))  # He
    y = g.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride],
             pads=[pad] * 4, dilations=[1, 1], group=1)
    gamma = g.const("bn.weight", (gamma_scale * g.rng.uniform(0.5, 1.5, cout)).astype("f4"))
    beta = g.normal("bn.bias", (cout,), 0.1)
    mean = g.normal("bn.running_mean", (cout,), 0.1)
    var = g.uniform("bn.running_var", (cout,), 0.5, 1.5)
    y = g.op("BatchNormalization", [y, gamma, beta, mean, var], epsilon=1e-5, momentum=0.9)
    return g.op("Relu", [y]) if relu else y


def basic_block(g, x, cin, cout, stride):
    y = conv_bn(g, x, cin, cout, 3, stride, 1)
    y = conv_bn(g, y, cout, cout, 3, 1, 1, relu=False, gamma_scale=RESIDUAL_GAMMA_SCALE)
    if stride != 1 or cin != cout:
        x = conv_bn(g, x, cin, cout, 1, stride, 0, relu=False)  # downsample
    return g.op("Relu", [g.op("Add", [y, x])])


def build_resnet18(rng):
    g = Graph(rng)
    x = conv_bn(g, "input", 3, 64, 7, 2, 3)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
             ceil_mode=0, dilations=[1, 1])
    cin = 64
    for stage, cout in enumerate([64, 128, 256, 512]):
        for block in range(2):
            stride = 2 if (stage > 0 and block == 0) else 1
            x = basic_block(g, x, cin, cout, stride)
            cin = cout
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    w = g.normal("fc.weight", (1000, 512), np.sqrt(2.0 / (512 + 1000)))  # Xavier
    b = g.normal("fc.bias", (1000,), 0.01)
    g.nodes.append(helper.make_node("Gemm", [x, w, b], ["output"], name="Gemm_fc",
                                    alpha=1.0, beta=1.0, transB=1))
    return g.model("resnet18", "input", "output", [1, 1000])


# ------------------------------------------------------------------ ViT-Ti/16 --
D, HEADS, HEAD_DIM, MLP, DEPTH, TOKENS = 192, 3, 64, 768, 12, 197


def linear(g, x, fin, fout, prefix):
    w = g.normal(prefix + ".weight", (fin, fout), np.sqrt(2.0 / (fin + fout)))  # Xavier
    b = g.normal(prefix + ".bias", (fout,), 0.01)
    return g.op("Add", [g.op("MatMul", [x, w]), b])


def layer_norm(g, x, prefix):
    gamma = g.uniform(prefix + ".weight", (D,), 0.8, 1.2)
    beta = g.normal(prefix + ".bias", (D,), 0.02)
    return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-6)


def i64(g, prefix, values):
    return g.const(prefix, np.array(values, dtype=np.int64))


def f32(g, prefix, value):
    return g.const(prefix, np.array(value, dtype=np.float32))


def attention(g, x, i):
    p = f"blocks.{i}.attn"
    qkv = linear(g, x, D, 3 * D, p + ".qkv")
    qkv = g.op("Reshape", [qkv, i64(g, "shape", [1, TOKENS, 3, HEADS, HEAD_DIM])])
    qkv = g.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])  # [3,1,H,197,64]
    q, k, v = (g.op("Gather", [qkv, i64(g, "idx", j)], axis=0) for j in range(3))
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    att = g.op("Mul", [g.op("MatMul", [q, kt]), f32(g, "scale", HEAD_DIM ** -0.5)])
    att = g.op("Softmax", [att], axis=-1)
    y = g.op("Transpose", [g.op("MatMul", [att, v])], perm=[0, 2, 1, 3])  # [1,197,H,64]
    y = g.op("Reshape", [y, i64(g, "shape", [1, TOKENS, D])])
    return linear(g, y, D, D, p + ".proj")


def gelu(g, x):
    """Erf GELU as torch exports it: Div, Erf, Add, Mul, Mul."""
    e = g.op("Erf", [g.op("Div", [x, f32(g, "sqrt2", np.sqrt(2.0))])])
    y = g.op("Mul", [x, g.op("Add", [e, f32(g, "one", 1.0)])])
    return g.op("Mul", [y, f32(g, "half", 0.5)])


def encoder_block(g, x, i):
    x = g.op("Add", [x, attention(g, layer_norm(g, x, f"blocks.{i}.norm1"), i)])
    h = linear(g, layer_norm(g, x, f"blocks.{i}.norm2"), D, MLP, f"blocks.{i}.mlp.fc1")
    h = linear(g, gelu(g, h), MLP, D, f"blocks.{i}.mlp.fc2")
    return g.op("Add", [x, h])


def build_vit_tiny(rng):
    g = Graph(rng)
    w = g.normal("patch_embed.proj.weight", (D, 3, 16, 16), np.sqrt(2.0 / (3 * 16 * 16)))
    b = g.normal("patch_embed.proj.bias", (D,), 0.01)
    x = g.op("Conv", ["input", w, b], kernel_shape=[16, 16], strides=[16, 16],
             pads=[0, 0, 0, 0], dilations=[1, 1], group=1)  # [1,192,14,14]
    x = g.op("Reshape", [x, i64(g, "shape", [1, D, TOKENS - 1])])
    x = g.op("Transpose", [x], perm=[0, 2, 1])  # [1,196,192]
    x = g.op("Concat", [g.normal("cls_token", (1, 1, D), 1.0), x], axis=1)
    x = g.op("Add", [x, g.normal("pos_embed", (1, TOKENS, D), 0.5)])
    for i in range(DEPTH):
        x = encoder_block(g, x, i)
    x = layer_norm(g, x, "norm")
    x = g.op("Gather", [x, i64(g, "idx", 0)], axis=1)  # class token -> [1,192]
    w = g.normal("head.weight", (1000, D), np.sqrt(2.0 / (D + 1000)))
    b = g.normal("head.bias", (1000,), 0.01)
    g.nodes.append(helper.make_node("Gemm", [x, w, b], ["output"], name="Gemm_head",
                                    alpha=1.0, beta=1.0, transB=1))
    return g.model("vit_tiny", "input", "output", [1, 1000])


# --------------------------------------------------------------- ConvNeXt-T --
def channels_last_norm(g, x, dim, prefix, eps=1e-6):
    """torchvision's LayerNorm2d as torch exports it: Transpose, LayerNormalization, Transpose."""
    x = g.op("Transpose", [x], perm=[0, 2, 3, 1])
    gamma = g.uniform(prefix + ".weight", (dim,), 0.8, 1.2)
    beta = g.normal(prefix + ".bias", (dim,), 0.02)
    x = g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)
    return g.op("Transpose", [x], perm=[0, 3, 1, 2])


def cn_block(g, x, dim, prefix):
    w = g.normal(prefix + ".dwconv.weight", (dim, 1, 7, 7), np.sqrt(2.0 / 49))
    b = g.normal(prefix + ".dwconv.bias", (dim,), 0.01)
    y = g.op("Conv", [x, w, b], kernel_shape=[7, 7], strides=[1, 1], pads=[3] * 4, dilations=[1, 1],
             group=dim)
    y = g.op("Transpose", [y], perm=[0, 2, 3, 1])
    gamma = g.uniform(prefix + ".norm.weight", (dim,), 0.8, 1.2)
    beta = g.normal(prefix + ".norm.bias", (dim,), 0.02)
    y = g.op("LayerNormalization", [y, gamma, beta], axis=-1, epsilon=1e-6)
    y = linear(g, y, dim, 4 * dim, prefix + ".pwconv1")
    y = linear(g, gelu(g, y), 4 * dim, dim, prefix + ".pwconv2")
    y = g.op("Transpose", [y], perm=[0, 3, 1, 2])
    y = g.op("Mul", [g.uniform(prefix + ".layer_scale", (dim, 1, 1), 0.05, 0.15), y])
    return g.op("Add", [y, x])


def build_convnext_tiny(rng):
    g = Graph(rng)
    dims, depths = [96, 192, 384, 768], [3, 3, 9, 3]
    w = g.normal("stem.weight", (96, 3, 4, 4), np.sqrt(2.0 / 48))
    b = g.normal("stem.bias", (96,), 0.01)
    x = g.op("Conv", ["input", w, b], kernel_shape=[4, 4], strides=[4, 4], pads=[0] * 4, dilations=[1, 1],
             group=1)
    x = channels_last_norm(g, x, 96, "stem.norm")
    for s, (dim, depth) in enumerate(zip(dims, depths)):
        if s > 0:
            x = channels_last_norm(g, x, dims[s - 1], f"downsample{s}.norm")
            w = g.normal(f"downsample{s}.weight", (dim, dims[s - 1], 2, 2), np.sqrt(2.0 / (4 * dims[s - 1])))
            b = g.normal(f"downsample{s}.bias", (dim,), 0.01)
            x = g.op("Conv", [x, w, b], kernel_shape=[2, 2], strides=[2, 2], pads=[0] * 4, dilations=[1, 1],
                     group=1)
        for i in range(depth):
            x = cn_block(g, x, dim, f"stages.{s}.{i}")
    x = channels_last_norm(g, g.op("GlobalAveragePool", [x]), 768, "head.norm")
    x = g.op("Flatten", [x], axis=1)
    w = g.normal("head.weight", (1000, 768), np.sqrt(2.0 / (768 + 1000)))
    b = g.normal("head.bias", (1000,), 0.01)
    g.nodes.append(helper.make_node("Gemm", [x, w, b], ["output"], name="Gemm_head",
                                    alpha=1.0, beta=1.0, transB=1))
    return g.model("convnext_tiny", "input", "output", [1, 1000])


# -------------------------------------------------------------------- checks --
def check_and_run(model, path):
    import onnxruntime as ort

    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    out_shape = [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]
    assert out_shape == [1, 1000], out_shape
    names = [n.name for n in model.graph.node]
    assert len(set(names)) == len(names) and all(names), "node names must be unique"

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    (y,) = sess.run(["output"], {"input": x})
    assert y.shape == (1, 1000), y.shape
    assert np.isfinite(y).all(), "non-finite output"
    std = float(y.std())
    assert 0.01 <= std <= 100, f"output std {std} out of range"

    ops = {}
    for n in model.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"{os.path.basename(path)}: {len(names)} nodes, {params:,} parameters, "
          f"{os.path.getsize(path):,} bytes")
    print("  ops: " + ", ".join(f"{k}={v}" for k, v in sorted(ops.items())))
    print(f"  output {list(y.shape)}: mean={y.mean():.4f} std={std:.4f} "
          f"min={y.min():.4f} max={y.max():.4f}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 benches/make_bench_models.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    for fname, build in [("resnet18.onnx", build_resnet18), ("vit_tiny.onnx", build_vit_tiny),
                         ("convnext_tiny.onnx", build_convnext_tiny)]:
        model = build(rng)
        path = os.path.join(out_dir, fname)
        onnx.save(model, path)
        check_and_run(model, path)


if __name__ == "__main__":
    main()
