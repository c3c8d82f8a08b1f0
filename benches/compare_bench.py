"""Benchmark: phantom's full comparison (f64 reference + ORT, every intermediate) against a plain ORT run, ORT with
every value exposed, a plain f64 reference run, phantom with every node run alone (`--attribute-all`, as before
issue 34's screening), and Polygraphy's mark-all save-and-compare of ORT alone. Prints wall
time and peak RSS of each (as separate processes, all in one run so the ratios hold on a noisy machine) and the
ratios phantom / Polygraphy and f64 reference / ORT plain.

usage: python3 benches/compare_bench.py "MODEL.onnx|phantom args|polygraphy args" ...   (build first: cargo build --release)
e.g.   python3 benches/compare_bench.py "m.onnx|--shape x=1x3x48x320|--input-shapes x:[1,3,48,320]"
Polygraphy: `pip install polygraphy onnx onnxruntime numpy` (skipped when missing).
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

PHANTOM = os.environ.get("PHANTOM", "target/release/phantom")
POLYGRAPHY = os.environ.get("POLYGRAPHY", "polygraphy")


REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))


def measure(cmd, env=None):
    """The fastest of BENCH_REPEAT runs (default 3; this machine's timings vary by 2x from run to run):
    (seconds, peak RSS in MiB, milliseconds the run itself reported or None)."""
    return min((measure_once(cmd, env) for _ in range(REPEAT)), key=lambda m: m[0])


def measure_once(cmd, env=None):
    """(seconds, peak RSS in MiB, milliseconds the run itself reported or None) of one child process."""
    t = time.time()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env={**os.environ, **(env or {})})
        _, status, ru = os.wait4(p.pid, 0)
        seconds = time.time() - t
        out.seek(0)
        err.seek(0)
        text, error = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"{cmd[0]} exited {code}: {error[-400:]}")
    run_ms = re.search(r"values \(.*\) in ([0-9.]+) ms", text)
    return seconds, ru.ru_maxrss / 1024, float(run_ms.group(1)) if run_ms else None


def have_polygraphy():
    try:
        return subprocess.run([POLYGRAPHY, "-v"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


def main():
    poly = have_polygraphy()
    print("| model | phantom | phantom --attribute-all | f64 reference | f64 reference, tract kernels only | ORT plain | ORT every value | Polygraphy | time ratio | memory ratio | ref / ORT plain (process; run alone) | phantom / (ref + ORT every value) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for spec in sys.argv[1:]:
        model, extra, poly_extra = (spec.split("|") + ["", ""])[:3]
        extra, poly_extra = shlex.split(extra), shlex.split(poly_extra)
        ph = measure([PHANTOM, "onnx", model, "--quiet", *extra])
        ph_all = measure([PHANTOM, "onnx", model, "--quiet", "--attribute-all", *extra])
        ref = measure([PHANTOM, "run", model, "--runner", "reference", *extra])
        ref_tract = measure([PHANTOM, "run", model, "--runner", "reference", *extra], {"PHANTOM_TRACT_KERNELS": "1"})
        ort = measure([PHANTOM, "run", model, "--runner", "target", *extra])
        every = measure([PHANTOM, "run", model, "--runner", "target", "--all-values", *extra])
        cell = lambda m: f"{m[0]:.2f} s, {m[1]:.0f} MiB"
        row = [os.path.basename(model), cell(ph), cell(ph_all), cell(ref), cell(ref_tract), cell(ort), cell(every)]
        if poly:
            with tempfile.TemporaryDirectory() as d:
                saved = os.path.join(d, "outputs.json")
                base = [POLYGRAPHY, "run", model, "--onnxrt", "--onnx-outputs", "mark", "all", *poly_extra]
                s1 = measure_once(base + ["--save-outputs", saved])
                s2 = measure_once(base + ["--load-outputs", saved])
            pt, pm = s1[0] + s2[0], max(s1[1], s2[1])
            row += [f"{pt:.2f} s, {pm:.0f} MiB", f"{ph[0] / pt:.3f}", f"{ph[1] / pm:.2f}"]
        else:
            row += ["-", "-", "-"]
        row.append(f"{ref[0] / ort[0]:.2f} (run alone: {ref[2] / ort[2]:.2f})")
        row.append(f"{ph[0] / (ref[0] + every[0]):.2f}")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
