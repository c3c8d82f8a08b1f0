"""Runs `phantom onnx --ep wgpu` on every case of the conformance suite (written by cases.py) that ONNX Runtime CPU
runs and that has a float input, and judges what the GPU computed:

- pass: the verdict is clean (fp32) or clean/precision-limited (fp16: f16 arithmetic is judged by the precision
  verdicts, never drift), and every float node ran on the device (constants and integer shape arithmetic may run
  on the host: they are exact wherever they run);
- host: the verdict is right but some float node ran on the host ("not checked on GPU"), with the first one's op
  and reason;
- fail: any other verdict, or an exit code other than 0/1.

The reference side is judged by run.py (the suite's outputs, in f64); this harness judges the shaders against that
reference.

usage: python3 scripts/conformance/wgpu.py CASES PHANTOM [--precision fp32|fp16] [--jobs N] [--only SUBSTRING]
           [--results OUT.json] [--expectations FILE | --write-expectations FILE] [--table OUT.md]
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from onnx import load_tensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the reference harness: expectations files, error lines)

TIMEOUT_S = 120
FLOAT_TYPES = {1, 10, 11, 16}  # float, float16, double, bfloat16


def has_float_input(case_dir):
    data = os.path.join(case_dir, "test_data_set_0")
    for f in sorted(os.listdir(data)):
        if f.startswith("input_"):
            try:
                if load_tensor(os.path.join(data, f)).data_type in FLOAT_TYPES:
                    return True
            except Exception:
                pass
    return False


def host_nodes(report):
    """The nodes that computed floats on the host: (op, reason)."""
    out = []
    for n in report.get("nodes", []):
        p = n.get("target_placement")
        if p and p.get("kind") == "not_checked_on_gpu":
            out.append((n["op_type"], p.get("reason", "")))
    return out


def judge(case, cases_dir, phantom, precision):
    case_dir = os.path.join(cases_dir, case["name"])
    model = os.path.join(case_dir, "model.onnx")
    data = os.path.join(case_dir, "test_data_set_0")
    with tempfile.TemporaryDirectory(prefix="phantom-wgpu-") as tmp:
        rep = os.path.join(tmp, "report.json")
        cmd = [phantom, "onnx", model, "--input", data, "--ep", "wgpu", "--precision", precision, "--json", rep]
        env = dict(os.environ, RAYON_NUM_THREADS="1", NO_COLOR="1")
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            return "fail", f"timeout after {TIMEOUT_S} s", []
        if p.returncode not in (0, 1) or not os.path.exists(rep):
            return "fail", f"exit {p.returncode}: {run.first_error(p.stderr.replace(case_dir + '/', ''))}", []
        report = json.load(open(rep))
    status = report["verdict"]["status"]
    allowed = ("clean",) if precision == "fp32" else ("clean", "precision_limited")
    host = host_nodes(report)
    if status not in allowed:
        return "fail", f"verdict {status}: {report['verdict'].get('headline', '')}"[:300], host
    if host:
        op, why = host[0]
        return "host", f"{len(host)} node(s) on the host: {op}: {why}"[:300], host
    return "pass", "", []


def table(results, precision):
    by = collections.defaultdict(lambda: [0, 0, 0])
    for r in results:
        row = by[r["op"]]
        row[0] += r["result"] == "pass"
        row[1] += r["result"] == "host"
        row[2] += 1
    p = sum(r["result"] == "pass" for r in results)
    lines = [f"{len(results)} cases with a float input that ONNX Runtime runs, `--ep wgpu --precision {precision}` "
             f"on lavapipe: {p} ({100 * p / max(1, len(results)):.1f}%) wholly on the device with a right verdict.",
             "", "| operator | wholly on the device, right verdict | a float node on the host | cases |",
             "|---|---|---|---|"]
    for op in sorted(by):
        a, b, c = by[op]
        lines.append(f"| {op} | {a} | {b} | {c} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("phantom")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--only")
    ap.add_argument("--results")
    ap.add_argument("--expectations")
    ap.add_argument("--write-expectations")
    ap.add_argument("--table")
    a = ap.parse_args()
    cases = [c for c in json.load(open(os.path.join(a.cases, "cases.json")))["cases"]
             if c["tensors"] and c["ort_runs"] and not c["random"] and not c.get("sequences")]
    if a.only:
        cases = [c for c in cases if a.only in c["name"]]
    cases = [c for c in cases if has_float_input(os.path.join(a.cases, c["name"]))]
    with ThreadPoolExecutor(a.jobs) as pool:
        judged = list(pool.map(lambda c: judge(c, a.cases, a.phantom, a.precision), cases))
    results = [dict(name=c["name"], op=c["op"], ort_runs=True, result=res, why=why,
                    host_ops=sorted({op for op, _ in host}))
               for c, (res, why, host) in zip(cases, judged)]
    print(table(results, a.precision).splitlines()[0])
    if a.results:
        json.dump(results, open(a.results, "w"), indent=1)
    if a.table:
        open(a.table, "w").write(table(results, a.precision))
    if a.write_expectations:
        run.write_expectations(a.write_expectations, results)
    if a.expectations:
        listed = run.read_expectations(a.expectations)
        new = [r for r in results if r["result"] != "pass" and r["name"] not in listed]
        fixed = [r for r in results if r["result"] == "pass" and r["name"] in listed]
        for r in new:
            print(f"NEW FAILURE {r['name']}: {r['result']}: {r['why']}")
        for r in fixed:
            print(f"NOW PASSES {r['name']} (listed as: {listed[r['name']]}): remove it from {a.expectations}")
        if new or fixed:
            sys.exit(1)


if __name__ == "__main__":
    main()
