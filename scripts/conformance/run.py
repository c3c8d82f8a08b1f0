"""Runs phantom on every case written by cases.py and judges it:

- a case ONNX Runtime CPU runs: `phantom onnx model.onnx --input test_data_set_0 --dump D --json R` must exit 0 with
  a clean verdict, every node computed in f64, and the reference's outputs equal to the suite's (where ONNX
  Runtime's own outputs are not the suite's, any verdict but clean is right);
- any other case: `phantom run model.onnx --input test_data_set_0 --dump D` (the reference alone) must give the
  suite's outputs.

Outputs are equal as the suite defines it: floats within its rtol/atol (1e-3/1e-7 unless the case says otherwise),
NaN where the suite has NaN, the same infinities; integers, booleans and strings exactly. The suite computes its
expected values in the case's own types (float16, float32); where the reference differs from them, it still passes
when it equals the ONNX reference implementation run on the model widened to float64 (a second oracle). Random ops (Bernoulli,
training-mode Dropout) are judged by shape, support and mean.

usage: python3 scripts/conformance/run.py CASES PHANTOM [--jobs N] [--only SUBSTRING] [--results OUT.json]
           [--expectations FILE | --write-expectations FILE] [--table OUT.md]
With --expectations it exits 1 when a case fails that FILE does not list, or a listed case passes.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from onnx import load_tensor, numpy_helper

TIMEOUT_S = 120

# Cases whose expected outputs the spec contradicts: the reference follows the spec (and ONNX Runtime) and stays
# listed as failing, with the reason, rather than counted as a reference that disagrees with the suite.
SUITE_BUGS = {
    "test_maxunpool_export_with_output_shape":
        "onnx/onnx#2398: the generator scatters into the inferred shape and pads it, where the spec scatters into "
        "output_shape, as ONNX Runtime does",
}

# Cases whose expected values are one implementation's choice where the spec leaves room: counted as spec-undefined
# (apart from right and wrong) when the reference stays within the stated bound of the suite's values, with the
# reason; wrong when it does not.
JPEG = ("JPEG decoders may differ in their inverse DCT and chroma upsampling (ITU T.81 bounds the error, it does not "
        "fix the pixels): the suite's pixels are libjpeg-turbo's, the reference's zune-jpeg's")
JPEG_LEVELS = 2  # the most two conforming decoders' 8-bit pixels are allowed to differ here
UNSPECIFIED = {f"test_image_decoder_decode_jpeg_{k}": JPEG for k in ("rgb", "bgr", "grayscale")}


def unspecified(case, case_dir, outs, bad):
    """A case of UNSPECIFIED: ("undefined", why) when every output is within JPEG_LEVELS of the suite's, else
    ("wrong", why)."""
    worst = max(int(np.abs(o.astype(np.int64) - expected(case_dir, k).astype(np.int64)).max())
                for k, o in enumerate(outs))
    if worst > JPEG_LEVELS:
        return "wrong", f"reference differs from the suite by up to {worst} levels, more than {JPEG_LEVELS}: {bad}"
    return "undefined", f"{UNSPECIFIED[case['name']]}; within {worst} of {JPEG_LEVELS} levels: {bad}"

# The narrow integer types a float `Cast` may target, by ONNX element type: (name, least, greatest value). The spec's
# Cast leaves a float out of the target's range undefined ("fixed point: undefined if OOR"); the suite's expected
# values for such elements are whatever the installed ml_dtypes computes (0.6 wraps, 0.7 writes 0). ONNX Runtime's
# CPU kernel defines it: round half away from zero, then keep the low bits (measured on 1.31.1), and the reference
# does the same. Such elements are judged against that, the others against the suite, and the case is counted as
# spec-undefined, apart from right and wrong.
NARROW_INTS = {21: ("uint4", 0, 15), 22: ("int4", -8, 7), 25: ("uint2", 0, 3), 26: ("int2", -2, 1)}


def onnx_runtime_narrow_cast(x, lo, hi):
    """ONNX Runtime's CPU `Cast` of floats `x` to the integer type [lo, hi]: round half away from zero, wrap."""
    x = np.asarray(x, np.float64)
    fin = np.isfinite(x)
    r = np.where(fin, np.sign(x) * np.floor(np.abs(x) + 0.5), 0.0)
    span = hi - lo + 1
    w = np.mod(r, span)
    return np.where(fin, np.where(w > hi, w - span, w), 0.0)


def undefined_cast(case, case_dir, model, outs):
    """For a `Cast`/`CastLike` case from floats to a narrow integer type with inputs out of its range: ("undefined",
    why) when the reference equals the suite in range and ONNX Runtime's behaviour out of it, ("wrong", why) when
    not; None for any other case."""
    import onnx
    if case["op"] not in ("Cast", "CastLike") or len(outs) != 1 or outs[0] is None:
        return None
    to = onnx.load(model, load_external_data=False).graph.output[0].type.tensor_type.elem_type
    x = given(case_dir, 0)
    if to not in NARROW_INTS or not is_float(x):
        return None
    name, lo, hi = NARROW_INTS[to]
    x = x.astype(np.float64)
    ort = onnx_runtime_narrow_cast(x, lo, hi)
    rounded = np.sign(x) * np.floor(np.abs(x) + 0.5)
    out = ~np.isfinite(x) | (rounded < lo) | (rounded > hi)
    if not out.any():
        return None
    got, want = outs[0].astype(np.float64), expected(case_dir, 0).astype(np.float64)
    if got.shape != want.shape:
        return "wrong", f"reference differs from the suite: shape {list(got.shape)}, the suite's {list(want.shape)}"
    inside = int((got[~out] != want[~out]).sum())
    outside = int((got[out] != ort[out]).sum())
    if inside or outside:
        return "wrong", (f"reference differs: {inside} elements in range differ from the suite's, {outside} out of "
                         f"range from ONNX Runtime's (rounded half away from zero, then wrapped)")
    return "undefined", (f"{int(out.sum())} of {out.size} inputs lie outside {name}'s [{lo}, {hi}], which the spec "
                         "leaves undefined: the reference does what ONNX Runtime's CPU kernel does (rounded half away "
                         "from zero, then wrapped); the elements in range equal the suite's")


def expected(case_dir, k):
    return numpy_helper.to_array(load_tensor(os.path.join(case_dir, "test_data_set_0", f"output_{k}.pb")))


def expected_sequence(case_dir, k):
    """The suite's output `k` read as a sequence of arrays."""
    import onnx
    s = onnx.SequenceProto()
    with open(os.path.join(case_dir, "test_data_set_0", f"output_{k}.pb"), "rb") as f:
        s.ParseFromString(f.read())
    return numpy_helper.to_list(s)


def sequence_mismatch(dump, name, want, rtol, atol):
    """Why the reference's elements `name[j]` of a sequence output are not the suite's `want`, or None."""
    index = json.load(open(os.path.join(dump, "index.json")))
    by_name = {v["name"]: v for v in index["values"]}
    if f"{name}[{len(want)}]" in by_name:
        return f"more than the suite's {len(want)} elements"
    for j, w in enumerate(want):
        v = by_name.get(f"{name}[{j}]")
        if v is None or v.get("reference") is None:
            return f"no reference value for element {j} of {len(want)}"
        m = mismatch(np.load(os.path.join(dump, v["reference"])), w, rtol, atol)
        if m:
            return f"element {j}: {m}"
    return None


def given(case_dir, k):
    return numpy_helper.to_array(load_tensor(os.path.join(case_dir, "test_data_set_0", f"input_{k}.pb")))


def is_float(a):
    """numpy floats, and the ml_dtypes ones the onnx package reads bfloat16 and float8 into."""
    return a.dtype.kind in "fc" or str(a.dtype).startswith(("bfloat", "float"))


def mismatch(got, want, rtol, atol, exact=False):
    """Why `got` is not the suite's `want`, or None when it is. `exact`: floats must be the suite's bit for bit (a
    cast's rounding is defined exactly; NaN matches NaN)."""
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, the suite's {list(want.shape)}"
    if exact and is_float(want):
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~((g == w) | np.isnan(g) & np.isnan(w))
        return f"{int(bad.sum())} elements differ from the suite's exactly rounded values" if bad.any() else None
    if is_float(want):
        g, w = got.astype(np.float64), want.astype(np.float64)
        nan = np.isnan(w)
        if (np.isnan(g) != nan).any():
            return "NaN where the suite has a number, or a number where it has NaN"
        inf = np.isinf(w)
        if (g[inf] != w[inf]).any() or np.isinf(g[~inf]).any():
            return "infinities differ from the suite's"
        fin = ~nan & ~inf
        err = np.abs(g[fin] - w[fin])
        allowed = atol + rtol * np.abs(w[fin])
        if want.dtype == np.float16 or str(want.dtype) == "bfloat16":
            # The suite computes 16-bit cases in their type (every step rounded); the f64 reference is exact, so the
            # two may differ by the suite's own rounding: one unit in the last place of the type is allowed.
            spacing = np.spacing(np.abs(w[fin]).astype(np.float32)).astype(np.float64)
            ulp = spacing * (2.0 ** 16 if str(want.dtype) == "bfloat16" else 2.0 ** 13)
            allowed = np.maximum(allowed, ulp)
        bad = err > allowed
        if bad.any():
            return f"max abs error {err.max():.3g} (rtol {rtol:g}, atol {atol:g}; {int(bad.sum())} elements)"
        return None
    if want.dtype.kind in "OUS":
        g = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else str(s))(got) if got.size else got
        w = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else str(s))(want) if want.size else want
        return None if np.array_equal(g, w) else "strings differ"
    if got.dtype.kind in "fc" and not np.all(got == np.round(got)):
        return "fractional values where the suite has integers"
    return None if np.array_equal(got.astype(np.float64), want.astype(np.float64)) else \
        f"{int((got.astype(np.float64) != want.astype(np.float64)).sum())} elements differ (exact type)"


def random_mismatch(case, case_dir, outs):
    """Judges a random op's outputs by shape, support and mean (they cannot equal the suite's draws)."""
    for k, got in enumerate(outs):
        want = expected(case_dir, k)
        if got.shape != want.shape:
            return f"output {k}: shape {list(got.shape)}, the suite's {list(want.shape)}"
    name = case["name"]
    if "bernoulli" in name:
        p, y = given(case_dir, 0).astype(np.float64), outs[0].astype(np.float64)
        if not np.isin(y, [0.0, 1.0]).all():
            return "Bernoulli drew values other than 0 and 1"
        sd = np.sqrt((p * (1 - p)).sum()) + 1e-9
        if abs(y.sum() - p.sum()) > 5 * sd + 1:
            return f"Bernoulli mean {y.mean():.3f}, probabilities' mean {p.mean():.3f}"
        return None
    x = given(case_dir, 0).astype(np.float64)
    ratio = float(given(case_dir, 1)) if case["inputs"] > 1 else 0.5
    y = outs[0].astype(np.float64)
    kept = y != 0
    scale = 1.0 / (1.0 - ratio) if ratio < 1 else 0.0
    if not np.allclose(y[kept], x[kept] * scale, rtol=1e-6):
        return "Dropout kept values not scaled by 1/(1-ratio)"
    n = x.size
    dropped = (~kept & (x != 0)).sum()
    if abs(dropped - ratio * n) > 5 * np.sqrt(n * ratio * (1 - ratio)) + 1:
        return f"Dropout dropped {dropped} of {n} at ratio {ratio}"
    if len(outs) > 1 and not np.array_equal(outs[1].astype(bool), kept | (x == 0) & outs[1].astype(bool)):
        return "Dropout mask does not match the kept values"
    return None


FLOATS = {1, 10, 16}  # float, float16, bfloat16


def narrowing(from_type, to):
    """Whether a Cast from element type `from_type` to `to` rounds (as phantom's reference does): onto float16 or
    bfloat16 from any other numeric type, onto float32 from double."""
    if to in (10, 16):
        return from_type not in (0, 8, 9, to)
    return to == 1 and from_type == 11


def widened(m):
    """The model with every float32/float16/bfloat16 type (values, initializers, constants, Cast targets) made
    float64, but for the roundings its narrowing casts ask for: the arithmetic phantom's reference claims, for the
    ONNX reference implementation to run."""
    import onnx
    from onnx import helper, numpy_helper

    try:
        inferred = onnx.shape_inference.infer_shapes(m).graph
        types = {v.name: v.type.tensor_type.elem_type
                 for v in list(inferred.input) + list(inferred.output) + list(inferred.value_info)}
        types.update({t.name: t.data_type for t in inferred.initializer})
    except Exception:
        types = {}

    def tensor(t):
        if t.data_type in FLOATS:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))

    def rounds_to(n):
        """The type a Cast or CastLike of the top graph rounds onto, or None."""
        to = next((a.i for a in n.attribute if a.name == "to"), None) if n.op_type == "Cast" else \
            types.get(n.input[1]) if n.op_type == "CastLike" and len(n.input) > 1 else None
        return to if to and narrowing(types.get(n.input[0], 0) if n.input else 0, to) else None

    def graph(g, top):
        for v in list(g.input) + list(g.output) + list(g.value_info):
            if v.type.tensor_type.elem_type in FLOATS:
                v.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
        for t in g.initializer:
            tensor(t)
        nodes = []
        for n in g.node:
            to = rounds_to(n) if top else None
            for a in n.attribute:
                if a.name in ("to", "dtype", "output_dtype") and a.type == onnx.AttributeProto.INT and a.i in FLOATS:
                    a.i = onnx.TensorProto.DOUBLE
                if a.type == onnx.AttributeProto.TENSOR:
                    tensor(a.t)
                if a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g, False)
                for sub in a.graphs:
                    graph(sub, False)
            nodes.append(n)
            if to:
                y = n.output[0]
                n.output[0] = y + "__wide"
                nodes.append(helper.make_node("Cast", [y + "__wide"], [y + "__narrow"], to=to))
                nodes.append(helper.make_node("Cast", [y + "__narrow"], [y], to=onnx.TensorProto.DOUBLE))
        del g.node[:]
        g.node.extend(nodes)
    graph(m.graph, True)
    return m


def float64_oracle_agrees(model, case_dir, names, outs):
    """Whether `onnx.reference.ReferenceEvaluator`, fed the case's float inputs widened to float64, gives the
    reference's outputs (relative 1e-9): the suite computes its expected values in the case's own types, so a
    float16 or float32 expectation can be off by that type's rounding where the float64 reference is not."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    m = widened(onnx.load(model))
    feeds = {}
    for k, i in enumerate(m.graph.input):
        x = given(case_dir, k)
        feeds[i.name] = x.astype(np.float64) if is_float(x) else x
    try:
        want = ReferenceEvaluator(m).run(None, feeds)
    except Exception:
        return False
    for got, w in zip(outs, want):
        w = np.asarray(w)
        if got is None or w.dtype.kind != "f" or w.dtype != np.float64 or got.shape != w.shape:
            return False
        if not np.allclose(got.astype(np.float64), w, rtol=1e-9, atol=1e-12, equal_nan=True):
            return False
    return True


def reference_outputs(dump, names):
    """The reference's value of each output name from a `--dump` directory (None where it has none, with why)."""
    index = json.load(open(os.path.join(dump, "index.json")))
    by_name = {v["name"]: v for v in index["values"]}
    outs, why = [], None
    for n in names:
        v = by_name.get(n)
        if v is None or v.get("reference") is None:
            why = why or f"no reference value for output `{n}`" + (f": {v['reason']}" if v else "")
            outs.append(None)
        else:
            outs.append(np.load(os.path.join(dump, v["reference"])))
    return outs, why


def not_f64(report):
    """The nodes the report says were not computed in f64."""
    return [n for n in report.get("nodes", []) if n.get("reference", {}).get("kind") in ("reduced", "unavailable")]


def first_error(stderr):
    lines = [l.strip() for l in stderr.splitlines() if l.strip() and "XDG_RUNTIME_DIR" not in l]
    err = [l for l in lines if l.startswith("error")]
    return (err or lines or ["(no message)"])[0][:240]


def judge(case, cases_dir, phantom):
    case_dir = os.path.join(cases_dir, case["name"])
    model = os.path.join(case_dir, "model.onnx")
    data = os.path.join(case_dir, "test_data_set_0")
    with tempfile.TemporaryDirectory(prefix="phantom-conf-") as tmp:
        dump, rep = os.path.join(tmp, "dump"), os.path.join(tmp, "report.json")
        if case["ort_runs"]:
            cmd = [phantom, "onnx", model, "--input", data, "--dump", dump, "--json", rep]
        else:
            cmd = [phantom, "run", model, "--runner", "reference", "--input", data, "--dump", dump]
        env = dict(os.environ, RAYON_NUM_THREADS="1", NO_COLOR="1")
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            return "fail", f"timeout after {TIMEOUT_S} s"
        stderr = p.stderr.replace(case_dir + "/", "")
        if p.returncode == 2 or not os.path.exists(dump):
            return "fail", f"exit {p.returncode}: {first_error(stderr)}"
        import onnx
        names = [o.name for o in onnx.load(model, load_external_data=False).graph.output]
        if case.get("sequences"):
            return judge_sequences(case, case_dir, dump, names, p, stderr, rep)
        outs, why = reference_outputs(dump, names)
        if why:
            return "fail", f"reference: {why}"
        undefined = undefined_cast(case, case_dir, model, outs)
        if undefined:
            return undefined
        # A cast's rounding is defined exactly, and the float64 oracle (which widens the cast) does not compute it.
        exact = case["op"] in ("Cast", "CastLike")
        if case["random"]:
            bad = random_mismatch(case, case_dir, outs)
        else:
            bad = next((f"output {k} `{n}`: {m}" for k, (n, o) in enumerate(zip(names, outs))
                        if (m := mismatch(o, expected(case_dir, k), case["rtol"], case["atol"], exact))), None)
        if bad and not exact and float64_oracle_agrees(model, case_dir, names, outs):
            return "pass", f"the suite's expected values are off by their own rounding ({bad}); the reference " \
                           "equals the ONNX reference implementation run in float64"
        if bad and case["name"] in SUITE_BUGS:
            return "fail", f"the suite's expected output contradicts the spec ({SUITE_BUGS[case['name']]}): {bad}"
        if bad and case["name"] in UNSPECIFIED:
            return unspecified(case, case_dir, outs, bad)
        if bad:
            return "wrong", f"reference differs from the suite: {bad}"
        if case["ort_runs"]:
            report = json.load(open(rep))
            status = report["verdict"]["status"]
            if not case["ort_matches"] and status != "clean":
                # ONNX Runtime's own output is not the suite's here: a verdict that says so is the right one.
                return "pass", f"ONNX Runtime differs from the suite; phantom's verdict: {status}"
            if status != "clean":
                return "fail", f"verdict {status} (exit {p.returncode}): {verdict_why(report)}"[:300]
            reduced = not_f64(report)
            if reduced:
                n = reduced[0]
                return "fail", (f"{len(reduced)} node(s) not in f64: {n['op_type']}: "
                               f"{n['reference'].get('reason', '')}")[:300]
        elif p.returncode != 0:
            return "fail", f"exit {p.returncode}: {first_error(stderr)}"
    return "pass", ""


def judge_sequences(case, case_dir, dump, names, p, stderr, rep):
    """A case with sequence inputs or outputs: each output compared with the suite's, a sequence element by element
    (phantom names element j of sequence output `s` as `s[j]`); then the verdict as for any case."""
    for k, n in enumerate(names):
        if k in case.get("sequence_outputs", []):
            bad = sequence_mismatch(dump, n, expected_sequence(case_dir, k), case["rtol"], case["atol"])
        else:
            outs, why = reference_outputs(dump, [n])
            if why:
                return "fail", f"reference: {why}"
            bad = mismatch(outs[0], expected(case_dir, k), case["rtol"], case["atol"])
        if bad:
            return "wrong", f"reference differs from the suite: output {k} `{n}`: {bad}"
    if case["ort_runs"]:
        status = json.load(open(rep))["verdict"]["status"]
        if status != "clean":
            return "fail", f"verdict {status} (exit {p.returncode})"
    elif p.returncode != 0:
        return "fail", f"exit {p.returncode}: {first_error(stderr)}"
    return "pass", ""


def read_expectations(path):
    listed = {}
    if os.path.exists(path):
        for line in open(path):
            if line.strip() and not line.startswith("#"):
                name, _, why = line.rstrip("\n").partition("\t")
                listed[name] = why
    return listed


def write_expectations(path, results, script="run.py", what="ONNX conformance cases"):
    with open(path, "w") as f:
        f.write(f"# {what} that phantom does not pass yet, with the reason it gave (tab-separated); `undefined:` marks\n"
                "# a case whose expected values the spec leaves undefined, judged against ONNX Runtime's behaviour.\n"
                "# tests/it/conformance.rs fails when a case not listed here fails, or a listed case passes:\n"
                f"# regenerate with scripts/conformance/{script} ... --write-expectations this-file.\n")
        for r in sorted(results, key=lambda r: r["name"]):
            if r["result"] != "pass":
                f.write(f"{r['name']}\t{r['result']}: {r['why']}\n")


def verdict_why(report):
    """What a report says of a verdict that is not clean: why values went unchecked, else the culprits, else the
    first divergent value."""
    verdict, coverage = report["verdict"], report.get("coverage") or {}
    unchecked = coverage.get("unchecked_by_reason") or {}
    if unchecked:
        return "; ".join(f"{n} unchecked: {why}" for why, n in unchecked.items())
    culprits = [c.get("node", "?") for c in verdict.get("culprits") or []]
    if culprits:
        return "culprits " + ", ".join(culprits)
    first = verdict.get("first_divergence")
    return f"first divergence {first.get('value', '') if isinstance(first, dict) else first}" if first else ""


def check_expectations(path, results):
    """Exits 1 when a case fails that the file at `path` does not list, or a listed case passes (the list only
    shrinks), naming each."""
    listed = read_expectations(path)
    new = [r for r in results
           if r["result"] != "pass" and not listed.get(r["name"], "").startswith(r["result"] + ":")]
    fixed = [r for r in results if r["result"] == "pass" and r["name"] in listed]
    for r in new:
        print(f"NEW FAILURE {r['name']}: {r['result']}: {r['why']}")
    for r in fixed:
        print(f"NOW PASSES {r['name']} (listed as: {listed[r['name']]}): remove it from {path}")
    if new or fixed:
        sys.exit(1)


def table(results):
    """Markdown page: the summary, the spec-undefined cases on a line of their own, how to rerun it, and cases passing
    of cases per operator."""
    by = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    for r in results:
        row = by[r["op"]]
        k = 0 if r["ort_runs"] else 2
        row[k] += r["result"] == "pass"
        row[k + 1] += r["result"] != "undefined"
        row[4] += r["result"] == "undefined"
    undefined = sorted(r["name"] for r in results if r["result"] == "undefined")
    lines = ["# How complete the reference is: the ONNX conformance suite", "",
             "Generated by `scripts/conformance/run.py` from the node cases of the pinned `onnx` package "
             "(`tests/it/conformance.rs` runs it in `cargo test`, in the environment `tests/locks/conformance.txt` "
             "locks; what does not pass yet is listed, with the reason phantom gave, in "
             "`tests/conformance/expectations.tsv`). A case ONNX Runtime CPU runs passes when "
             "`phantom onnx` gives a clean verdict with every node computed in f64 and the reference's outputs "
             "equal to the suite's; any other case passes when `phantom run --runner reference` gives the suite's "
             "outputs.", "", summary(results), "",
             f"**Spec-undefined: {len(undefined)} cases**, counted apart from right and wrong. The `Cast` and "
             "`CastLike` ones have inputs outside the range of the narrow integer type they are cast to, which the "
             "spec's `Cast` leaves undefined; the suite's values there are whatever the `ml_dtypes` of the day "
             "computes (0.6 wraps, 0.7 writes 0). The reference does what ONNX Runtime's CPU kernel does (round half "
             "away from zero, then keep the low bits), and equals the suite on every element in range. The JPEG "
             f"`ImageDecoder` ones are decoded within {JPEG_LEVELS} levels of the suite's libjpeg-turbo pixels, which "
             "ITU T.81 allows (it bounds a decoder's inverse DCT and leaves chroma upsampling open): "
             + (", ".join(f"`{n}`" for n in undefined) or "none") + ".", "",
             "To rerun it (about three minutes on two cores):", "", "```sh",
             "python3 -m venv /tmp/conf && /tmp/conf/bin/pip install --require-hashes -r tests/locks/conformance.txt",
             "/tmp/conf/bin/python scripts/conformance/cases.py target/conformance/cases",
             "/tmp/conf/bin/python scripts/conformance/run.py target/conformance/cases target/debug/phantom "
             "--table docs/book/src/conformance.md", "```", "",
             "| operator | cases ONNX Runtime runs: pass | of | other cases (reference alone): pass | of | "
             "spec-undefined |",
             "|---|---|---|---|---|---|"]
    for op in sorted(by):
        a, b, c, d, u = by[op]
        lines.append(f"| {op} | {a} | {b} | {c} | {d} | {u} |")
    return "\n".join(lines) + "\n"


def summary(results):
    """One line: what passes of the cases that ONNX Runtime runs, of the others, of all (the spec-undefined cases
    counted apart), and where the reference disagrees with the suite."""
    undefined = sum(r["result"] == "undefined" for r in results)
    judged = [r for r in results if r["result"] != "undefined"]
    ort = [r for r in judged if r["ort_runs"]]
    rest = [r for r in judged if not r["ort_runs"]]
    p = lambda rs: sum(r["result"] == "pass" for r in rs)
    wrong = [r["name"] for r in results if r["result"] == "wrong"]
    return (f"{len(results)} cases: {p(ort)} of {len(ort)} that ONNX Runtime runs pass "
            f"({100 * p(ort) / max(1, len(ort)):.1f}%), {p(rest)} of {len(rest)} others pass with the reference alone; "
            f"{p(judged)} of {len(judged)} in all ({100 * p(judged) / max(1, len(judged)):.1f}%); "
            f"{undefined} whose expected values the spec leaves undefined (the reference does what ONNX Runtime does); "
            f"{len(wrong)} where the reference disagrees with the suite{': ' + ', '.join(wrong) if wrong else ''}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("phantom")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--only")
    ap.add_argument("--results")
    ap.add_argument("--expectations")
    ap.add_argument("--write-expectations")
    ap.add_argument("--table")
    a = ap.parse_args()
    cases = [c for c in json.load(open(os.path.join(a.cases, "cases.json")))["cases"] if c["tensors"]]
    if a.only:
        cases = [c for c in cases if a.only in c["name"]]
    with ThreadPoolExecutor(a.jobs) as pool:
        judged = list(pool.map(lambda c: judge(c, a.cases, a.phantom), cases))
    results = [dict(name=c["name"], op=c["op"], ort_runs=c["ort_runs"], result=res, why=why)
               for c, (res, why) in zip(cases, judged)]
    for r in results:
        if r["result"] == "pass" and r["why"]:
            print(f"passes with a note: {r['name']}: {r['why']}")
    print(summary(results))
    if a.results:
        json.dump(results, open(a.results, "w"), indent=1)
    if a.table:
        open(a.table, "w").write(table(results))
    if a.write_expectations:
        write_expectations(a.write_expectations, results)
    if a.expectations:
        check_expectations(a.expectations, results)


if __name__ == "__main__":
    main()
