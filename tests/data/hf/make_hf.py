"""Imitations of what Hugging Face's exporters (optimum) write for CLIP-style towers, made with onnx.helper, seeded:
the input names and symbolic dims optimum gives (`pixel_values` [batch_size, num_channels, height, width],
`input_ids` [batch_size, sequence_length]), a patch-embedding convolution whose kernel is its stride, a class token
and a position table of one row per patch, a text position table of 77 rows read through a sliced `position_ids`
buffer, and a convnet with the `preprocessor_config.json` an export puts beside it. optimum itself needs PyTorch to
export; these stand in for its output where PyTorch cannot be installed.

usage: python make_hf.py OUT_DIR
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

RNG = np.random.default_rng(77)


def w(name, *shape, scale=0.05):
    return nh.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def ints(name, values):
    return nh.from_array(np.array(values, np.int64), name)


def save(model, path):
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def vision(dim=32, patch=16, side=224):
    n = (side // patch) ** 2
    x = h.make_tensor_value_info("pixel_values", T.FLOAT, ["batch_size", "num_channels", "height", "width"])
    y = h.make_tensor_value_info("pooler_output", T.FLOAT, ["batch_size", dim])
    inits = [w("vision_model.embeddings.patch_embedding.weight", dim, 3, patch, patch),
             w("vision_model.embeddings.class_embedding", 1, 1, dim),
             w("vision_model.embeddings.position_embedding.weight", 1, n + 1, dim),
             ints("flat_shape", [0, dim, -1]), ints("zero", [0]), ints("one", [1]), ints("cls_dims", [1, dim])]
    nodes = [
        h.make_node("Conv", ["pixel_values", "vision_model.embeddings.patch_embedding.weight"], ["patches"],
                    kernel_shape=[patch, patch], strides=[patch, patch], name="/embeddings/patch_embedding/Conv"),
        h.make_node("Reshape", ["patches", "flat_shape"], ["flat"], name="/embeddings/Reshape"),
        h.make_node("Transpose", ["flat"], ["tokens"], perm=[0, 2, 1], name="/embeddings/Transpose"),
        h.make_node("Shape", ["pixel_values"], ["shape"], name="/embeddings/Shape"),
        h.make_node("Slice", ["shape", "zero", "one"], ["batch"], name="/embeddings/Slice"),
        h.make_node("Concat", ["batch", "cls_dims"], ["cls_shape"], axis=0, name="/embeddings/Concat"),
        h.make_node("Expand", ["vision_model.embeddings.class_embedding", "cls_shape"], ["cls"],
                    name="/embeddings/Expand"),
        h.make_node("Concat", ["cls", "tokens"], ["embedded"], axis=1, name="/embeddings/Concat_1"),
        h.make_node("Add", ["embedded", "vision_model.embeddings.position_embedding.weight"], ["positioned"],
                    name="/embeddings/Add"),
        h.make_node("ReduceMean", ["positioned"], ["pooler_output"], axes=[1], keepdims=0, name="/pooler/ReduceMean"),
    ]
    g = h.make_graph(nodes, "clip_vision", [x], [y], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def text(dim=32, vocab=1000, rows=77):
    x = h.make_tensor_value_info("input_ids", T.INT64, ["batch_size", "sequence_length"])
    y = h.make_tensor_value_info("text_embeds", T.FLOAT, ["batch_size", dim])
    inits = [w("text_model.embeddings.token_embedding.weight", vocab, dim),
             w("text_model.embeddings.position_embedding.weight", rows, dim),
             nh.from_array(np.arange(rows, dtype=np.int64)[None], "text_model.embeddings.position_ids"),
             ints("zero", [0]), ints("one", [1])]
    nodes = [
        h.make_node("Shape", ["input_ids"], ["shape"], name="/embeddings/Shape"),
        h.make_node("Slice", ["shape", "one", "two"], ["length"], name="/embeddings/Slice"),
        h.make_node("Slice", ["text_model.embeddings.position_ids", "zero", "length", "one"], ["position_ids"],
                    name="/embeddings/Slice_1"),
        h.make_node("Gather", ["text_model.embeddings.token_embedding.weight", "input_ids"], ["tokens"],
                    name="/embeddings/token_embedding/Gather"),
        h.make_node("Gather", ["text_model.embeddings.position_embedding.weight", "position_ids"], ["positions"],
                    name="/embeddings/position_embedding/Gather"),
        h.make_node("Add", ["tokens", "positions"], ["embedded"], name="/embeddings/Add"),
        h.make_node("ReduceMean", ["embedded"], ["text_embeds"], axes=[1], keepdims=0, name="/pooler/ReduceMean"),
    ]
    inits.append(ints("two", [2]))
    g = h.make_graph(nodes, "clip_text", [x], [y], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def convnet(dim=16):
    """A classifier whose global pooling takes any size: only the preprocessor config says 256x256."""
    x = h.make_tensor_value_info("pixel_values", T.FLOAT, ["batch_size", "num_channels", "height", "width"])
    y = h.make_tensor_value_info("logits", T.FLOAT, ["batch_size", 10])
    inits = [w("conv.weight", dim, 3, 3, 3, scale=0.2), w("fc.weight", 10, dim, scale=0.2), ints("flat", [0, -1])]
    nodes = [
        h.make_node("Conv", ["pixel_values", "conv.weight"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2], name="/conv"),
        h.make_node("Relu", ["c"], ["r"], name="/relu"),
        h.make_node("GlobalAveragePool", ["r"], ["p"], name="/pool"),
        h.make_node("Reshape", ["p", "flat"], ["f"], name="/flatten"),
        h.make_node("Gemm", ["f", "fc.weight"], ["logits"], transB=1, name="/fc"),
    ]
    g = h.make_graph(nodes, "convnet", [x], [y], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def main():
    out = sys.argv[1]
    for d in ("clip_vision", "clip_text", "convnet_preprocessor"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    save(vision(), os.path.join(out, "clip_vision", "model.onnx"))
    save(text(), os.path.join(out, "clip_text", "model.onnx"))
    save(convnet(), os.path.join(out, "convnet_preprocessor", "model.onnx"))
    config = {"crop_size": {"height": 256, "width": 256}, "do_center_crop": True, "size": {"shortest_edge": 288},
              "image_processor_type": "ConvNextImageProcessor"}
    with open(os.path.join(out, "convnet_preprocessor", "preprocessor_config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main()
