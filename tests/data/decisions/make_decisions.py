"""Fixtures for discrete decisions (issue 33): run with onnx and numpy (`python3 make_decisions.py`).

t5_buckets.onnx: one self-attention layer with HF T5's relative position buckets, as `torch.onnx.export` writes
them (bidirectional, 32 buckets, max distance 128): the sequence positions come from the input's shape, the large
distances are bucketed by `log(d / 8) / log(16) * 8` cast to int64 (truncation), distance 0 takes `log(0) = -inf`
(undefined cast, masked by the `Where`). Distances 16, 32 and 64 land on exact bucket boundaries, which float32 and
float64 round to different sides. The buckets pick a row of a learned bias that is added to the attention scores.

t5_buckets_fault.onnx: the same with the bucket scale 8 read as 8.5 (a fault: buckets move far from any boundary).

router.onnx, deep_ties.onnx and their faults: selections between near-tied scores (see the functions).
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D, HEADS, BUCKETS, MAX_DIST = 16, 2, 32, 128


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def build(scale_buckets):
    rng = np.random.default_rng(7)
    inits = [
        const("zero", np.array(0, np.int64)),
        const("one", np.array(1, np.int64)),
        const("axis1", np.array([1], np.int64)),
        const("axis0", np.array([0], np.int64)),
        const("half", np.array(BUCKETS // 2, np.int64)),
        const("max_exact_i", np.array(8, np.int64)),
        const("max_exact_f", np.array(8.0, np.float32)),
        const("log_ratio", np.array(np.log(MAX_DIST / 8), np.float32)),
        const("scale", np.array(scale_buckets, np.float32)),
        const("last_bucket", np.array(BUCKETS // 2 - 1, np.int64)),
        const("bias_table", rng.normal(0, 1, (BUCKETS, HEADS)).astype(np.float32)),
        const("wq", rng.normal(0, D ** -0.5, (D, D)).astype(np.float32)),
        const("perm_heads", np.array([1, 0], np.int64)),
    ]
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["shape"]),
        n("Gather", ["shape", "one"], ["len"], axis=0),
        n("Range", ["zero", "len", "one"], ["pos"]),
        n("Unsqueeze", ["pos", "axis1"], ["ctx"]),
        n("Unsqueeze", ["pos", "axis0"], ["mem"]),
        n("Sub", ["mem", "ctx"], ["rel"]),
        n("Greater", ["rel", "zero"], ["ahead"]),
        n("Cast", ["ahead"], ["ahead_i"], to=TensorProto.INT64),
        n("Mul", ["ahead_i", "half"], ["base"]),
        n("Abs", ["rel"], ["dist"]),
        n("Less", ["dist", "max_exact_i"], ["small"]),
        n("Cast", ["dist"], ["dist_f"], to=TensorProto.FLOAT),
        n("Div", ["dist_f", "max_exact_f"], ["ratio"]),
        n("Log", ["ratio"], ["log"]),
        n("Div", ["log", "log_ratio"], ["frac"]),
        n("Mul", ["frac", "scale"], ["scaled"]),
        n("Cast", ["scaled"], ["bucket_raw"], to=TensorProto.INT64, name="bucket_cast"),
        n("Add", ["bucket_raw", "max_exact_i"], ["large"]),
        n("Min", ["large", "last_bucket"], ["large_capped"]),
        n("Where", ["small", "dist", "large_capped"], ["far"]),
        n("Add", ["base", "far"], ["buckets"]),
        n("Gather", ["bias_table", "buckets"], ["bias"], axis=0),  # [L, L, H]
        n("Transpose", ["bias"], ["bias_h"], perm=[2, 0, 1]),  # [H, L, L]
        n("MatMul", ["x", "wq"], ["q"]),  # [1, L, D]
        n("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "xt"], ["scores"]),  # [1, L, L]
        n("Add", ["scores", "bias_h"], ["biased"]),  # [H, L, L]
        n("Softmax", ["biased"], ["attn"], axis=-1),
        n("MatMul", ["attn", "x"], ["y"]),  # [H, L, D]
    ]
    g = helper.make_graph(
        nodes,
        "t5_buckets",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [HEADS, "seq", D])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m




def mlp():
    """A four-layer MLP (float32), to be quantized dynamically."""
    rng = np.random.default_rng(11)
    sizes = [(64, 256), (256, 256), (256, 256), (256, 16)]
    inits, nodes, prev = [], [], "x"
    for i, (a, b) in enumerate(sizes):
        inits.append(const(f"w{i}", rng.normal(0, a ** -0.5, (a, b)).astype(np.float32)))
        inits.append(const(f"b{i}", rng.normal(0, 0.1, (b,)).astype(np.float32)))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"mm{i}"]))
        nodes.append(helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"h{i}"]))
        prev = f"h{i}"
        if i < len(sizes) - 1:
            nodes.append(helper.make_node("Relu", [prev], [f"r{i}"]))
            prev = f"r{i}"
    nodes[-1].output[0] = "y"
    g = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024, 16])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def quantized_mlp(path):
    """mlp_dynquant.onnx: the MLP (1024 rows of 64 features) through `onnxruntime.quantization.quantize_dynamic` (uint8 weights, so ONNX
    Runtime's x86 kernels never saturate 16-bit pair sums): DynamicQuantizeLinear, MatMulInteger, Cast, Mul."""
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as d:
        src = f"{d}/mlp.onnx"
        onnx.save(mlp(), src)
        quantize_dynamic(src, path, weight_type=QuantType.QUInt8)


def selections(name, nodes, inits, rows, d):
    """The model `name`: `nodes` computing scores s0, s1 and s2 from `x` [rows, d], then the selections both
    fixtures share: `ArgMax` over the three picks a row of `table`, `TopK` (k = 2) picks two, `Greater(s0, s1)`
    selects between two branches with `Where`."""
    n = helper.make_node
    nodes = nodes + [
        n("Concat", ["s0", "s1", "s2"], ["scores"], axis=1),
        n("ArgMax", ["scores"], ["top"], axis=1, keepdims=0),
        n("Gather", ["table", "top"], ["picked"], axis=0),
        n("TopK", ["scores", "k"], ["top2_values", "top2"], axis=1),
        n("Gather", ["table", "top2"], ["picked2"], axis=0),
        n("Greater", ["s0", "s1"], ["ahead"]),
        n("Where", ["ahead", "up", "down"], ["side"]),
    ]
    g = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, d])],
        [
            helper.make_tensor_value_info("picked", TensorProto.FLOAT, [rows, 8]),
            helper.make_tensor_value_info("picked2", TensorProto.FLOAT, [rows, 2, 8]),
            helper.make_tensor_value_info("top2_values", TensorProto.FLOAT, [rows, 2]),
            helper.make_tensor_value_info("side", TensorProto.FLOAT, [rows, 1]),
        ],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def router(fault=1.0):
    """router.onnx: selections between scores that are equal but for rounding, as a mixture-of-experts router or
    a classifier's near-tied classes make them. Two scores are the same dot product summed in two feature orders
    (`s0 = x·w`, `s1 = x[perm]·w[perm]`), a third is another dot product. `ArgMax` over the three picks a row of a
    table, `TopK` (k = 2) picks two, `Greater(s0, s1)` selects between two branches with `Where`: float32 and
    float64 break the s0/s1 ties on different sides, for about half the rows.

    router_fault.onnx (fault = 1.01): the same with s1 scaled by 1.01, a fault the decisions must not hide."""
    rng = np.random.default_rng(5)
    rows, d = 512, 48
    perm = rng.permutation(d)
    w = rng.normal(0, d ** -0.5, (d, 1)).astype(np.float32)
    inits = [
        const("w", w),
        const("w_perm", w[perm]),
        const("perm", perm.astype(np.int64)),
        const("w2", (0.5 * rng.normal(0, d ** -0.5, (d, 1))).astype(np.float32)),
        const("table", rng.normal(0, 1, (3, 8)).astype(np.float32)),
        const("fault", np.array(fault, np.float32)),
        const("k", np.array([2], np.int64)),
        const("up", np.array(1.0, np.float32)),
        const("down", np.array(-1.0, np.float32)),
    ]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "w"], ["s0"]),
        n("Gather", ["x", "perm"], ["x_perm"], axis=1),
        n("MatMul", ["x_perm", "w_perm"], ["s1_raw"]),
        n("Mul", ["s1_raw", "fault"], ["s1"]),
        n("MatMul", ["x", "w2"], ["s2"]),
    ]
    return selections("router", nodes, inits, rows, d)


def deep_ties(fault=1.0):
    """deep_ties.onnx: a detector's near-tied scores, computed deep and by cancellation as scores many nodes deep
    are. Features come from four Tanh layers; each score is the small difference of two large dot products
    (`s0 = h·a − h·b`: |h·a| ≈ 60, |s0| ≈ 0.05). A second score `s1` is the same difference summed in another
    feature order plus a designed gap `g = h·c` (|g| ≈ 2e-6): far beyond 64 units in the last place of the scores
    (≈ 2e-7), far within the noise the large terms leave in them (≈ 1e-5), so float32 and float64 rank s0 and s1
    differently on many rows, and both rankings are faithful. A third score is another dot product. `ArgMax`,
    `TopK` and `Greater` select as in the router.

    deep_ties_fault.onnx (fault = 1.01): the same with s1 scaled by 1.01 (a gap of ≈ 5e-4), a fault the decisions
    must not hide."""
    rng = np.random.default_rng(11)
    rows, d, layers = 512, 16, 4
    perm = rng.permutation(d)
    a = rng.normal(0, 25, (d, 1)).astype(np.float32)
    b = (a + rng.normal(0, 0.02, (d, 1))).astype(np.float32)
    inits = [const(f"w{i}", rng.normal(0, 1.2 / d ** 0.5, (d, d)).astype(np.float32)) for i in range(layers)]
    inits += [
        const("a", a),
        const("b", b),
        const("a_perm", a[perm]),
        const("b_perm", b[perm]),
        const("perm", perm.astype(np.int64)),
        const("c", rng.normal(0, 1e-6, (d, 1)).astype(np.float32)),
        const("w_other", rng.normal(0, 0.02, (d, 1)).astype(np.float32)),
        const("table", rng.normal(0, 1, (3, 8)).astype(np.float32)),
        const("fault", np.array(fault, np.float32)),
        const("k", np.array([2], np.int64)),
        const("up", np.array(1.0, np.float32)),
        const("down", np.array(-1.0, np.float32)),
    ]
    n = helper.make_node
    nodes, h = [], "x"
    for i in range(layers):
        nodes += [n("MatMul", [h, f"w{i}"], [f"z{i}"]), n("Tanh", [f"z{i}"], [f"h{i}"])]
        h = f"h{i}"
    nodes += [
        n("MatMul", [h, "a"], ["big_a"]),
        n("MatMul", [h, "b"], ["big_b"]),
        n("Sub", ["big_a", "big_b"], ["s0"]),
        n("Gather", [h, "perm"], ["h_perm"], axis=1),
        n("MatMul", ["h_perm", "a_perm"], ["big_a1"]),
        n("MatMul", ["h_perm", "b_perm"], ["big_b1"]),
        n("Sub", ["big_a1", "big_b1"], ["t1"]),
        n("MatMul", [h, "c"], ["gap"]),
        n("Add", ["t1", "gap"], ["s1_raw"]),
        n("Mul", ["s1_raw", "fault"], ["s1"]),
        n("MatMul", [h, "w_other"], ["s2"]),
    ]
    return selections("deep_ties", nodes, inits, rows, d)


if __name__ == "__main__":
    onnx.save(router(), "router.onnx")
    onnx.save(router(1.01), "router_fault.onnx")
    onnx.save(deep_ties(), "deep_ties.onnx")
    onnx.save(deep_ties(1.01), "deep_ties_fault.onnx")
    onnx.save(build(8.0), "t5_buckets.onnx")
    onnx.save(build(8.5), "t5_buckets_fault.onnx")
    quantized_mlp("mlp_dynquant.onnx")
