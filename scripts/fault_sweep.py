"""Injects one weight fault into a Conv/MatMul/Gemm of each real model and checks that `phantom onnx --target-model`
names the faulty node (as the culprit of a drift, or an anomaly), with the default screened attribution and with
`--attribute-all`. Usage:
    python3 scripts/fault_sweep.py MODELS_DIR PHANTOM [DELTA ...]      (needs `pip install onnx numpy`)
The fault multiplies the weight of the middle Conv/MatMul/Gemm (one with a float initializer of ≥ 16 elements) by
1 + δ (default δ = 0.0002, 0.0005 and 0.002); the fault counts as named when any node reading that weight is. Prints one line per model, δ and mode, and a summary; exits 1 if a fault is
not named.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

MODELS = ["open_nsfw", "minilm_l3", "text_orientation", "mtcnn_onet", "captcha_crnn", "yolov8n_nudenet",
          "oww_embedding", "romanizer_dec"]

def flags(name):
    """The flags scripts/real_models.py runs the model with."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import importlib.util
    spec = importlib.util.spec_from_file_location("real_models_args", os.path.join(sys.path[0], "real_models.py"))
    src = open(spec.origin).read()
    args = src[src.index("ARGS = {"):src.index("\n}\n", src.index("ARGS = {")) + 3]
    scope = {}
    exec(args, scope)
    return scope["ARGS"].get(name, [])


def inject(path, out, delta):
    m = onnx.load(path)
    inits = {t.name: t for t in m.graph.initializer}
    cands = []
    for n in m.graph.node:
        if n.op_type in ("Conv", "MatMul", "Gemm"):
            for i in n.input[1:2]:
                t = inits.get(i)
                if t is not None and t.data_type == onnx.TensorProto.FLOAT and np.prod(t.dims) >= 16:
                    cands.append((n, t))
    if not cands:
        return None
    node, t = cands[len(cands) // 2]
    a = numpy_helper.to_array(t).astype(np.float32) * np.float32(1 + delta)
    t.CopyFrom(numpy_helper.from_array(a, t.name))
    onnx.save(m, out)
    # Every node reading the weight carries the fault (an unrolled recurrent cell shares it across steps).
    return node.name, {n.name for n in m.graph.node if t.name in n.input}


def run(phantom, model, faulty, extra):
    """(exit code, the JSON report or None, the last line of stderr) of `phantom onnx MODEL --target-model FAULTY`."""
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "r.json")
        cmd = [phantom, "onnx", model, "--target-model", faulty, "--json", js] + extra
        p = subprocess.run(cmd, capture_output=True, text=True)
        last = (p.stderr.strip().splitlines() or [""])[-1]
        if not os.path.exists(js):
            return p.returncode, None, last
        return p.returncode, json.load(open(js)), last


def main():
    folder, phantom = sys.argv[1], sys.argv[2]
    deltas = [float(d) for d in sys.argv[3:]] or [0.0002, 0.0005, 0.002]
    missed = 0
    for name in MODELS:
        path = os.path.join(folder, name + ".onnx")
        if not os.path.exists(path):
            print(f"{name:18s} (not in {folder})")
            continue
        for delta in deltas:
            with tempfile.TemporaryDirectory() as d:
                faulty = os.path.join(d, "faulty.onnx")
                hit = inject(path, faulty, delta)
                if hit is None:
                    print(f"{name:18s} no float Conv/MatMul/Gemm weight")
                    break
                node, readers = hit
                for mode, extra in [("screened", []), ("all", ["--attribute-all"])]:
                    code, r, _ = run(phantom, path, faulty, flags(name) + extra)
                    if r is None:
                        print(f"{name:18s} δ={delta:<7} {mode:8s} exit {code}: no report")
                        missed += 1
                        continue
                    v = r["verdict"]
                    named = [c["node"] for c in v.get("culprits", [])] + [a["node"] for a in v.get("anomalies", [])]
                    ok = bool(readers & set(named))
                    missed += not ok
                    cov = r["coverage"].get("introduced") or {}
                    print(f"{name:18s} δ={delta:<7} {mode:8s} exit {code} {v['status']:18s} "
                          f"{'names' if ok else 'MISSES'} {node} (run alone {cov.get('measured')} of "
                          f"{cov.get('compared')}; attribution {r['timings']['attribution_ms']:.0f} ms)")
    print(f"{missed} fault(s) not named")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
