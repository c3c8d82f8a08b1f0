"""Bounded-memory benchmark: a model whose intermediates exceed 2 GB (24 values of 1x32x1024x1024 float32 = 3 GiB;
6 GiB as the f64 reference holds them). Runs `phantom onnx` whole (PHANTOM_MEMORY_BUDGET=64GiB), by default (which
bounds itself), with --max-memory 2GiB, and --bisect, on a target that diverges at one node; prints peak RSS (GNU
time), wall time, verdict, first divergence and culprits of each.

usage: python3 benches/bounded_memory.py [PHANTOM_BINARY]     (needs /usr/bin/time)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

C, H, W, DEPTH = 32, 1024, 1024, 24


def build(path, perturb_at=None):
    nodes, prev, inits = [], "x", []
    for i in range(DEPTH):
        out = f"v{i}"
        kind = i % 4
        if kind == 0:
            w = (np.eye(C) + 0.01 * np.random.default_rng(i).standard_normal((C, C))).astype(np.float32)
            inits.append(numpy_helper.from_array(w.reshape(C, C, 1, 1), f"w{i}"))
            nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [out], name=f"conv{i}"))
        elif kind == 1:
            nodes.append(helper.make_node("Relu", [prev], [out], name=f"relu{i}"))
        elif kind == 2:
            scale = 1.5 if i == perturb_at else 1.0
            inits.append(numpy_helper.from_array(np.array(scale, np.float32), f"s{i}"))
            nodes.append(helper.make_node("Mul", [prev, f"s{i}"], [out], name=f"mul{i}"))
        else:
            nodes.append(helper.make_node("Sigmoid", [prev], [out], name=f"sigmoid{i}"))
        prev = out
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, C, H, W])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def run(exe, args, env=None):
    p = subprocess.run(["/usr/bin/time", "-v", exe] + args, capture_output=True, text=True,
                       env={**os.environ, **(env or {})})
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 1024 / 1024
    wall = re.search(r"Elapsed \(wall clock\) time .*: (\S+)", p.stderr).group(1)
    return p.returncode, rss, wall, p.stdout, p.stderr


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else "target/release/phantom"
    d = tempfile.mkdtemp()
    ref, tgt = os.path.join(d, "big.onnx"), os.path.join(d, "big_target.onnx")
    build(ref)
    build(tgt, perturb_at=10)
    gib = C * H * W * 4 * DEPTH / 2**30
    print(f"model: {DEPTH} values of 1x{C}x{H}x{W} f32 = {gib:.1f} GiB of intermediates ({2 * gib:.1f} GiB in f64)")
    rows = []
    modes = [("whole", [], {"PHANTOM_MEMORY_BUDGET": "64GiB"}), ("default", [], {}),
             ("--max-memory 2GiB", ["--max-memory", "2GiB"], {}), ("--bisect", ["--bisect"], {})]
    for label, extra, env in modes:
        js = os.path.join(d, "r.json")
        code, rss, wall, out, err = run(exe, ["onnx", ref, "--target-model", tgt, "--json", js, "-q"] + extra, env)
        r = json.load(open(js)) if os.path.exists(js) else {}
        culprits = "-"
        if "verdict" in r:
            fd = (r["verdict"].get("first_divergence") or {}).get("node")
            failing = r["verdict"]["failing_values"]
            culprits = ",".join(f"{c['node']}({c['causes'][0]['kind'] if c['causes'] else '-'})"
                                for c in r["verdict"]["culprits"])
        else:
            fd = (r.get("first_divergence") or {}).get("node")
            failing = "-"
        runs = r.get("target_runs", "")
        note = next((n for n in r.get("notes", []) if n.startswith("bounded")), "")
        m = re.search(r"ran (\d+) time", note)
        runs = runs or (m.group(1) if m else 1)
        rows.append((label, code, rss, wall, fd, failing, runs))
        print(f"{label:20s} exit {code}  peak RSS {rss:5.2f} GiB  wall {wall:>8s}  first divergence {fd}  "
              f"failing {failing}  target runs {runs}  culprits {culprits}", flush=True)
        os.remove(js) if os.path.exists(js) else None


if __name__ == "__main__":
    main()
