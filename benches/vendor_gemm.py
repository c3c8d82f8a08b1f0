#!/usr/bin/env python3
"""phantom's wgpu shaders against the vendor library on the same GPU: PyTorch's matmul (cuBLAS) and conv2d (cuDNN)
at the sizes `benches/wgpu_throughput.rs` measured, in fp32 (TF32 off, as phantom's f32 shaders compute) and fp16,
then one table of GFLOP/s with phantom's share of the vendor's.

usage: python3 benches/vendor_gemm.py WGPU_BENCH_OUTPUT.txt   (the output of `cargo bench --bench wgpu_throughput`)
"""
import re
import sys

import torch


def gflops(fn, flop):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 20
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return flop * reps / (start.elapsed_time(end) / 1e3) / 1e9


def vendor(kind, n, dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    if kind == "matmul":
        a = torch.rand(n, n, device="cuda", dtype=dtype, generator=g) * 2 - 1
        b = torch.rand(n, n, device="cuda", dtype=dtype, generator=g) * 2 - 1
        return gflops(lambda: a @ b, 2.0 * n**3)
    x = torch.rand(1, n, 56, 56, device="cuda", dtype=dtype, generator=g) * 2 - 1
    w = torch.rand(n, n, 3, 3, device="cuda", dtype=dtype, generator=g) * 2 - 1
    return gflops(lambda: torch.nn.functional.conv2d(x, w, padding=1), 2.0 * n * 56 * 56 * n * 9)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"vendor: torch {torch.__version__}, cuBLAS/cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")
    rows = []
    for line in open(sys.argv[1]):
        m = re.match(r"matmul (\d+)x\d+x\d+ (f32|f16 storage, f32 accumulate|f16 storage, f16 accumulate): ([\d.]+)", line)
        if m:
            rows.append(("matmul", int(m[1]), m[2], "", float(m[3])))
        m = re.match(r"conv 3x3 (\d+)ch 56x56 (.+?): direct ([\d.]+) GFLOP/s, implicit GEMM ([\d.]+)", line)
        if m:
            rows.append(("conv", int(m[1]), m[2], "direct", float(m[3])))
            rows.append(("conv", int(m[1]), m[2], "implicit GEMM", float(m[4])))
    print("| shape | phantom mode | phantom GFLOP/s | vendor (torch, same dtype) GFLOP/s | phantom ÷ vendor |")
    print("|---|---|---|---|---|")
    cache = {}
    for kind, n, mode, variant, ours in rows:
        dtype = torch.float32 if mode == "f32" else torch.float16
        key = (kind, n, dtype)
        if key not in cache:
            cache[key] = vendor(kind, n, dtype)
        shape = f"matmul {n}³" if kind == "matmul" else f"conv 3×3 {n}→{n} ch, 56² ({variant})"
        print(f"| {shape} | {mode} | {ours:.0f} | {cache[key]:.0f} | {ours / cache[key]:.4f} |")


if __name__ == "__main__":
    main()
