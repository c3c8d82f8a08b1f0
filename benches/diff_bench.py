#!/usr/bin/env python3
"""Benchmark of `phantom diff` on big dumps: generates two directories of float32 `.npy` layers (GB each side,
default 2), one layer perturbed on B, runs `phantom diff A B` and prints wall time, peak RSS, throughput and the
ratio of peak memory to one side's size (streaming pair by pair keeps it near one pair's tensors, not the dump).

usage: python3 benches/diff_bench.py [GB_PER_SIDE] [PHANTOM_BINARY] [WORK_DIR]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

LAYER_MB = 64


def make(root, gb):
    """A and B of `gb` GB each: layers of LAYER_MB MB, B's middle layer off by 1e-2."""
    n = max(2, int(gb * 1024 / LAYER_MB))
    rng = np.random.default_rng(0)
    elems = LAYER_MB * (1 << 20) // 4
    for side in ("a", "b"):
        os.makedirs(os.path.join(root, side), exist_ok=True)
    for i in range(n):
        x = rng.standard_normal(elems, dtype=np.float32).reshape(-1, 4096)
        np.save(os.path.join(root, "a", f"layer{i}_out.npy"), x)
        if i == n // 2:
            x = x + np.float32(1e-2)
        np.save(os.path.join(root, "b", f"layer{i}_out.npy"), x)
    return n


def main():
    gb = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    exe = sys.argv[2] if len(sys.argv) > 2 else "target/release/phantom"
    work = sys.argv[3] if len(sys.argv) > 3 else None
    root = tempfile.mkdtemp(dir=work)
    try:
        t0 = time.time()
        n = make(root, gb)
        print(f"generated 2 × {n} layers of {LAYER_MB} MB ({gb:g} GB per side) in {time.time() - t0:.1f} s")
        cmd = ["/usr/bin/time", "-v", exe, "diff", os.path.join(root, "a"), os.path.join(root, "b"),
               "--order", "layer{layer}_{stage}", "--show", "3"]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.time() - t0
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 1024
        first = re.search(r"first divergent: `([^`]+)`", p.stdout)
        side_mb = n * LAYER_MB
        print(f"phantom diff: exit {p.returncode}, first divergent {first.group(1) if first else None} "
              f"(expected layer{n // 2}_out)")
        print(f"| per side | layers | wall | throughput (both sides) | peak RSS | peak / one side |")
        print(f"|---|---|---|---|---|---|")
        print(f"| {side_mb / 1024:.2f} GB | {n} | {wall:.1f} s | {2 * side_mb / wall:.0f} MB/s | {rss:.0f} MiB | "
              f"{rss / side_mb:.3f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
