"""Models written by onnxruntime-extensions' own pre/post-processing tools, at their defaults (run through make.sh,
which makes the environment from tests/locks/extensions.txt). The float model they wrap is small and made here with
onnx.helper, seeded; what the tool writes around it is its own.

- ext_mobilenet_ppp.onnx: `add_pre_post_processing_to_model.mobilenet` (ModelSource.PYTORCH) around a 224×224
  classifier: the input is an encoded image (`image`, uint8 bytes) that `DecodeImage` (com.microsoft.extensions, a
  custom op) decodes, then resize, crop, normalisation and, after the model, a Softmax.
- ext_bert_tokenizer_classifier.onnx: the `BertTokenizer` node (ai.onnx.contrib) the package's `SingleOpGraph`
  builds from a WordPiece vocabulary at its defaults, feeding a mean-pooled embedding and a linear layer: the input
  is text (a string tensor).

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


WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "model", "runs", "on", "cpu", "gpu", "and",
         "numbers", "differ", "by", "one", "level", "##s", "##ing", "fp", "##16", "quant", "##ized"]


def bert_tokenizer_classifier(out, tmp):
    from onnxruntime_extensions import SingleOpGraph
    vocab = Path(tmp) / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    tok = SingleOpGraph.build_graph("BertTokenizer", vocab_file=str(vocab))
    axis = lambda name, v: nh.from_array(np.array([v], np.int64), name)
    nodes = [
        tok.node[0],
        h.make_node("Gather", ["emb", "input_ids"], ["e"], name="/embed/Gather"),
        h.make_node("Cast", ["attention_mask"], ["m"], to=T.FLOAT, name="/mask/Cast"),
        h.make_node("Unsqueeze", ["m", "ax1"], ["m1"], name="/mask/Unsqueeze"),
        h.make_node("Mul", ["e", "m1"], ["em"], name="/pool/Mul"),
        h.make_node("ReduceSum", ["em", "ax0"], ["s"], keepdims=0, name="/pool/Sum"),
        h.make_node("ReduceSum", ["m", "ax0"], ["n"], keepdims=0, name="/pool/Count"),
        h.make_node("Div", ["s", "n"], ["pooled"], name="/pool/Div"),
        h.make_node("Unsqueeze", ["pooled", "ax0"], ["p2"], name="/fc/Unsqueeze"),
        h.make_node("Gemm", ["p2", "fc.w", "fc.b"], ["logits"], name="/fc/Gemm"),
        h.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="/Softmax"),
    ]
    inits = [weight("emb", len(WORDS), 8, scale=0.5), weight("fc.w", 8, 4, scale=0.5), weight("fc.b", 4),
             axis("ax1", 1), axis("ax0", 0)]
    graph = h.make_graph(nodes, "bert_tokenizer_classifier", list(tok.input),
                         [h.make_tensor_value_info("probs", T.FLOAT, [1, 4])], inits)
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.onnx.contrib", 1)],
                     ir_version=8)
    onnx.save(m, Path(out) / "ext_bert_tokenizer_classifier.onnx")


def main():
    out = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        mobilenet_ppp(out, tmp)
        bert_tokenizer_classifier(out, tmp)
    for name in ["ext_mobilenet_ppp.onnx", "ext_bert_tokenizer_classifier.onnx"]:
        m = onnx.load(os.path.join(out, name))
        onnx.checker.check_model(m)
        print(name, sorted({(n.domain, n.op_type) for n in m.graph.node}))


if __name__ == "__main__":
    main()
