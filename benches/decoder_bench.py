"""Benchmark: phantom on Llama-style decoders of billions of parameters (issue 57's done-when), beside the two runs it
is built from. For each model: `phantom onnx` (no flags), the f64 reference alone (`phantom run --runner reference`)
and ONNX Runtime exposing every value (`phantom run --runner target --all-values`), each as its own process: wall
time, peak RSS, phantom's own stage times (import, reference, compare...), the verdict, and the ratios the issue
sets: full / (reference + ORT every value) and peak memory / ORT every value's.

usage: python3 benches/decoder_bench.py DIR [PRESET ...]   (build first: cargo build --release)
  PRESET  a benches/make_llama.py preset (default: 1b 3b); each model is written once under DIR/PRESET
  Prints a markdown table; BENCH_REPEAT (default 1) runs each command that many times and keeps the fastest.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from compare_bench import PHANTOM, measure_once  # noqa: E402

REPEAT = int(os.environ.get("BENCH_REPEAT", "1"))
PYTHON = os.environ.get("PYTHON", sys.executable)


def fastest(cmd):
    return min((measure_once(cmd) for _ in range(REPEAT)), key=lambda m: m[0])


def model(root, preset):
    path = os.path.join(root, preset, "llama.onnx")
    if not os.path.exists(path):
        here = os.path.dirname(__file__)
        subprocess.run([PYTHON, os.path.join(here, "make_llama.py"), os.path.dirname(path), "--preset", preset],
                       check=True)
    return path


def full_run(path):
    """(seconds, peak MiB, stage times as text, verdict word) of `phantom onnx MODEL`."""
    cmd = [PHANTOM, "onnx", path]
    best = None
    for _ in range(REPEAT):
        out = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + cmd, capture_output=True, text=True)
        if out.returncode not in (0, 1):
            raise RuntimeError(f"phantom onnx exited {out.returncode}: {out.stderr[-400:]}")
        secs, kib = out.stderr.strip().splitlines()[-1].split()
        stages = re.search(r"^time: \d+ ms \((.*)\)$", out.stdout, re.M)
        verdict = re.search(r"^[✓✗~!?] (\S+)", out.stdout, re.M)
        run = (float(secs), int(kib) / 1024, stages.group(1) if stages else "?", verdict.group(1) if verdict else "?")
        best = run if best is None or run[0] < best[0] else best
    return best


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root, presets = sys.argv[1], sys.argv[2:] or ["1b", "3b"]
    print("| model | phantom onnx | verdict | stages (ms) | f64 reference alone | ORT every value | "
          "full / (ref + ORT every value) | memory / ORT every value |")
    print("|---|---|---|---|---|---|---|---|")
    for preset in presets:
        path = model(root, preset)
        full = full_run(path)
        ref = fastest([PHANTOM, "run", path, "--runner", "reference"])
        ort = fastest([PHANTOM, "run", path, "--runner", "target", "--all-values"])
        print(f"| {preset} | {full[0]:.1f} s, {full[1] / 1024:.1f} GiB | {full[3]} | {full[2]} | "
              f"{ref[0]:.1f} s, {ref[1] / 1024:.1f} GiB | {ort[0]:.1f} s, {ort[1] / 1024:.1f} GiB | "
              f"{full[0] / (ref[0] + ort[0]):.2f} | {full[1] / ort[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
