"""Benchmark: phantom's full comparison (f64 reference + ORT, every intermediate) against a plain ORT run, a plain
f64 reference run, and Polygraphy's mark-all save-and-compare of ORT alone. Prints wall time and peak RSS of each
(as separate processes) and the ratios phantom / Polygraphy.

usage: python3 benches/compare_bench.py "MODEL.onnx|phantom args|polygraphy args" ...   (build first: cargo build --release)
e.g.   python3 benches/compare_bench.py "m.onnx|--shape x=1x3x48x320|--input-shapes x:[1,3,48,320]"
Polygraphy: `pip install polygraphy onnx onnxruntime numpy` (skipped when missing).
"""
import os
import shlex
import subprocess
import sys
import tempfile
import time

PHANTOM = os.environ.get("PHANTOM", "target/release/phantom")
POLYGRAPHY = os.environ.get("POLYGRAPHY", "polygraphy")


def measure(cmd):
    """(seconds, peak RSS in MiB) of one child process."""
    t = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"{cmd[0]} exited {code}: {err[-400:]}")
    return time.time() - t, ru.ru_maxrss / 1024


def have_polygraphy():
    try:
        return subprocess.run([POLYGRAPHY, "-v"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


def main():
    poly = have_polygraphy()
    print("| model | phantom s | phantom MiB | ORT plain s | ORT MiB | f64 ref s | ref MiB | Polygraphy s | Polygraphy MiB | time ratio | memory ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for spec in sys.argv[1:]:
        model, extra, poly_extra = (spec.split("|") + ["", ""])[:3]
        extra, poly_extra = shlex.split(extra), shlex.split(poly_extra)
        ph = measure([PHANTOM, "onnx", model, "--quiet", *extra])
        ort = measure([PHANTOM, "run", model, "--runner", "ort", *extra])
        ref = measure([PHANTOM, "run", model, "--runner", "reference", *extra])
        row = [os.path.basename(model), f"{ph[0]:.2f}", f"{ph[1]:.0f}", f"{ort[0]:.2f}", f"{ort[1]:.0f}", f"{ref[0]:.2f}", f"{ref[1]:.0f}"]
        if poly:
            with tempfile.TemporaryDirectory() as d:
                saved = os.path.join(d, "outputs.json")
                base = [POLYGRAPHY, "run", model, "--onnxrt", "--onnx-outputs", "mark", "all", *poly_extra]
                s1 = measure(base + ["--save-outputs", saved])
                s2 = measure(base + ["--load-outputs", saved])
            pt, pm = s1[0] + s2[0], max(s1[1], s2[1])
            row += [f"{pt:.2f}", f"{pm:.0f}", f"{ph[0] / pt:.2f}", f"{ph[1] / pm:.2f}"]
        else:
            row += ["-", "-", "-", "-"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
