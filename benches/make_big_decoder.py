#!/usr/bin/env python3
"""Write a decoder-like stack of MatMuls whose fp32 weights live in one external-data file, sized by the total
weight bytes asked for: for `phantom plan/segment/merge` on models whose f64 reference does not fit in memory.

Each layer is a pre-norm MLP block: LayerNormalization, MatMul D->4D, Gelu (Erf form), MatMul 4D->D, residual
Add. Input `x` float32 [1, T, D]; output `y`. Weights are drawn from numpy's default_rng(seed) with 1/sqrt(fan-in)
scaling and written straight to `weights.bin` layer by layer (never all in memory); the .onnx file itself is a few
kilobytes and names each weight by its byte range. Nothing here is committed: run it where the model is needed.

usage: python3 benches/make_big_decoder.py OUT_DIR [--gb 4.0] [--dim 2048] [--tokens 8] [--seed 0]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper


def external(name, dims, offset):
    t = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
    t.data_location = TensorProto.EXTERNAL
    length = int(np.prod(dims)) * 4
    for k, v in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t, offset + length


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--gb", type=float, default=4.0, help="total fp32 weight bytes, in GiB")
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    d = a.dim
    per_layer = 8 * d * d * 4
    layers = max(1, round(a.gb * (1 << 30) / per_layer))
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    nodes, inits = [], []
    offset = 0
    x = "x"
    with open(os.path.join(a.out, "weights.bin"), "wb") as f:
        for i in range(layers):
            p = f"layer{i}"
            for name, dims, fan_in in ((f"{p}.w1", [d, 4 * d], d), (f"{p}.w2", [4 * d, d], 4 * d)):
                w = (rng.standard_normal(dims, dtype=np.float32) / np.sqrt(fan_in)).astype(np.float32)
                f.write(w.tobytes())
                t, offset = external(name, dims, offset)
                inits.append(t)
            inits.append(helper.make_tensor(f"{p}.g", TensorProto.FLOAT, [d], np.ones(d, np.float32)))
            inits.append(helper.make_tensor(f"{p}.b", TensorProto.FLOAT, [d], np.zeros(d, np.float32)))
            nodes += [
                helper.make_node("LayerNormalization", [x, f"{p}.g", f"{p}.b"], [f"{p}.ln"], name=f"{p}/ln"),
                helper.make_node("MatMul", [f"{p}.ln", f"{p}.w1"], [f"{p}.up"], name=f"{p}/up"),
                helper.make_node("Div", [f"{p}.up", "sqrt2"], [f"{p}.u2"], name=f"{p}/gelu.div"),
                helper.make_node("Erf", [f"{p}.u2"], [f"{p}.erf"], name=f"{p}/gelu.erf"),
                helper.make_node("Add", [f"{p}.erf", "one"], [f"{p}.e1"], name=f"{p}/gelu.add"),
                helper.make_node("Mul", [f"{p}.up", f"{p}.e1"], [f"{p}.m"], name=f"{p}/gelu.mul"),
                helper.make_node("Mul", [f"{p}.m", "half"], [f"{p}.act"], name=f"{p}/gelu.half"),
                helper.make_node("MatMul", [f"{p}.act", f"{p}.w2"], [f"{p}.down"], name=f"{p}/down"),
                helper.make_node("Add", [x, f"{p}.down"], [f"{p}.out"], name=f"{p}/residual"),
            ]
            x = f"{p}.out"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    for name, v in (("sqrt2", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5)):
        inits.append(helper.make_tensor(name, TensorProto.FLOAT, [], [v]))
    g = helper.make_graph(
        nodes, "big_decoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, a.tokens, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, a.tokens, d])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="phantom make_big_decoder")
    m.ir_version = 8
    onnx.save(m, os.path.join(a.out, "big_decoder.onnx"))
    print(f"{layers} layers of dim {d}: {offset / (1 << 30):.2f} GiB of fp32 weights "
          f"({2 * offset / (1 << 30):.2f} GiB in f64) in {a.out}/weights.bin")


if __name__ == "__main__":
    main()
