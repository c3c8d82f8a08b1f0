"""Planted faults for the precision zoo (scripts/zoo/make.py): copies of a model with one thing wrong in one layer,
near the middle of the graph, as a buggy converter or kernel would leave it.

- `weight`: a weight scaled by 1.02 (a float initializer, the scale of a weight's DequantizeLinear, or a QLinear*
  node's weight scale);
- `bias`: a bias shifted by 2% of the RMS of its node's output, as the weight fault moves it (at least one level
  where the bias is an int32 initializer);
- `scale` and `zero_point` (quantized models): an activation's DequantizeLinear scale ×1.05 or zero point ±1, or a
  QLinear* node's output scale ×1.05 or zero point ±1.

Each fault goes to the place nearest the middle of the graph where it changes the outputs (ONNX Runtime, optimizations
off, seeded inputs). plant(OUT_DIR, model) writes OUT_DIR/<model>__fault_<kind>.onnx and returns rows (source, faulty copy, kind, the
nodes and values a verdict may name first, comma-separated).
"""
import os

import numpy as np
import onnx
from onnx import numpy_helper

QLINEAR_WEIGHT = {"QLinearConv": (4, 8), "QLinearMatMul": (4, None)}  # input index of the weight scale, the bias
QLINEAR_OUT = {"QLinearConv": (6, 7), "QLinearMatMul": (6, 7), "QLinearAdd": (6, 7)}  # y_scale, y_zero_point


class Graph:
    def __init__(self, model):
        self.model = model
        self.g = model.graph
        self.inits = {i.name: i for i in self.g.initializer}
        self.producer = {o: n for n in self.g.node for o in n.output}
        self.consumers = {}
        for n in self.g.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)

    def const(self, name):
        return numpy_helper.to_array(self.inits[name]) if name in self.inits else None

    def replace_input(self, node, k, array, tag):
        """Gives node input k a new initializer (others sharing the old one keep it)."""
        name = f"{node.input[k]}__{tag}"
        self.g.initializer.append(numpy_helper.from_array(array, name))
        node.input[k] = name

    def names(self, *nodes):
        out = []
        for n in nodes:
            out += [n.name, n.output[0]]
        return ",".join(x for x in out if x)


def from_middle(items):
    """The items from the middle of the graph outwards."""
    mid = len(items) // 2
    return sorted(items, key=lambda it: abs(items.index(it) - mid))


def weighted(gr):
    """(node, holder, input index) for each node with a constant weight: the node itself when the weight is a float
    initializer or a QLinear* scale, else the DequantizeLinear of an integer initializer feeding it."""
    out = []
    for n in gr.g.node:
        if n.op_type in ("Conv", "Gemm", "MatMul") and len(n.input) > 1:
            w = n.input[1]
            if w in gr.inits and gr.const(w).ndim >= 2:
                out.append((n, n, 1))
            elif w in gr.producer and gr.producer[w].op_type == "DequantizeLinear" \
                    and gr.producer[w].input[0] in gr.inits:
                out.append((n, gr.producer[w], 1))
        elif n.op_type in QLINEAR_WEIGHT and n.input[3] in gr.inits:
            out.append((n, n, QLINEAR_WEIGHT[n.op_type][0]))
    return out


def fault_weight(gr, place):
    n, holder, k = place
    gr.replace_input(holder, k, (gr.const(holder.input[k]) * np.float32(1.02)).astype(gr.const(holder.input[k]).dtype),
                     "fault")
    return gr.names(n, holder)


def biased(gr):
    """(node, holder, input index) for each node with a constant bias."""
    out = []
    for n in gr.g.node:
        k = {"Conv": 2, "Gemm": 2, "QLinearConv": 8}.get(n.op_type)
        if k is not None and len(n.input) > k and n.input[k]:
            b = n.input[k]
            if b in gr.inits:
                out.append((n, n, k))
            elif b in gr.producer and gr.producer[b].op_type == "DequantizeLinear" \
                    and gr.producer[b].input[0] in gr.inits:
                out.append((n, gr.producer[b], 0))
        elif n.op_type == "Add" and any(i in gr.inits and gr.const(i).ndim == 1 for i in n.input) \
                and any(i in gr.producer and gr.producer[i].op_type == "MatMul" for i in n.input):
            out.append((n, n, next(k for k, i in enumerate(n.input) if i in gr.inits)))
    return out


def output_rms(model, n):
    """The RMS of the (dequantized) output of node `n` on seeded inputs."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.append(onnx.helper.make_empty_tensor_value_info(n.output[0]))
    y = outputs(m)[0].astype(np.float64)
    if n.op_type in QLINEAR_OUT:  # levels: dequantized with the node's output scale and zero point
        gr = Graph(model)
        ks, kz = QLINEAR_OUT[n.op_type]
        y = (y - gr.const(n.input[kz]).astype(np.float64)) * gr.const(n.input[ks]).astype(np.float64)
    return float(np.sqrt(np.mean(y ** 2)))


def bias_scale(gr, n):
    """The scale of a QLinearConv's int32 bias: its input scale times its weight scale."""
    return gr.const(n.input[1]).astype(np.float64) * gr.const(n.input[4]).astype(np.float64)


def fault_bias(gr, place):
    n, holder, k = place
    b = gr.const(holder.input[k])
    # 2% of the RMS of the node's output, as a weight scaled by 1.02 moves it; in levels of an int32 bias.
    shift = 0.02 * output_rms(gr.model, n)
    if np.issubdtype(b.dtype, np.integer):
        scale = gr.const(holder.input[1]) if holder.op_type == "DequantizeLinear" else bias_scale(gr, n)
        shifted = b.astype(np.int64) + np.maximum(1, np.round(shift / scale.astype(np.float64))).astype(np.int64)
    else:
        shifted = b.astype(np.float64) + shift
    gr.replace_input(holder, k, shifted.astype(b.dtype), "fault")
    return gr.names(n, holder)


def activation_dq(gr):
    """DequantizeLinear nodes of activations (their levels computed in the graph), and QLinear* nodes."""
    out = []
    for n in gr.g.node:
        if n.op_type == "DequantizeLinear" and n.input[0] not in gr.inits and len(n.input) > 2:
            out.append((n, 1, 2))
        elif n.op_type in QLINEAR_OUT:
            out.append((n, *QLINEAR_OUT[n.op_type]))
    return out


def fault_quant(gr, which, place):
    n, ks, kz = place
    if which == "scale":
        gr.replace_input(n, ks, (gr.const(n.input[ks]) * np.float32(1.05)).astype(np.float32), "fault")
    else:
        z = gr.const(n.input[kz])
        top = np.iinfo(z.dtype).max
        gr.replace_input(n, kz, np.where(z == top, z - 1, z + 1).astype(z.dtype), "fault")
    consumers = [c for o in n.output for c in gr.consumers.get(o, [])]
    return gr.names(n, *consumers)


PLACES = {"weight": weighted, "bias": biased, "scale": activation_dq, "zero_point": activation_dq}


def planted(model, kind, at):
    """A copy of `model` with a `kind` fault at the `at`-th place from the middle, and the nodes it names."""
    gr = Graph(model)
    places = from_middle(PLACES[kind](gr))
    if at >= len(places):
        return None, None
    place = places[at]
    if kind == "weight":
        nodes = fault_weight(gr, place)
    elif kind == "bias":
        nodes = fault_bias(gr, place)
    else:
        nodes = fault_quant(gr, kind, place)
    return gr.model, nodes


def outputs(model):
    """ONNX Runtime's outputs of `model` (optimizations off) on seeded inputs."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), so)
    rng = np.random.default_rng(0)
    feeds = {}
    for i in s.get_inputs():
        shape = [d if isinstance(d, int) else (1 if k == 0 else 16) for k, d in enumerate(i.shape)]
        if "int" in i.type:  # token ids, a mask of ones, token types and positions of zeros
            ids = rng.integers(0, 100, shape) if i.name == "input_ids" else np.zeros(shape)
            feeds[i.name] = (np.ones(shape) if "mask" in i.name else ids).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return s.run(None, feeds)


def changes(a, b):
    return any(np.abs(x.astype(np.float64) - y.astype(np.float64)).max() > 0 for x, y in zip(a, b))


def plant(out_dir, model):
    """One copy of `model` per kind of fault, at the place nearest the middle where it changes the outputs."""
    rows = []
    source = onnx.load(os.path.join(out_dir, model + ".onnx"))
    quantized = any(n.op_type in ("DequantizeLinear", *QLINEAR_OUT) for n in source.graph.node)
    clean = outputs(source)
    for kind in ["weight", "bias"] + (["scale", "zero_point"] if quantized else []):
        found = None
        for at in range(8):
            faulty, nodes = planted(onnx.load(os.path.join(out_dir, model + ".onnx")), kind, at)
            if faulty is None:
                break
            if changes(clean, outputs(faulty)):
                found = faulty, nodes
                break
        if found is None:
            print(f"  {model}: no place for a {kind} fault that changes the outputs")
            continue
        faulty, nodes = found
        name = f"{model}__fault_{kind}"
        onnx.checker.check_model(faulty)
        onnx.save(faulty, os.path.join(out_dir, name + ".onnx"))
        rows.append((model, name, kind, nodes))
    return rows
