"""Builds split_ops.onnx: one node of each op family that phantom cuts into slabs when a value exceeds the
adapter's storage-binding limit (tests lower it to 64 KiB with PHANTOM_WGPU_MAX_BINDING). Every value below is
at least 128 KiB, each node reads the model inputs directly, and a Softmax over one 32k row (no axis to cut)
shows the host fallback.

    python3 tests/data/wgpu/make_models.py
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def main():
    inits = {
        "w": f32(16, 32, 3, 3) * 0.1,
        "b": f32(16),
        "w1": f32(8, 8, 5) * 0.1,
        "scale": f32(32),
        "bias": f32(32),
        "mean": f32(32) * 0.1,
        "var": np.abs(f32(32)) + 0.5,
        "mb": f32(128, 96) * 0.1,
        "wide": f32(128, 512) * 0.1,
        "gb": f32(96, 128) * 0.1,
        "gc": f32(96),
        "red_axes": np.array([1], np.int64),
        "idx": np.array([0, 5, 7], np.int64),
        "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
        "cond": rng.random((1, 32, 32, 32)) > 0.5,
        "zero": np.array(0.0, np.float32),
        "eshape": np.array([1, 32, 32, 32], np.int64),
        "roi": np.array([], np.float32),
        "scales": np.array([1, 1, 2, 2], np.float32),
        "split": np.array([16, 16], np.int64),
        "wt": f32(32, 8, 3, 3) * 0.1,
        "bt": f32(8),
        "starts": np.array([1], np.int64),
        "ends": np.array([31], np.int64),
        "sl_axes": np.array([2], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w", "b"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
        n("Conv", ["x", "w"], ["conv_s2"], name="conv_s2", strides=[2, 2], pads=[0, 1, 1, 0]),
        n("Conv", ["x", "w", "b"], ["conv_same"], name="conv_same", auto_pad="SAME_UPPER", strides=[2, 2]),
        n("Conv", ["x1", "w1"], ["conv1d"], name="conv1d", dilations=[2], pads=[4, 4]),
        n("MaxPool", ["x"], ["maxpool"], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("AveragePool", ["x"], ["avgpool"], name="avgpool", kernel_shape=[2, 2], strides=[2, 2],
          pads=[0, 0, 1, 1], ceil_mode=1, count_include_pad=1),
        n("GlobalAveragePool", ["x"], ["gap"], name="gap"),
        n("InstanceNormalization", ["x", "scale", "bias"], ["inorm"], name="inorm"),
        n("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bnorm"], name="bnorm"),
        n("MatMul", ["a4", "mb"], ["mm_batch"], name="mm_batch"),
        n("MatMul", ["a2", "wide"], ["mm_cols"], name="mm_cols"),
        n("Gemm", ["g", "gb", "gc"], ["gemm"], name="gemm", transB=1),
        n("Softmax", ["x"], ["softmax"], name="softmax", axis=-1),
        n("LogSoftmax", ["x"], ["logsoftmax"], name="logsoftmax", axis=1),
        n("LayerNormalization", ["x", "scale", "bias"], ["lnorm"], name="lnorm", axis=-1),
        n("ReduceMean", ["x"], ["rmean"], name="rmean", axes=[2, 3], keepdims=1),
        n("ReduceSum", ["x", "red_axes"], ["rsum"], name="rsum", keepdims=0),
        n("Transpose", ["x"], ["transpose"], name="transpose", perm=[0, 2, 3, 1]),
        n("Concat", ["x", "x"], ["concat"], name="concat", axis=1),
        n("Split", ["x", "split"], ["split_a", "split_b"], name="split", axis=1),
        n("Gather", ["x", "idx"], ["gather"], name="gather", axis=1),
        n("Pad", ["x", "pads"], ["pad"], name="pad", mode="reflect"),
        n("Where", ["cond", "x", "zero"], ["where"], name="where"),
        n("Expand", ["xe", "eshape"], ["expand"], name="expand"),
        n("Resize", ["x", "roi", "scales"], ["resize"], name="resize", mode="linear"),
        n("Slice", ["x", "starts", "ends", "sl_axes"], ["slice"], name="slice"),
        n("ConvTranspose", ["x", "wt", "bt"], ["convt"], name="convt", strides=[2, 2], pads=[1, 1, 1, 1],
          output_padding=[1, 1]),
        n("ConvTranspose", ["x1", "w1"], ["convt1d"], name="convt1d", strides=[3], pads=[2, 1]),
        n("Softmax", ["row"], ["softmax_row"], name="softmax_row", axis=-1),
        n("Add", ["ba", "bb"], ["bcast_add"], name="bcast_add"),
    ]
    vi = helper.make_tensor_value_info
    inputs = [
        vi("x", TensorProto.FLOAT, [1, 32, 32, 32]),
        vi("x1", TensorProto.FLOAT, [1, 8, 4096]),
        vi("a4", TensorProto.FLOAT, [2, 4, 64, 128]),
        vi("a2", TensorProto.FLOAT, [64, 128]),
        vi("g", TensorProto.FLOAT, [256, 128]),
        vi("xe", TensorProto.FLOAT, [1, 32, 1, 32]),
        vi("row", TensorProto.FLOAT, [1, 32768]),
        vi("ba", TensorProto.FLOAT, [64, 1, 512]),
        vi("bb", TensorProto.FLOAT, [1, 4, 512]),
    ]
    graph = helper.make_graph(
        nodes,
        "split_ops",
        inputs,
        [],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    del model.graph.output[:]
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    model.graph.output.extend(inferred[o] for node in nodes for o in node.output)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(HERE, "split_ops.onnx"))


if __name__ == "__main__":
    main()
