#!/usr/bin/env python3
"""Write a Llama-style decoder from a config: the ops a TorchScript export of Hugging Face's Llama has (Gather
embedding, RMSNorm as Pow/ReduceMean/Add/Sqrt/Div/Mul, rotary embedding with rotate_half as Slice/Neg/Concat,
causal attention as MatMul/Div/Add/Softmax/MatMul, SiLU-gated MLP, lm_head), every weight in one external-data
file `weights.bin`, written layer by layer (never all in memory). Input `input_ids` int64 [1, T]; output `logits`.

Sizes of the benchmarks (issue 57): `--preset 1b` (hidden 2048, intermediate 5632, 22 layers, 1.26B parameters,
fp32, 4.7 GiB), `--preset 3b` (hidden 3072, intermediate 8192, 28 layers, 3.4B, fp16), `--preset 7b` (hidden
4096, intermediate 11008, 32 layers, 6.7B, fp16), `--preset tiny` (a few MB, for tests). Weights are drawn from
numpy's default_rng(seed) with 1/sqrt(fan-in) scaling. Nothing here is committed: run it where the model is needed.

usage: python3 benches/make_llama.py OUT_DIR [--preset tiny|1b|3b|7b] [--hidden H] [--intermediate I]
       [--layers L] [--heads N] [--vocab V] [--tokens T] [--dtype fp32|fp16] [--seed S] [--cache | --rope-in-graph]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper

PRESETS = {
    "tiny": dict(hidden=64, intermediate=176, layers=2, heads=4, vocab=256, dtype="fp32"),
    "1b": dict(hidden=2048, intermediate=5632, layers=22, heads=32, vocab=32000, dtype="fp32"),
    "3b": dict(hidden=3072, intermediate=8192, layers=28, heads=24, vocab=32000, dtype="fp16"),
    "7b": dict(hidden=4096, intermediate=11008, layers=32, heads=32, vocab=32000, dtype="fp16"),
}


class Builder:
    """Collects nodes and initializers; large weights go to the external file, small constants inline."""

    def __init__(self, out, dtype, seed):
        self.np = np.float16 if dtype == "fp16" else np.float32
        self.elem = TensorProto.FLOAT16 if dtype == "fp16" else TensorProto.FLOAT
        self.rng = np.random.default_rng(seed)
        self.file = open(os.path.join(out, "weights.bin"), "wb")
        self.offset, self.nodes, self.inits, self.params = 0, [], [], 0

    def weight(self, name, dims, scale=None, fill=None):
        n = int(np.prod(dims))
        if fill is not None:
            data = np.full(n, fill, dtype=self.np)
        else:
            data = (self.rng.standard_normal(n, dtype=np.float32) * scale).astype(self.np)
        self.file.write(data.tobytes())
        t = TensorProto(name=name, data_type=self.elem, dims=dims)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "weights.bin"), ("offset", str(self.offset)), ("length", str(data.nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.offset += data.nbytes
        self.params += n
        self.inits.append(t)
        return name

    def const(self, name, array):
        self.inits.append(onnx.numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, name, inputs, **attrs):
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out


def rms_norm(b, prefix, x, hidden):
    w = b.weight(f"{prefix}.weight", [hidden], fill=1.0)
    p = f"/{prefix}"
    sq = b.node("Pow", f"{p}/Pow", [x, "two"])
    var = b.node("ReduceMean", f"{p}/ReduceMean", [sq], axes=[-1], keepdims=1)
    s = b.node("Sqrt", f"{p}/Sqrt", [b.node("Add", f"{p}/Add", [var, "eps"])])
    normed = b.node("Mul", f"{p}/Mul", [x, b.node("Div", f"{p}/Div", ["one", s])])
    return b.node("Mul", f"{p}/Mul_1", [w, normed])


def linear(b, prefix, x, fan_in, fan_out):
    w = b.weight(f"{prefix}.weight", [fan_in, fan_out], scale=fan_in**-0.5)
    return b.node("MatMul", f"/{prefix}/MatMul", [x, w])


def rotary(b, p, x):
    """x [1, heads, T, d] -> x * cos + rotate_half(x) * sin."""
    x1 = b.node("Slice", f"{p}/Slice", [x, "zero_1", "half", "minus_one_1"])
    x2 = b.node("Slice", f"{p}/Slice_1", [x, "half", "big", "minus_one_1"])
    rot = b.node("Concat", f"{p}/Concat", [b.node("Neg", f"{p}/Neg", [x2]), x1], axis=-1)
    return b.node(
        "Add", f"{p}/Add", [b.node("Mul", f"{p}/Mul", [x, "cos"]), b.node("Mul", f"{p}/Mul_1", [rot, "sin"])]
    )


def attention(b, i, x, c):
    p = f"model.layers.{i}.self_attn"
    h, n = c["hidden"], c["heads"]
    heads = []
    for proj in ("q", "k", "v"):
        y = linear(b, f"{p}.{proj}_proj", x, h, h)
        y = b.node("Reshape", f"/{p}/{proj}/Reshape", [y, "heads_shape"])
        y = b.node("Transpose", f"/{p}/{proj}/Transpose", [y], perm=[0, 2, 1, 3])
        heads.append(y)
    q, k, v = heads
    q, k = rotary(b, f"/{p}/q_rot", q), rotary(b, f"/{p}/k_rot", k)
    if c.get("cache"):
        # The cache of the steps before, then this step's keys and values: what the next step is fed.
        k = b.node("Concat", f"/{p}/k_cat", [f"past_key_values.{i}.key", k], axis=2)
        v = b.node("Concat", f"/{p}/v_cat", [f"past_key_values.{i}.value", v], axis=2)
        b.nodes.append(helper.make_node("Identity", [k], [f"present.{i}.key"], name=f"/{p}/present_key"))
        b.nodes.append(helper.make_node("Identity", [v], [f"present.{i}.value"], name=f"/{p}/present_value"))
    kt = b.node("Transpose", f"/{p}/Transpose", [k], perm=[0, 1, 3, 2])
    s = b.node("Div", f"/{p}/Div", [b.node("MatMul", f"/{p}/MatMul", [q, kt]), "sqrt_d"])
    w = b.node("Softmax", f"/{p}/Softmax", [b.node("Add", f"/{p}/Add", [s, "mask"])], axis=-1)
    o = b.node("Transpose", f"/{p}/Transpose_1", [b.node("MatMul", f"/{p}/MatMul_1", [w, v])], perm=[0, 2, 1, 3])
    o = b.node("Reshape", f"/{p}/Reshape", [o, "hidden_shape"])
    return linear(b, f"{p}.o_proj", o, h, h)


def mlp(b, i, x, c):
    p = f"model.layers.{i}.mlp"
    h, m = c["hidden"], c["intermediate"]
    gate = linear(b, f"{p}.gate_proj", x, h, m)
    silu = b.node("Mul", f"/{p}/act_fn/Mul", [gate, b.node("Sigmoid", f"/{p}/act_fn/Sigmoid", [gate])])
    up = linear(b, f"{p}.up_proj", x, h, m)
    return linear(b, f"{p}.down_proj", b.node("Mul", f"/{p}/Mul", [silu, up]), m, h)


def constants(b, c, t):
    d = c["hidden"] // c["heads"]
    f = b.np
    inv = 1.0 / (10000.0 ** (np.arange(0, d, 2, dtype=np.float64) / d))
    # With a cache, positions beyond the prompt are decoded one at a time: tables for twice the prompt.
    ang = np.outer(np.arange(2 * t if c.get("cache") else t, dtype=np.float64), inv)
    ang = np.concatenate([ang, ang], axis=-1)
    suffix = "_table" if c.get("cache") else ""
    if c.get("rope_in_graph"):
        b.const("inv_freq", inv.astype(f)[None])
    else:
        b.const("cos" + suffix, np.cos(ang).astype(f)[None, None])
        b.const("sin" + suffix, np.sin(ang).astype(f)[None, None])
    if c.get("cache") or c.get("rope_in_graph"):
        b.const("one_i", np.array(1, np.int64))
        b.const("zero_two", np.array([0, 1], np.int64))
    if c.get("rope_in_graph"):
        b.const("zero_i", np.array(0, np.int64))
    if c.get("cache"):
        b.const("two_i", np.array(2, np.int64))
        b.const("two_1", np.array([2], np.int64))
    else:
        b.const("mask", np.triu(np.full((t, t), np.finfo(f).min, dtype=f), 1)[None, None])
    b.const("two", np.array(2.0, f))
    b.const("one", np.array(1.0, f))
    b.const("eps", np.array(1e-5, f))
    b.const("sqrt_d", np.array(np.sqrt(d), f))
    b.const("zero_1", np.array([0], np.int64))
    b.const("half", np.array([d // 2], np.int64))
    b.const("big", np.array([np.iinfo(np.int64).max], np.int64))
    b.const("minus_one_1", np.array([-1], np.int64))
    b.const("heads_shape", np.array([1, -1 if c.get("cache") else t, c["heads"], d], np.int64))
    b.const("hidden_shape", np.array([1, -1 if c.get("cache") else t, c["hidden"]], np.int64))


def rotary_in_graph(b):
    """Rotary tables computed in the graph in the model's precision, as Hugging Face's LlamaRotaryEmbedding exports:
    positions from the input's length, angles = positions x inv_freq (a MatMul), cos and sin of them."""
    seq = b.node("Gather", "/rotary/seq", [b.node("Shape", "/rotary/ids_shape", ["input_ids"]), "one_i"], axis=0)
    pos = b.node("Range", "/rotary/Range", ["zero_i", seq, "one_i"])
    pos = b.node("Cast", "/rotary/Cast", [pos], to=b.elem)
    pos = b.node("Unsqueeze", "/rotary/Unsqueeze", [pos, "minus_one_1"])
    freqs = b.node("MatMul", "/rotary/MatMul", [pos, "inv_freq"])
    emb = b.node("Concat", "/rotary/Concat", [freqs, freqs], axis=-1)
    for name, op in (("cos", "Cos"), ("sin", "Sin")):
        v = b.node(op, f"/rotary/{op}", [emb])
        b.nodes.append(helper.make_node("Unsqueeze", [v, "zero_two"], [name], name=f"/rotary/{name}"))


def cached_positions(b, c, t):
    """With a cache: rotary tables for positions past .. past + seq, and the causal mask [seq, past + seq], from the
    shapes of `input_ids` and the first layer's past keys (tables precomputed for 2 `t` positions)."""
    seq = b.node("Gather", "/pos/seq", [b.node("Shape", "/pos/ids_shape", ["input_ids"]), "one_i"], axis=0)
    past = b.node("Gather", "/pos/past", [b.node("Shape", "/pos/past_shape", ["past_key_values.0.key"]), "two_i"],
                  axis=0)
    end = b.node("Add", "/pos/end", [past, seq])
    starts = b.node("Unsqueeze", "/pos/starts", [past, "zero_1"])
    ends = b.node("Unsqueeze", "/pos/ends", [end, "zero_1"])
    for name in ("cos", "sin"):
        b.nodes.append(helper.make_node("Slice", [f"{name}_table", starts, ends, "two_1"], [name], name=f"/pos/{name}"))
    dims = b.node("Concat", "/pos/mask_dims", [b.node("Unsqueeze", "/pos/seq_1", [seq, "zero_1"]), ends], axis=0)
    low = np.finfo(b.np).min
    full = b.node("ConstantOfShape", "/pos/full", [dims], value=helper.make_tensor("v", b.elem, [1], [low]))
    causal = b.node("Trilu", "/pos/causal", [full, b.node("Add", "/pos/k", [past, "one_i"])], upper=1)
    b.nodes.append(helper.make_node("Unsqueeze", [causal, "zero_two"], ["mask"], name="/pos/mask"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    for k in ("hidden", "intermediate", "layers", "heads", "vocab"):
        ap.add_argument(f"--{k}", type=int)
    ap.add_argument("--dtype", choices=["fp32", "fp16"])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", action="store_true",
                    help="a KV-cache decoder (past_key_values.I.key/value in, present.I.key/value out, dynamic "
                         "lengths; rotary tables for twice --tokens positions), for `phantom onnx --steps`")
    ap.add_argument("--rope-in-graph", action="store_true",
                    help="rotary tables computed in the graph in the model's precision (positions x inv_freq, "
                         "then cos and sin) instead of stored ones; not with --cache")
    a = ap.parse_args()
    c = dict(PRESETS[a.preset])
    c["cache"] = a.cache
    c["rope_in_graph"] = a.rope_in_graph
    if a.cache and a.rope_in_graph:
        ap.error("--rope-in-graph is not made with --cache")
    c.update({k: getattr(a, k) for k in ("hidden", "intermediate", "layers", "heads", "vocab", "dtype") if getattr(a, k)})
    os.makedirs(a.out, exist_ok=True)
    b, t, h = Builder(a.out, c["dtype"], a.seed), a.tokens, c["hidden"]
    constants(b, c, t)
    if c["cache"]:
        cached_positions(b, c, t)
    if c["rope_in_graph"]:
        rotary_in_graph(b)
    emb = b.weight("model.embed_tokens.weight", [c["vocab"], h], scale=1.0)
    x = b.node("Gather", "/model/embed_tokens/Gather", [emb, "input_ids"])
    for i in range(c["layers"]):
        a_in = rms_norm(b, f"model.layers.{i}.input_layernorm", x, h)
        x = b.node("Add", f"/model/layers.{i}/Add", [x, attention(b, i, a_in, c)])
        m_in = rms_norm(b, f"model.layers.{i}.post_attention_layernorm", x, h)
        x = b.node("Add", f"/model/layers.{i}/Add_1", [x, mlp(b, i, m_in, c)])
    x = rms_norm(b, "model.norm", x, h)
    w = b.weight("lm_head.weight", [h, c["vocab"]], scale=h**-0.5)
    b.nodes.append(helper.make_node("MatMul", [x, w], ["logits"], name="/lm_head/MatMul"))
    b.file.close()
    seq = "seq" if c["cache"] else t
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])]
    outputs = [helper.make_tensor_value_info("logits", b.elem, [1, seq, c["vocab"]])]
    d = h // c["heads"]
    for i in range(c["layers"] if c["cache"] else 0):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", b.elem, [1, c["heads"], "past", d]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kv}", b.elem, [1, c["heads"], "total", d]))
    graph = helper.make_graph(b.nodes, "llama", inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_llama.py", ir_version=8)
    onnx.save(model, os.path.join(a.out, "llama.onnx"))
    print(f"{a.out}/llama.onnx: {b.params / 1e9:.3g}B parameters, {b.offset / (1 << 30):.2f} GiB of {c['dtype']} weights")


if __name__ == "__main__":
    main()
