"""Converts every real-world model to fp16 twice — with phantom (`phantom onnx --precision fp16`) and with
onnxconverter-common (`convert_float_to_float16(keep_io_types=True)`) — and says for each whether ONNX Runtime
loads and runs the result, and what phantom names as culprit/first divergence.

usage: python3 scripts/fp16_sweep.py MODELS_DIR [PHANTOM_BINARY] [fp16|bf16]
"""
import json
import warnings
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(__file__))
from real_models import ARGS  # noqa: E402


def ort_loads(path):
    try:
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return "loads"
    except Exception as e:  # noqa: BLE001
        return "FAILS: " + str(e).splitlines()[0][:90]


def occ(src, dst):
    try:
        from onnxconverter_common import float16
        m = onnx.load(src)
        m16 = float16.convert_float_to_float16(m, keep_io_types=True)
        onnx.save(m16, dst)
    except Exception as e:  # noqa: BLE001
        return "CONVERT FAILS: " + str(e).splitlines()[0][:80]
    return ort_loads(dst)


def main():
    warnings.simplefilter("ignore")
    d = sys.argv[1]
    exe = sys.argv[2] if len(sys.argv) > 2 else "target/release/phantom"
    prec = sys.argv[3] if len(sys.argv) > 3 else "fp16"
    tmp = tempfile.mkdtemp()
    rows = []
    for name, args in ARGS.items():
        src = os.path.join(d, name + ".onnx")
        if not os.path.exists(src):
            continue
        mine = os.path.join(tmp, name + ".phantom.onnx")
        rep = os.path.join(tmp, name + ".json")
        p = subprocess.run([exe, "onnx", src, "--precision", prec, "--save-target-model", mine, "--json", rep, "-q"]
                           + args, capture_output=True, text=True)
        if p.returncode == 2:
            verdict = "ERROR " + p.stderr.strip().splitlines()[0][:100]
        else:
            r = json.load(open(rep))
            v = r["verdict"]
            fd = v.get("first_divergence")
            cul = v.get("culprits") or []
            verdict = "%s first=%s culprit=%s kept=%d" % (
                v["status"], fd and fd["node"], cul and (cul[0]["node"] + ":" + cul[0].get("cause", "")),
                len((r.get("conversion") or {}).get("kept_fp32", [])))
        theirs = occ(src, os.path.join(tmp, name + ".occ.onnx")) if prec == "fp16" else "-"
        rows.append((name, ort_loads(mine) if os.path.exists(mine) else "not written", theirs, verdict))
        print("%-20s phantom: %-8s occ: %-40s %s" % rows[-1], flush=True)
    ok_p = sum(r[1] == "loads" for r in rows)
    ok_o = sum(r[2] == "loads" for r in rows)
    print("phantom conversions load: %d/%d; onnxconverter-common: %d/%d" % (ok_p, len(rows), ok_o, len(rows)))


if __name__ == "__main__":
    main()
