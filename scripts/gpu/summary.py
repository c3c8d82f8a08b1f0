"""One Markdown row per phantom JSON report in a folder (scripts/gpu/run.sh's): verdict, values compared and
failing, first divergence, the share of its tolerance the final outputs' worst element uses against the f64
reference, the median share over the Conv/MatMul/Gemm values (where TF32 or fp16 shows first), the provider that
ran, and time. Multi-target reports give their agreement conclusion; determinism and check reports their status.

usage: python3 scripts/gpu/summary.py REPORTS_DIR
"""
import json
import os
import statistics
import sys

LINEAR = {"Conv", "MatMul", "Gemm", "ConvTranspose"}


def single(r):
    v = r.get("verdict", {})
    vals = [(n, x) for n in r.get("nodes", []) for x in n.get("values", [])]
    compared = [x for _, x in vals if x.get("metrics")]
    outs = [x["metrics"].get("tolerance_used", 0) for _, x in vals if x.get("is_output") and x.get("metrics")]
    lin = [x["metrics"].get("tolerance_used", 0) for n, x in vals
           if n.get("op_type") in LINEAR and x.get("metrics")]
    fd = v.get("first_divergence") or {}
    fd = fd.get("value") or fd.get("name") or fd.get("node") or ""
    placed = r.get("target", {}).get("facts", {}) or {}
    ep = placed.get("ep") or placed.get("provider") or r.get("target", {}).get("label", "")
    tm = r.get("timings", {})
    t = tm.get("total_ms") or sum(v for v in tm.values() if isinstance(v, (int, float)))
    return [v.get("status", "?"), f"{len(compared)}", f"{v.get('failing_values', '')}", str(fd)[:48],
            f"{max(outs):.2e}" if outs else "", f"{statistics.median(lin):.2e}" if lin else "", str(ep),
            f"{t / 1e3:.1f}" if isinstance(t, (int, float)) else ""]


def multi(r):
    a = r.get("agreement", {})
    fd = a.get("first_disagreement") or {}
    return [r.get("status", "?"), "", "", str(fd.get("value") or fd.get("name") or "")[:48], "", "",
            " + ".join(a.get("labels", [])), a.get("conclusion", "")[:80]]


def main():
    d = sys.argv[1]
    print("| run | verdict | compared | failing | first divergence | outputs: share of tolerance | median share, "
          "Conv/MatMul/Gemm | target | time (s) / note |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in sorted(os.listdir(d)):
        if not f.endswith(".json"):
            continue
        try:
            r = json.load(open(os.path.join(d, f)))
        except (OSError, ValueError) as e:
            print(f"| {f[:-5]} | unreadable: {e} |")
            continue
        row = multi(r) if "agreement" in r else single(r) if "nodes" in r else [
            str(r.get("status", r.get("verdict", "?")))[:40], "", "", "", "", "", "", ""]
        print("| " + " | ".join([f[:-5]] + row) + " |")


if __name__ == "__main__":
    main()
