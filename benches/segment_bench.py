#!/usr/bin/env python3
"""Segment-wise comparison, measured: for K = 1, 2, 4, 8 segments (or --ks), `phantom plan` + `phantom segment
--boundary` + every `phantom segment --index I` (JOBS at a time) + `phantom merge`, with each process's peak RSS (GNU
time) and wall time. With --ulimit-gib N every phantom process runs under an N GiB address-space limit (RLIMIT_AS,
as `ulimit -v`), and the whole-model run is tried under it first.

usage: python3 benches/segment_bench.py MODEL [--ks 1,2,4,8] [--jobs 2] [--ulimit-gib 6] [-- PHANTOM ARGS...]
The model for the headline numbers: python3 benches/make_big_decoder.py /tmp/big --gb 4 (8 GiB of f64 weights).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

PHANTOM = os.environ.get("PHANTOM", "target/release/phantom")


def run(args, limit_gib):
    """Runs phantom under GNU time; (exit code, seconds, peak RSS MiB, last line of output)."""
    def limit():
        if limit_gib:
            b = int(limit_gib * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (b, b))
    with tempfile.NamedTemporaryFile("r") as t:
        start = time.time()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", t.name, PHANTOM, *args], preexec_fn=limit,
                           capture_output=True, text=True)
        dt = time.time() - start
        kb = t.read().strip().splitlines()
    rss = int(kb[-1]) / 1024 if kb and kb[-1].isdigit() else float("nan")
    lines = (p.stdout + p.stderr).strip().splitlines()
    return p.returncode, dt, rss, lines[-1] if lines else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ulimit-gib", type=float, default=0)
    ap.add_argument("rest", nargs="*")
    a = ap.parse_args()
    lim = a.ulimit_gib
    if lim:
        code, dt, rss, last = run(["onnx", a.model, "--quiet", *a.rest], lim)
        print(f"whole model under a {lim:g} GiB limit: exit {code}, {dt:.1f} s, peak {rss:.0f} MiB: {last[:160]}")
    print("| K | total s | plan s | boundary pass s (peak MiB) | segment jobs s | peak MiB per segment job (plan's estimate) | "
          "merge s | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for k in [int(x) for x in a.ks.split(",")]:
        d = tempfile.mkdtemp(prefix="phantom-seg-bench")
        plan = os.path.join(d, "plan")
        t0 = time.time()
        code, t_plan, _, last = run(["plan", a.model, "-o", plan, "--segments", str(k), *a.rest], lim)
        if code:
            print(f"| {k} | plan failed: {last[:120]} |")
            continue
        code, t_b, rss_b, last = run(["segment", plan, "--boundary"], lim)
        if code:
            print(f"| {k} | boundary pass failed: {last[:120]} |")
            continue
        t1 = time.time()
        with ThreadPoolExecutor(a.jobs) as ex:
            jobs = list(ex.map(lambda i: run(["segment", plan, "--index", str(i), "--quiet"], lim), range(k)))
        t_s = time.time() - t1
        bad = [j for j in jobs if j[0]]
        if bad:
            print(f"| {k} | a segment failed: {bad[0][3][:120]} |")
            continue
        code, t_m, _, last = run(["merge", plan, "--quiet"], lim)
        total = time.time() - t0
        with open(os.path.join(plan, "plan.json")) as f:
            estimates = [seg["estimate"]["job_bytes"] / (1 << 20) for seg in json.load(f)["segments"]]
        peaks = " / ".join(f"{j[2]:.0f} (est. {e:.0f})" for j, e in zip(jobs, estimates))
        print(f"| {k} | {total:.1f} | {t_plan:.1f} | {t_b:.1f} ({rss_b:.0f}) | {t_s:.1f} | {peaks} | {t_m:.1f} | "
              f"{last[:60]} |", flush=True)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
