"""Injects one fault of each kind into every real model of a folder and checks that `phantom onnx --target-model`
names the faulty node (a culprit of the drift, or an anomaly) whenever the fault moves the model's values beyond
their expected noise. Usage:
    python3 scripts/fault_kinds.py MODELS_DIR PHANTOM [KIND ...]      (needs `pip install onnx numpy`)
Kinds (one node each, the middle candidate of the model):
  weight  the float weight of a Conv/MatMul/Gemm times 1.002
  bias    0.01 × its largest magnitude added to every element of a Conv/Gemm bias or an Add's float constant
  act     a Relu made a LeakyRelu (α 0.01), a Sigmoid a HardSigmoid, a Tanh a Softsign, or a Clip's ceiling lowered 5%
  eps     a BatchNormalization/LayerNormalization/InstanceNormalization epsilon times 1000 (at least 1e-3)
  cast16  a float32 value (the output of the middle Conv/MatMul/Gemm/Add/Mul) stored in float16 and read back
          (Cast → Cast), as a runtime that keeps one intermediate in half precision would
A fault counts as named when any node reading the faulted weight (or the changed node) is a culprit or an anomaly;
a clean verdict is reported as `clean` (the fault may sit within the noise or on a path the inputs do not reach) and
counted apart from misses. Prints one line per model and kind and a summary; exits 1 if a drift names another node.
"""
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_sweep import flags, run  # noqa: E402


def middle(cands):
    return cands[len(cands) // 2] if cands else None


def float_init(inits, name, least=1):
    t = inits.get(name)
    if t is not None and t.data_type == onnx.TensorProto.FLOAT and np.prod(t.dims) >= least:
        return t
    return None


def scale_init(m, t, f):
    a = f(numpy_helper.to_array(t).astype(np.float32))
    t.CopyFrom(numpy_helper.from_array(a.astype(np.float32), t.name))
    return {n.name for n in m.graph.node if t.name in n.input}


def weight(m, inits):
    cands = [(n, t) for n in m.graph.node if n.op_type in ("Conv", "MatMul", "Gemm")
             for t in [float_init(inits, n.input[1] if len(n.input) > 1 else "", 16)] if t is not None]
    hit = middle(cands)
    return hit and scale_init(m, hit[1], lambda a: a * np.float32(1.002))


def bias(m, inits):
    cands = []
    for n in m.graph.node:
        if n.op_type in ("Conv", "Gemm") and len(n.input) > 2:
            t = float_init(inits, n.input[2], 2)
        elif n.op_type == "Add":
            t = next((float_init(inits, i, 2) for i in n.input if float_init(inits, i, 2) is not None), None)
        else:
            t = None
        if t is not None:
            cands.append((n, t))
    hit = middle(cands)
    return hit and scale_init(m, hit[1], lambda a: a + np.float32(0.01) * max(float(np.abs(a).max()), 1e-3))


def act(m, inits):
    cands = [n for n in m.graph.node if n.op_type in ("Relu", "Sigmoid", "Tanh", "Clip") and n.domain in ("", "ai.onnx")]
    n = middle(cands)
    if n is None:
        return None
    if n.op_type == "Relu":
        n.op_type = "LeakyRelu"
        n.attribute.append(helper.make_attribute("alpha", 0.01))
    elif n.op_type == "Sigmoid":
        n.op_type = "HardSigmoid"
    elif n.op_type == "Tanh":
        n.op_type = "Softsign"
    else:
        hi = n.input[2] if len(n.input) > 2 else ""
        t = float_init(inits, hi)
        if t is not None:
            scale_init(m, t, lambda a: a * np.float32(0.95))
        elif any(a.name == "max" for a in n.attribute):
            a = next(a for a in n.attribute if a.name == "max")
            a.f *= 0.95
        else:
            return None
    return {n.name}


def eps(m, inits):
    ops = ("BatchNormalization", "LayerNormalization", "InstanceNormalization")
    cands = [n for n in m.graph.node if n.op_type in ops]
    n = middle(cands)
    if n is None:
        return None
    a = next((a for a in n.attribute if a.name == "epsilon"), None)
    if a is None:
        n.attribute.append(helper.make_attribute("epsilon", 1e-3))
    else:
        a.f = max(a.f * 1000, 1e-3)
    return {n.name}


def float32_values(m):
    """Names of the values shape inference types as float32 (none when it fails)."""
    try:
        g = onnx.shape_inference.infer_shapes(m).graph
    except Exception:
        return set()
    return {v.name for v in list(g.value_info) + list(g.output) if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}


def cast16(m, inits):
    floats = float32_values(m)
    cands = [n for n in m.graph.node if n.op_type in ("Conv", "MatMul", "Gemm", "Add", "Mul")
             and n.domain in ("", "ai.onnx") and n.output[0] in floats]
    n = middle(cands)
    if n is None:
        return None
    out = n.output[0]
    n.output[0] = out + "__fp32"
    at = list(m.graph.node).index(n) + 1
    half = helper.make_node("Cast", [out + "__fp32"], [out + "__fp16"], name=n.name + "__to_fp16", to=onnx.TensorProto.FLOAT16)
    back = helper.make_node("Cast", [out + "__fp16"], [out], name=n.name + "__to_fp32", to=onnx.TensorProto.FLOAT)
    m.graph.node.insert(at, back)
    m.graph.node.insert(at, half)
    return {n.name, half.name, back.name}


KINDS = {"weight": weight, "bias": bias, "act": act, "eps": eps, "cast16": cast16}


def inject(path, out, kind):
    m = onnx.load(path)
    for i, n in enumerate(m.graph.node):
        if not n.name:
            n.name = f"node_{i}"
    inits = {t.name: t for t in m.graph.initializer}
    readers = KINDS[kind](m, inits)
    if not readers:
        return None
    onnx.save(m, out)
    # The unnamed nodes got names in the faulty copy only: give the original the same ones.
    ref = onnx.load(path)
    for i, n in enumerate(ref.graph.node):
        if not n.name:
            n.name = f"node_{i}"
    onnx.save(ref, out + ".ref.onnx")
    return readers


def main():
    folder, phantom = sys.argv[1], sys.argv[2]
    kinds = sys.argv[3:] or list(KINDS)
    counts = {"names": 0, "MISSES": 0, "clean": 0, "error": 0}
    for file in sorted(os.listdir(folder)):
        if not file.endswith(".onnx"):
            continue
        name = file[:-5]
        for kind in kinds:
            with tempfile.TemporaryDirectory() as d:
                faulty = os.path.join(d, "faulty.onnx")
                readers = inject(os.path.join(folder, file), faulty, kind)
                if readers is None:
                    continue
                code, r, err = run(phantom, faulty + ".ref.onnx", faulty, flags(name))
                if r is None:
                    counts["error"] += 1
                    print(f"{name:22s} {kind:6s} exit {code}: {err[:150]}")
                    continue
                v = r["verdict"]
                named = [c["node"] for c in v.get("culprits", [])] + [a["node"] for a in v.get("anomalies", [])]
                outcome = "names" if readers & set(named) else ("clean" if v["status"] == "clean" else "MISSES")
                counts[outcome] += 1
                print(f"{name:22s} {kind:6s} exit {code} {v['status']:22s} {outcome:6s} {sorted(readers)[0][:40]}"
                      f"{'' if outcome != 'MISSES' else ' (named: ' + ', '.join(named[:3]) + ')'}")
    print(" ".join(f"{k} {v}" for k, v in counts.items()))
    sys.exit(1 if counts["MISSES"] or counts["error"] else 0)


if __name__ == "__main__":
    main()
