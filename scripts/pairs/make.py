"""Pairs of graphs of one model for `phantom equiv` and `phantom onnx --target-model`: real exports (timm through
PyTorch's dynamo exporter and the legacy one, random seeded weights) and what graph tools write from them at their
defaults (onnxsim, onnxslim, ONNX Runtime's optimizer at each level, onnxconverter-common fp16, quantize_dynamic),
then transformations with a planted bug (a folded constant changed, two inputs swapped, a wrong axis). Writes
OUT_DIR/<source>.onnx, OUT_DIR/<source>__<tool>.onnx and OUT_DIR/pairs.tsv (source, transformed, tool, expected).

usage: python scripts/pairs/make.py OUT_DIR [ARCH...]     (run by scripts/pairs/make.sh, in the corpus venv)
"""
import os
import sys
import traceback

import numpy as np
import onnx
import torch
from onnx import numpy_helper

OUT = sys.argv[1]
ARCHS = sys.argv[2:] or ["test_efficientnet", "test_vit", "test_convnext", "mobilenetv4_hybrid_medium"]
ROWS = []


def export(arch):
    import timm
    torch.manual_seed(0)
    m = timm.create_model(arch, pretrained=False).eval()
    # timm zero-initialises the last norm of each residual block; random ones make every value informative.
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)) and mod.weight is not None:
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
    size = m.pretrained_cfg.get("input_size", (3, 224, 224))
    x = torch.randn(1, *size)
    path = os.path.join(OUT, f"{arch}.onnx")
    torch.onnx.export(m, (x,), path, dynamo=True, input_names=["input"], output_names=["logits"], external_data=False)
    return path


def sim(src, dst):
    import onnxsim
    m, ok = onnxsim.simplify(onnx.load(src))
    assert ok
    onnx.save(m, dst)


def slim(src, dst):
    import onnxslim
    onnxslim.slim(src, dst)


def ort_level(level):
    def run(src, dst):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        so.optimized_model_filepath = dst
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    return run


def fp16(src, dst):
    from onnxconverter_common import float16
    onnx.save(float16.convert_float_to_float16(onnx.load(src), keep_io_types=True), dst)


def qdyn(src, dst):
    from onnxruntime.quantization import quantize_dynamic
    quantize_dynamic(src, dst)


def planted_constant(src, dst):
    """A folded weight changed: every other element of the first Conv's weight in the simplified model scaled by
    1.02 (not the whole tensor, which a normalization after it would undo; not a block's, whose layer scale may
    hide it)."""
    m = onnx.load(src)
    inits = {i.name: i for i in m.graph.initializer}
    convs = [n for n in m.graph.node if n.op_type == "Conv" and n.input[1] in inits]
    n = convs[0]
    w0 = numpy_helper.to_array(inits[n.input[1]])
    flat = w0.astype(np.float32).ravel().copy()
    flat[::2] *= np.float32(1.02)
    w = flat.reshape(w0.shape)
    inits[n.input[1]].CopyFrom(numpy_helper.from_array(w, n.input[1]))
    onnx.save(m, dst)
    return n.name


def planted_swap(src, dst):
    """Two inputs swapped: two nodes that read computed values of one shape read each other's (a rewiring an
    optimizer pass can get wrong), the second value produced before the first node so the graph stays ordered."""
    m = onnx.shape_inference.infer_shapes(onnx.load(src))
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in m.graph.value_info}
    made = {o: k for k, n in enumerate(m.graph.node) for o in n.output}
    nodes = list(m.graph.node)
    for i, n1 in enumerate(nodes):
        for j in range(i + 1, len(nodes)):
            n2 = nodes[j]
            a, b = n1.input[0] if n1.input else "", n2.input[0] if n2.input else ""
            if a in made and b in made and a != b and made[b] < i and shapes.get(a) and shapes.get(a) == shapes.get(b) \
                    and n1.op_type not in ("Shape", "Constant") and n2.op_type not in ("Shape", "Constant"):
                n1.input[0], n2.input[0] = b, a
                onnx.save(m, dst)
                return n1.name
    raise RuntimeError("no two nodes whose inputs can be swapped")


def planted_axis(src, dst):
    """A wrong axis: a Softmax over the other of its last two axes, else a ReduceMean's axes moved."""
    m = onnx.load(src)
    for n in m.graph.node:
        if n.op_type == "Softmax":
            for a in n.attribute:
                if a.name == "axis":
                    a.i = -2 if a.i == -1 else -1
                    break
            else:
                n.attribute.append(onnx.helper.make_attribute("axis", -2))
            onnx.save(m, dst)
            return n.name
    raise RuntimeError("no Softmax")


def main():
    import onnxruntime as ort
    os.makedirs(OUT, exist_ok=True)
    tools = [("onnxsim", sim, "same"), ("onnxslim", slim, "same"),
             ("ort-basic", ort_level(ort.GraphOptimizationLevel.ORT_ENABLE_BASIC), "same"),
             ("ort-extended", ort_level(ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED), "same"),
             ("ort-all", ort_level(ort.GraphOptimizationLevel.ORT_ENABLE_ALL), "same"),
             ("fp16", fp16, "same")]
    planted = [("bug-constant", planted_constant), ("bug-swap", planted_swap), ("bug-axis", planted_axis)]
    for arch in ARCHS:
        try:
            src = export(arch)
        except Exception:
            traceback.print_exc(limit=2)
            continue
        for tag, make, expected in tools:
            dst = os.path.join(OUT, f"{arch}__{tag}.onnx")
            try:
                make(src, dst)
                ROWS.append((arch, os.path.basename(dst), tag, expected))
            except Exception as e:
                print("FAILED", arch, tag, type(e).__name__, str(e).splitlines()[0][:200], flush=True)
        simplified = os.path.join(OUT, f"{arch}__onnxsim.onnx")
        try:  # quantize_dynamic refuses the exporter's own output shapes here; it quantizes the simplified model
            qdyn(simplified, os.path.join(OUT, f"{arch}__quantize_dynamic.onnx"))
            ROWS.append((arch, f"{arch}__quantize_dynamic.onnx", "quantize_dynamic", "lossy"))
        except Exception as e:
            print("FAILED", arch, "quantize_dynamic", type(e).__name__, str(e).splitlines()[0][:200], flush=True)
        for tag, plant in planted:
            dst = os.path.join(OUT, f"{arch}__{tag}.onnx")
            try:
                node = plant(simplified, dst)
                ROWS.append((arch, os.path.basename(dst), tag, f"different:{node}"))
            except Exception as e:
                print("no", tag, "for", arch, type(e).__name__, str(e)[:200], flush=True)
    with open(os.path.join(OUT, "pairs.tsv"), "w") as f:
        for row in ROWS:
            f.write("\t".join(row) + "\n")
    print(len(ROWS), "pairs")


if __name__ == "__main__":
    main()
