"""Models written by the toolchains users run, at their defaults (run through make.sh, which makes the locked
environment). The float models they start from are small and made here with onnx.helper, seeded; what each
toolchain writes is its own.

- optimum_merged_decoder.onnx: optimum-onnx's `merge_decoders` (what optimum ships as `decoder_model_merged.onnx`)
  of a decoder and its with-past twin: one `If` on `use_cache_branch` whose branches write `logits` and
  `present.0.key`, the names the `If` writes too.
- qop_concat.onnx: ONNX Runtime's `quantize_static` in QOperator format (QLinearConv, QLinearConcat...) of a
  two-branch convnet joined by a Concat, calibrated on seeded random images.

usage: python make.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

RNG = np.random.default_rng(77)


def weight(name, *shape, scale=0.3):
    return nh.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def decoders(vocab=40, dim=16):
    """A decoder (input_ids -> logits, present.0.key) and its with-past twin, sharing weights, as optimum exports
    them before merging."""
    inits = [weight("embed_tokens.weight", vocab, dim), weight("k_proj.weight", dim, dim),
             weight("proj_out.weight", dim, vocab)]
    ids = h.make_tensor_value_info("input_ids", T.INT64, ["batch_size", "decoder_sequence_length"])
    logits = h.make_tensor_value_info("logits", T.FLOAT, ["batch_size", "decoder_sequence_length", vocab])
    present = h.make_tensor_value_info("present.0.key", T.FLOAT, ["batch_size", "present_sequence_length", dim])
    first = h.make_graph([
        h.make_node("Gather", ["embed_tokens.weight", "input_ids"], ["/embed/Gather_output_0"], name="/embed/Gather"),
        h.make_node("MatMul", ["/embed/Gather_output_0", "k_proj.weight"], ["present.0.key"], name="/k_proj/MatMul"),
        h.make_node("MatMul", ["/embed/Gather_output_0", "proj_out.weight"], ["logits"], name="/proj_out/MatMul"),
    ], "decoder", [ids], [logits, present], inits)
    past = h.make_tensor_value_info("past_key_values.0.key", T.FLOAT, ["batch_size", "past_sequence_length", dim])
    with_past = h.make_graph([
        h.make_node("Gather", ["embed_tokens.weight", "input_ids"], ["/embed/Gather_output_0"], name="/embed/Gather"),
        h.make_node("MatMul", ["/embed/Gather_output_0", "k_proj.weight"], ["/k_proj/MatMul_output_0"],
                    name="/k_proj/MatMul"),
        h.make_node("Concat", ["past_key_values.0.key", "/k_proj/MatMul_output_0"], ["present.0.key"], axis=1,
                    name="/Concat"),
        h.make_node("ReduceMean", ["present.0.key"], ["/ReduceMean_output_0"], axes=[1], keepdims=1,
                    name="/ReduceMean"),
        h.make_node("Add", ["/embed/Gather_output_0", "/ReduceMean_output_0"], ["/Add_output_0"], name="/Add"),
        h.make_node("MatMul", ["/Add_output_0", "proj_out.weight"], ["logits"], name="/proj_out/MatMul"),
    ], "decoder_with_past", [ids, past], [logits, present], inits)
    opsets = [h.make_opsetid("", 14)]
    return (h.make_model(first, opset_imports=opsets, ir_version=8),
            h.make_model(with_past, opset_imports=opsets, ir_version=8))


def optimum_merged(out):
    from optimum.onnx.graph_transformations import merge_decoders
    decoder, with_past = decoders()
    # As optimum's exporter calls it: the merged model is checked and saved by optimum itself.
    merge_decoders(decoder, with_past, save_path=os.path.join(out, "optimum_merged_decoder.onnx"))


def convnet():
    """Two convolution branches joined by a Concat, then a convolution and a pooled classifier (float32)."""
    x = h.make_tensor_value_info("images", T.FLOAT, [1, 3, 16, 16])
    y = h.make_tensor_value_info("logits", T.FLOAT, [1, 10])
    inits = [weight("a.w", 8, 3, 3, 3), weight("a.b", 8), weight("b.w", 8, 3, 1, 1), weight("b.b", 8),
             weight("c.w", 8, 16, 3, 3, scale=0.1), weight("c.b", 8), weight("fc.w", 8, 10), weight("fc.b", 10)]
    nodes = [
        h.make_node("Conv", ["images", "a.w", "a.b"], ["a"], pads=[1, 1, 1, 1], name="/a/Conv"),
        h.make_node("Relu", ["a"], ["a_relu"], name="/a/Relu"),
        h.make_node("Conv", ["images", "b.w", "b.b"], ["b"], name="/b/Conv"),
        h.make_node("Relu", ["b"], ["b_relu"], name="/b/Relu"),
        h.make_node("Concat", ["a_relu", "b_relu"], ["cat"], axis=1, name="/Concat"),
        h.make_node("Conv", ["cat", "c.w", "c.b"], ["c"], pads=[1, 1, 1, 1], name="/c/Conv"),
        h.make_node("Relu", ["c"], ["c_relu"], name="/c/Relu"),
        h.make_node("GlobalAveragePool", ["c_relu"], ["pool"], name="/pool"),
        h.make_node("Flatten", ["pool"], ["flat"], name="/Flatten"),
        h.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="/fc/Gemm"),
    ]
    return h.make_model(h.make_graph(nodes, "convnet", [x], [y], inits), opset_imports=[h.make_opsetid("", 13)],
                        ir_version=8)


def qop_concat(out, tmp):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Images(CalibrationDataReader):
        def __init__(self):
            self.left = [{"images": RNG.random((1, 3, 16, 16), dtype=np.float32)} for _ in range(8)]

        def get_next(self):
            return self.left.pop() if self.left else None

    src = os.path.join(tmp, "convnet_float.onnx")
    onnx.save(convnet(), src)
    quantize_static(src, os.path.join(out, "qop_concat.onnx"), Images(), quant_format=QuantFormat.QOperator)


def main():
    out = sys.argv[1]
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        optimum_merged(out)
        qop_concat(out, tmp)
    for name in ("optimum_merged_decoder.onnx", "qop_concat.onnx"):
        m = onnx.load(os.path.join(out, name))
        onnx.checker.check_model(m)
        print(name, sorted({n.op_type for n in m.graph.node}))


if __name__ == "__main__":
    main()
