"""Runs `phantom onnx --ep wgpu` on the real-world models fetched by scripts/fetch-real-models.sh in three
configurations (f32; f16 storage with f32 accumulation; f16 with f16 accumulation) and prints one row per model and
configuration: verdict, nodes on the device / on the host (and how many of those were float ops not checked on the
GPU), the final outputs' worst relative error, the median SNR of the long-reduction nodes (MatMul, Gemm, Conv,
reductions, normalizations, Softmax), and time.

usage: python3 scripts/wgpu_models.py MODELS_DIR [PHANTOM_BINARY] [MODEL ...]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from real_models import ARGS  # noqa: E402

REDUCING = {"MatMul", "Gemm", "Conv", "ConvTranspose", "ReduceMean", "ReduceSum", "LayerNormalization",
            "InstanceNormalization", "Softmax", "LogSoftmax", "GlobalAveragePool", "AveragePool"}
CONFIGS = [("f32", []), ("f16", ["--precision", "fp16"]), ("f16 acc16", ["--precision", "fp16", "--accumulate", "f16"])]


def main():
    models_dir = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else "target/release/phantom"
    only = set(sys.argv[3:])
    print("| model | config | verdict | device / host nodes | not checked on GPU | outputs max rel | "
          "median SNR of reductions (dB) | time (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, extra in ARGS.items():
        path = os.path.join(models_dir, name + ".onnx")
        if not os.path.exists(path) or (only and name not in only):
            continue
        for label, cfg in CONFIGS:
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "r.json")
                t = time.time()
                p = subprocess.run([binary, "onnx", path, "--ep", "wgpu", "--attribution", "off", "--json", out,
                                    "--quiet", *cfg, *extra], capture_output=True, text=True)
                dt = time.time() - t
                if p.returncode == 2:
                    print(f"| {name} | {label} | error: {p.stderr.strip().splitlines()[0][:100]} | | | | | {dt:.1f} |")
                    continue
                r = json.load(open(out))
                det = r["target"]["details"]
                notes = [n for n in r["nodes"] if n.get("target_note", "").startswith("not checked")]
                ops = sorted({n["op_type"] for n in notes})
                outs = [v["metrics"]["max_rel"] for n in r["nodes"] for v in n["values"]
                        if v["is_output"] and v.get("metrics")]
                snr = [v["metrics"]["snr_db"] for n in r["nodes"] if n["op_type"] in REDUCING
                       for v in n["values"] if v.get("metrics") and v["metrics"].get("snr_db") is not None]
                med = f"{statistics.median(snr):.1f}" if snr else ""
                worst = f"{max(outs):.2e}" if outs else ""
                print(f"| {name} | {label} | {r['verdict']['status']} ({r['verdict']['failing_values']}) | "
                      f"{det['nodes_on_device']} / {det['nodes_on_host']} | {len(notes)} {' '.join(ops)} | {worst} | "
                      f"{med} | {dt:.1f} |", flush=True)


if __name__ == "__main__":
    main()
