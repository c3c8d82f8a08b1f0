"""Builds the per-op conformance fixtures for phantom's wgpu (WGSL) target. Run: python3 tests/data/wgpu/make_cases.py

Source: the ONNX backend node tests (onnx/backend/test/data/node/test_*/: model.onnx + test_data_set_0/{input,output}_N.pb).
The onnx wheels on PyPI (1.23.x) no longer ship that data folder, so by default the cases are generated in memory
with onnx.backend.test.case.node.collect_testcases, which is what produces those folders (model.onnx is the same
serialized ModelProto; each .pb is numpy_helper.from_array of the same array). To read an existing folder instead
(e.g. an onnx source checkout), pass it: python3 tests/data/wgpu/make_cases.py --node-dir PATH/onnx/backend/test/data/node

Selection, for each op in OPS: the test's graph is exactly one node of that op type (default domain), its name
does not contain "_expanded", and its data types fit:
  * by default every graph input and output is float32;
  * ops in AUX_OPS (shape / index / bound / axes operands) have float32 outputs, inputs of float32, int64 or bool,
    and at least one float32 input. The Reduce* ops are in AUX_OPS too: since opset 18 their axes are an int64
    input, and without that nearly every Reduce test would drop out;
  * Cast: one float32 -> float16 or float16 -> float32 (no string, float8, bfloat16, int4, double, ...);
  * only test_data_set_0 is used, and no tensor has more than MAX_ELEMS elements.
At most CAP cases per op, chosen to spread over variants (see pick): greedy cover of the features "value of each
attribute (absent = default), input/output count, input dtypes, input ranks, broadcasting"; ties go to the smaller
case, then to the test name, so the choice is deterministic.
Output, next to this script (cases/ is wiped and rebuilt):
  cases/<test_name>/model.onnx                the test's model, unchanged
  cases/<test_name>/input_<k>_<name>.npy      k-th graph input (numpy_helper.to_array of input_k.pb)
  cases/<test_name>/expected_<k>_<name>.npy   k-th graph output (numpy_helper.to_array of output_k.pb)
  cases.tsv                                   test_name, op_type, n_inputs, n_outputs, max_elems
(same file naming as tests/data/oracle/cases; here the expected outputs are the tests' own float32/float16 ones).
Needs `pip install onnx numpy` (onnx 1.23.2, numpy 2.4 used).
"""
import argparse
import collections
import glob
import os
import shutil
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

OPS = [
    "Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Neg", "Abs",
    "Reciprocal", "Min", "Max", "Sum", "Mean", "Relu", "LeakyRelu", "PRelu", "Sigmoid", "Tanh", "Erf", "Gelu",
    "HardSigmoid", "HardSwish", "Clip", "Softplus", "Elu", "Selu", "Floor", "Ceil", "Sin", "Cos", "Sign", "Softmax",
    "LogSoftmax", "LayerNormalization", "BatchNormalization", "InstanceNormalization", "ReduceMean", "ReduceSum",
    "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2", "ReduceL1", "ReduceLogSumExp", "ReduceProd", "MaxPool",
    "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
    "Concat", "Split", "Slice", "Gather", "Expand", "Where", "Cast", "Pad", "Resize", "Identity",
]
AUX_OPS = {
    "Gather", "Where", "Reshape", "Slice", "Expand", "Pad", "Squeeze", "Unsqueeze", "Split", "Resize", "Clip",
    "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2", "ReduceL1",
    "ReduceLogSumExp", "ReduceProd",
}
AUX_DTYPES = {np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_)}
CAST_DTYPES = {np.dtype(np.float32), np.dtype(np.float16)}
MAX_ELEMS = 200_000
CAP = 8
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cases")


def load_dir(node_dir):
    """(name, ModelProto, model bytes, inputs, outputs) from a backend test data folder, as TensorProtos."""
    for d in sorted(glob.glob(os.path.join(node_dir, "test_*"))):
        path = os.path.join(d, "model.onnx")
        if not os.path.exists(path):
            continue
        with open(path, "rb") as f:
            raw = f.read()
        model = onnx.load_from_string(raw)

        def read(kind, n):
            ts = []
            for j in range(n):
                p = os.path.join(d, "test_data_set_0", f"{kind}_{j}.pb")
                if not os.path.exists(p):
                    return None
                t = TensorProto()
                with open(p, "rb") as f:
                    t.ParseFromString(f.read())
                ts.append(t)
            return ts

        yield os.path.basename(d), model, raw, read("input", len(model.graph.input)), read(
            "output", len(model.graph.output))


def load_generated():
    """The same, generated in memory the way `backend-test-tools generate-data` writes the folder."""
    from onnx.backend.test.case.node import collect_testcases

    for case in sorted(collect_testcases(None), key=lambda c: c.name):
        if case.kind != "node" or not case.data_sets:
            continue
        g = case.model.graph

        def protos(values, vis):
            ts = []
            for v, vi in zip(values, vis):
                if not vi.type.HasField("tensor_type"):
                    return None  # sequence / optional / map
                ts.append(v if isinstance(v, TensorProto) else numpy_helper.from_array(np.asarray(v), vi.name))
            return ts

        inputs, outputs = case.data_sets[0]
        yield case.name, case.model, case.model.SerializeToString(), protos(inputs, g.input), protos(outputs, g.output)


def accepts(op, xs, ys):
    """None if the dtypes fit the rules for op, else the reason."""
    xd, yd = [x.dtype for x in xs], [y.dtype for y in ys]
    if op == "Cast":
        if len(xd) == 1 and len(yd) == 1 and {xd[0], yd[0]} == CAST_DTYPES:
            return None
        return "cast not float32<->float16"
    if any(d != np.float32 for d in yd):
        return "output " + ",".join(map(str, yd))
    if op in AUX_OPS:
        if all(d in AUX_DTYPES for d in xd) and any(d == np.float32 for d in xd):
            return None
    elif all(d == np.float32 for d in xd):
        return None
    return "input " + ",".join(map(str, xd))


def attr_value(a):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, TensorProto):
        return ("tensor", tuple(numpy_helper.to_array(v).ravel().tolist()))
    if isinstance(v, list):
        return tuple(x.decode() if isinstance(x, bytes) else x for x in v)
    return v.decode() if isinstance(v, bytes) else v


def features(c, names):
    """What makes a case a distinct variant: each attribute's value (absent = default), operand count, dtypes, ranks."""
    f = {("attr", n, c["attrs"].get(n, "<default>")) for n in names}
    f.add(("n_inputs", len(c["xs"])))
    f.add(("n_outputs", len(c["ys"])))
    f.add(("in_dtypes", tuple(str(a.dtype) for a in c["xs"])))
    f.add(("in_ranks", tuple(a.ndim for a in c["xs"])))
    f.add(("broadcast", len({a.shape for a in c["xs"] if a.dtype == c["xs"][0].dtype}) > 1))
    return f


def pick(cands):
    """At most CAP cases spread over variants: greedily the case adding the most not-yet-covered features, ties
    to the smaller case (max elements), then to the name; deterministic."""
    names = sorted({n for c in cands for n in c["attrs"]})
    left = [(c, features(c, names)) for c in cands]
    covered, chosen = set(), []
    while left and len(chosen) < CAP:
        best = min(left, key=lambda cf: (-len(cf[1] - covered), cf[0]["max_elems"], cf[0]["name"]))
        left.remove(best)
        covered |= best[1]
        chosen.append(best[0])
    return sorted(chosen, key=lambda c: c["name"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node-dir", help="an onnx/backend/test/data/node folder (default: generate in memory)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    node_dir = args.node_dir
    pkg_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if node_dir is None and os.path.isdir(pkg_dir) and glob.glob(os.path.join(pkg_dir, "test_*")):
        node_dir = pkg_dir
    source = load_dir(node_dir) if node_dir else load_generated()
    print("source:", node_dir or "onnx.backend.test.case.node.collect_testcases (in memory)", "| onnx", onnx.__version__)

    wanted = set(OPS)
    cands = collections.defaultdict(list)
    skipped = collections.defaultdict(list)
    for name, model, raw, xs_pb, ys_pb in source:
        nodes = model.graph.node
        if len(nodes) != 1 or nodes[0].op_type not in wanted or nodes[0].domain not in ("", "ai.onnx"):
            continue
        op = nodes[0].op_type
        if "_expanded" in name:
            continue
        if xs_pb is None or ys_pb is None:
            skipped[op].append((name, "non-tensor input/output"))
            continue
        try:
            xs = [numpy_helper.to_array(t) for t in xs_pb]
            ys = [numpy_helper.to_array(t) for t in ys_pb]
        except Exception as e:  # dtypes numpy cannot hold
            skipped[op].append((name, f"unreadable ({type(e).__name__})"))
            continue
        why = accepts(op, xs, ys)
        if why is None and max(a.size for a in xs + ys) > MAX_ELEMS:
            why = f"over {MAX_ELEMS} elements"
        if why is not None:
            skipped[op].append((name, why))
            continue
        attrs = {a.name: attr_value(a) for a in nodes[0].attribute}
        cands[op].append(dict(name=name, op=op, raw=raw, model=model, xs=xs, ys=ys, attrs=attrs,
                              max_elems=max(a.size for a in xs + ys)))

    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    rows = []
    for op in OPS:
        for c in pick(sorted(cands[op], key=lambda c: c["name"])):
            d = os.path.join(OUT, c["name"])
            os.makedirs(d)
            with open(os.path.join(d, "model.onnx"), "wb") as f:
                f.write(c["raw"])
            g = c["model"].graph
            for kind, vis, arrays in (("input", g.input, c["xs"]), ("expected", g.output, c["ys"])):
                for k, (vi, a) in enumerate(zip(vis, arrays)):
                    assert vi.name and "/" not in vi.name and not vi.name.startswith("."), vi.name
                    np.save(os.path.join(d, f"{kind}_{k}_{vi.name}.npy"), np.ascontiguousarray(a))
            rows.append((c["name"], op, len(c["xs"]), len(c["ys"]), c["max_elems"]))
    with open(os.path.join(HERE, "cases.tsv"), "w") as f:
        f.write("test_name\top_type\tn_inputs\tn_outputs\tmax_elems\n")
        for r in rows:
            f.write("\t".join(map(str, r)) + "\n")

    counts = collections.Counter(r[1] for r in rows)
    for op in OPS:
        line = f"{op:24s} {counts[op]} of {len(cands[op])} eligible"
        if skipped[op]:
            why = collections.Counter(w for _, w in skipped[op])
            line += "; skipped: " + ", ".join(f"{w} x{n}" for w, n in sorted(why.items()))
        print(line)
    print("ops with none:", [op for op in OPS if not counts[op]] or "-")
    print("cases:", len(rows), file=sys.stderr)


if __name__ == "__main__":
    main()
