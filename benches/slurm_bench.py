"""Benchmark: a decoder too big for one machine compared in segments on a real Slurm (issue 57): a one-node Slurm
brought up from Debian's packages (`scripts/cluster/slurm-local.sh`), the README's recipe (`scripts/cluster/slurm.sh`)
with SEGMENT_MEMORY, every phantom process under GNU time. Prints a markdown table: segments, the memory each job
asked for, the largest measured peak against the plan's estimates, the boundary/segments/merge times and the merged
verdict.

usage: python3 benches/slurm_bench.py DIR [PRESET] [--segment-memory 3GiB]   (as root; build first: cargo build
       --release; PRESET a benches/make_llama.py preset, default 7b: 6.7B parameters, 12.6 GiB of fp16 weights)
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = os.environ.get("PYTHON", sys.executable)


def shim(bin_dir, log):
    """A `phantom` on PATH that runs the release build under GNU time, appending peak KiB, seconds and arguments."""
    os.makedirs(bin_dir, exist_ok=True)
    path = os.path.join(bin_dir, "phantom")
    with open(path, "w") as f:
        f.write(f'#!/bin/bash\nexec /usr/bin/time -a -o {log} -f "%M %e $*" {ROOT}/target/release/phantom "$@"\n')
    os.chmod(path, 0o755)


def wait(env, seconds=6 * 3600):
    """Until no job is queued or running."""
    end = time.time() + seconds
    while time.time() < end:
        q = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True).stdout.strip()
        if not q:
            return
        time.sleep(5)
    sys.exit("the jobs did not finish in time")


def table(plan_dir, log):
    plan = json.load(open(os.path.join(plan_dir, "plan.json")))
    est = [s["estimate"]["job_bytes"] for s in plan["segments"]]
    rows = [line.split(None, 2) for line in open(log) if line[:1].isdigit()]
    runs = [(int(k) * 1024, float(s), args) for k, s, args in rows]
    boundary = [r for r in runs if "--boundary" in r[2]]
    segments = [r for r in runs if r[2].startswith("segment") and "--boundary" not in r[2]]
    merge = [r for r in runs if r[2].startswith("merge")]
    report = json.load(open(os.path.join(plan_dir, "report.json")))
    gib = 1 << 30
    ratios = [m / e for (m, _, _), e in zip(segments, est)]
    request = (2 * max(est) + (256 << 20)) / gib
    print("| segments | memory asked per job | largest peak (estimate) | peak / estimate | boundary | segments "
          "(sum, longest) | merge | merged verdict | values compared |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {len(est)} | {request:.1f} GiB | {max(m for m, _, _ in segments) / gib:.2f} GiB ({max(est) / gib:.2f}) "
          f"| {min(ratios):.2f}–{max(ratios):.2f} | {boundary[0][1]:.0f} s, {boundary[0][0] / gib:.1f} GiB "
          f"| {sum(s for _, s, _ in segments):.0f} s, {max(s for _, s, _ in segments):.0f} s "
          f"| {merge[0][1]:.1f} s | {report['verdict']['status']} "
          f"| {report['coverage']['compared']} of {report['coverage']['compared'] + report['coverage']['unchecked']} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("preset", nargs="?", default="7b")
    ap.add_argument("--segment-memory", default="3GiB")
    a = ap.parse_args()
    model = os.path.join(a.dir, a.preset, "llama.onnx")
    if not os.path.exists(model):
        subprocess.run([PYTHON, os.path.join(HERE, "make_llama.py"), os.path.dirname(model), "--preset", a.preset],
                       check=True)
    plan_dir, log = os.path.join(a.dir, f"{a.preset}-plan"), os.path.join(a.dir, f"{a.preset}-time.log")
    for p in (log,):
        if os.path.exists(p):
            os.remove(p)
    subprocess.run(["rm", "-rf", plan_dir], check=True)
    shim(os.path.join(a.dir, "bin"), log)
    slurm = os.path.join(a.dir, "slurm")
    local = os.path.join(ROOT, "scripts/cluster/slurm-local.sh")
    subprocess.run(["bash", local, "up", slurm], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, SLURM_CONF=os.path.join(slurm, "slurm.conf"), MODEL=model, PLAN=plan_dir,
               SEGMENT_MEMORY=a.segment_memory, PATH=os.path.join(a.dir, "bin") + ":" + os.environ["PATH"])
    try:
        subprocess.run(["bash", os.path.join(ROOT, "scripts/cluster/slurm.sh")], env=env, check=True, cwd=a.dir,
                       stdout=subprocess.DEVNULL)
        wait(env)
        table(plan_dir, log)
    finally:
        subprocess.run(["bash", local, "down", slurm], env=env)


if __name__ == "__main__":
    main()
