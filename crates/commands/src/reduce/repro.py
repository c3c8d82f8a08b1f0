#!/usr/bin/env python3
"""Reproduces a numerical discrepancy that phantom cut down to this subgraph.

Needs only numpy and onnxruntime. Runs model.onnx on the execution provider named in bundle.json, feeds it
test_data_set_0/input_*.pb, and compares each output with test_data_set_0/output_*.pb (float64 values of an f64
reference) under the tolerance phantom applied: an element fails when |got - expected| > atol + rtol * max(|expected|,
scale). Exit 1: reproduced; 0: not reproduced; 2: could not run.
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "test_data_set_0")
TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
         9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


def varint(b, i):
    v, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def read_tensor(path):
    """An ONNX TensorProto with raw_data, as phantom writes it (onnx.numpy_helper reads these files too)."""
    b = open(path, "rb").read()
    i, dims, code, name, raw = 0, [], 0, "", b""
    while i < len(b):
        key, i = varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
            if field == 1:
                dims.append(v)
            elif field == 2:
                code = v
        elif wire == 2:
            n, i = varint(b, i)
            chunk, i = b[i:i + n], i + n
            if field == 1:
                j = 0
                while j < len(chunk):
                    d, j = varint(chunk, j)
                    dims.append(d)
            elif field == 8:
                name = chunk.decode()
            elif field == 9:
                raw = chunk
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            sys.exit(f"{path}: unexpected protobuf wire type {wire}")
    if code == 16:  # bfloat16: the upper half of a float32
        a = (np.frombuffer(raw, "<u2").astype("<u4") << 16).view("<f4")
    elif code in TYPES:
        a = np.frombuffer(raw, np.dtype(TYPES[code]).newbyteorder("<"))
    else:
        sys.exit(f"{path}: element type {code} is not read by this script")
    return name, a.reshape(dims)


def files(prefix):
    found = sorted(f for f in os.listdir(DATA) if f.startswith(prefix) and f.endswith(".pb"))
    return [read_tensor(os.path.join(DATA, f)) for f in sorted(found, key=lambda f: int(f[len(prefix):-3]))]


def main():
    cfg = json.load(open(os.path.join(HERE, "bundle.json")))
    print(f"onnxruntime {ort.__version__} (phantom ran {cfg['onnxruntime']}), provider {cfg['provider']}")
    if cfg["provider"] not in ort.get_available_providers():
        print(f"{cfg['provider']} is not available in this onnxruntime build: {ort.get_available_providers()}")
        return 2
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, cfg["graph_optimization_level"])
    for lib in cfg.get("custom_op_libraries", []):
        if not os.path.isfile(lib):
            print(f"the custom-op library phantom registered, {lib}, is not here: install it, or edit bundle.json")
            return 2
        so.register_custom_ops_library(lib)
    sess = ort.InferenceSession(os.path.join(HERE, "model.onnx"), so,
                                providers=[(cfg["provider"], cfg["provider_options"])])
    feeds = dict(files("input_"))
    expected = dict(files("output_"))
    names = [o["name"] for o in cfg["outputs"]]
    got = dict(zip(names, sess.run(names, feeds)))
    failed = False
    for o in cfg["outputs"]:
        r = expected[o["name"]].astype(np.float64)
        t = got[o["name"]].astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(t - r)
            limit = o["atol"] + o["rtol"] * np.maximum(np.abs(r), o["scale"])
            ok = np.where(np.isnan(r) | np.isnan(t), np.isnan(r) & np.isnan(t),
                          np.where(np.isinf(r) | np.isinf(t), r == t, diff <= limit))
        bad = int(ok.size - np.count_nonzero(ok))
        print(f"{o['name']} {list(t.shape)} {got[o['name']].dtype}: {bad} of {r.size} elements out of tolerance "
              f"(atol {o['atol']:.3g}, rtol {o['rtol']:.3g}, scale {o['scale']:.3g})")
        if r.size:
            finite = np.isfinite(diff)
            key = np.where(ok, -1.0, np.where(finite, diff, np.inf)) if bad else np.where(finite, diff, -1.0)
            w = np.unravel_index(int(np.argmax(key)), r.shape)
            print(f"  max finite |got - expected| = {float(np.max(np.where(finite, diff, 0.0))):.6g}; "
                  f"worst at {tuple(int(x) for x in w)}: expected {r[w]:.9g}, got {t[w]:.9g}")
        failed = failed or bad > 0
    print("REPRODUCED" if failed else "NOT REPRODUCED: every output is within tolerance")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
