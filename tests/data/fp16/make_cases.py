"""Small float32 models built to fail in float16 in known ways (tests/it/precision.rs names the culprit and cause
phantom must find in each). Regenerate: python3 tests/data/fp16/make_cases.py"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)


def save(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="phantom-fp16-cases")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, name + ".onnx"))


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def decomposed_layernorm(x, eps, prefix):
    """LayerNorm over the last axis, as exporters write it (opset < 17)."""
    return [
        helper.make_node("ReduceMean", [x], [prefix + "mean"], axes=[-1], name=prefix + "mean"),
        helper.make_node("Sub", [x, prefix + "mean"], [prefix + "d"], name=prefix + "sub"),
        helper.make_node("Pow", [prefix + "d", "two"], [prefix + "sq"], name=prefix + "pow"),
        helper.make_node("ReduceMean", [prefix + "sq"], [prefix + "var"], axes=[-1], name=prefix + "var"),
        helper.make_node("Add", [prefix + "var", eps], [prefix + "ve"], name=prefix + "add_eps"),
        helper.make_node("Sqrt", [prefix + "ve"], [prefix + "std"], name=prefix + "sqrt"),
        helper.make_node("Div", [prefix + "d", prefix + "std"], [prefix + "y"], name=prefix + "div"),
    ]


# 1. LayerNorm whose variance overflows: inputs scaled to ~±1000 square to ~1e6 > 65504 in Pow.
save(
    "ln_variance_overflow",
    [helper.make_node("Mul", ["x", "gain"], ["xs"], name="scale_up")]
    + decomposed_layernorm("xs", "eps", "ln/")
    + [helper.make_node("Mul", ["ln/y", "gamma"], ["y"], name="ln/gamma")],
    [vi("x", [1, 8, 64])],
    [vi("y", [1, 8, 64])],
    {"gain": np.array(400.0, np.float32), "two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
     "gamma": np.ones(64, np.float32)},
)

# 2. BatchNormalization whose running variance (1e5) is beyond fp16's 65504; a large gamma keeps the output big.
c = 8
var = np.abs(f32(c)) + 0.5
var[3] = 1e5
gamma = np.ones(c, np.float32)
gamma[3] = 300.0
save(
    "bn_var_overflow",
    [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["y"], name="bn"),
    ],
    [vi("x", [1, 3, 8, 8])],
    [vi("y", [1, c, 8, 8])],
    {"w": (f32(c, 3, 3, 3) * 0.3), "gamma": gamma, "beta": np.zeros(c, np.float32),
     "mean": np.zeros(c, np.float32), "var": var},
)

# 3. A long MatMul reduction: 16384 positive terms of ~0.8·8 sum to ~1e5 > 65504.
k = 16384
save(
    "long_matmul",
    [
        helper.make_node("Abs", ["x"], ["ax"], name="abs"),
        helper.make_node("MatMul", ["ax", "w"], ["y"], name="long_matmul"),
    ],
    [vi("x", [1, k])],
    [vi("y", [1, 4])],
    {"w": np.full((k, 4), 8.0, np.float32)},
)

# 4. An epsilon too small for fp16 (1e-12 stores as 0): rows that are constant have variance 0, so 0/0 = NaN.
mask = np.ones((1, 4, 16), np.float32)
mask[0, 1, :] = 0.0
save(
    "small_epsilon",
    [helper.make_node("Mul", ["x", "mask"], ["xm"], name="mask_rows")]
    + decomposed_layernorm("xm", "eps", "ln/")
    + [helper.make_node("Identity", ["ln/y"], ["y"], name="out")],
    [vi("x", [1, 4, 16])],
    [vi("y", [1, 4, 16])],
    {"mask": mask, "two": np.array(2.0, np.float32), "eps": np.array(1e-12, np.float32)},
)

# 5. Softmax over large logits (~2e4 ± 3): fp16 stores them 16 apart, so exp of the differences is far off.
save(
    "softmax_large_logits",
    [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="scores"),
        helper.make_node("Add", ["mm", "offset"], ["logits"], name="logits"),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1, name="softmax"),
    ],
    [vi("x", [1, 64])],
    [vi("y", [1, 32])],
    {"w": (f32(64, 32) * 0.3), "offset": np.array(20000.0, np.float32)},
)

# 6. A node that makes NaN: (x − (x + 1e-4)) / (x − (x + 1e-4)); fp16 loses the 1e-4, so the division is 0/0.
save(
    "nan_division",
    [
        helper.make_node("Add", ["x", "delta"], ["xd"], name="add_delta"),
        helper.make_node("Sub", ["x", "xd"], ["diff"], name="diff"),
        helper.make_node("Div", ["diff", "diff"], ["y"], name="ratio"),
    ],
    [vi("x", [1, 64])],
    [vi("y", [1, 64])],
    {"delta": np.array(1e-4, np.float32)},
)
# 7. An ArgMax between two logits 1e-4 apart at ~10: fp16 (spacing 0.0078 there) makes them equal and the index flips.
bias = np.array([[10.0, 10.0001, 3.0, 2.0]], np.float32)
save(
    "argmax_tie",
    [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="project"),
        helper.make_node("Add", ["mm", "bias"], ["logits"], name="logits"),
        helper.make_node("ArgMax", ["logits"], ["y"], axis=1, keepdims=0, name="argmax"),
    ],
    [vi("x", [1, 8])],
    [helper.make_tensor_value_info("y", TensorProto.INT64, [1])],
    {"w": np.zeros((8, 4), np.float32), "bias": bias},
)

# 8. QuantizeLinear at scale 0.1 on x·10: a fifth of the values saturate, and fp16 (spacing 0.0078 near 10) flips the
#    rounding of others.
save(
    "quant_saturation",
    [
        helper.make_node("Mul", ["x", "ten"], ["xs"], name="scale_up"),
        helper.make_node("QuantizeLinear", ["xs", "qs", "zp"], ["q"], name="quantize"),
        helper.make_node("DequantizeLinear", ["q", "qs", "zp"], ["y"], name="dequantize"),
    ],
    [vi("x", [1, 256])],
    [vi("y", [1, 256])],
    {"ten": np.array(10.0, np.float32), "qs": np.array(0.1, np.float32), "zp": np.array(128, np.uint8)},
)
# 9. Index arithmetic in float: idx = Cast(Floor(x * 0.1)) picks rows of a table. x in [1000, 2000) is stored with a
#    spacing of 1 in fp16, so x * 0.1 moves by up to 0.05 and Floor lands on the neighbouring integer for values near
#    a boundary: the Gather then reads the wrong rows.
save(
    "index_floor_gather",
    [
        helper.make_node("Mul", ["x", "tenth"], ["scaled"], name="scale"),
        helper.make_node("Floor", ["scaled"], ["fl"], name="floor"),
        helper.make_node("Cast", ["fl"], ["idx"], to=TensorProto.INT64, name="to_index"),
        helper.make_node("Gather", ["table", "idx"], ["y"], axis=0, name="lookup"),
    ],
    [vi("x", [1, 64])],
    [vi("y", [1, 64, 4])],
    {"tenth": np.array(0.1, np.float32), "table": f32(256, 4)},
)
# 10. and 11. are conversion fixtures, not drift cases: an IR-3 model (initializers also listed as graph inputs) and a
#     Loop whose body reads float initializers from the outer scope. Both must convert consistently and load.
r3 = np.random.default_rng(3)
w = r3.standard_normal((8, 8)).astype(np.float32)
b = r3.standard_normal((8,)).astype(np.float32)
g = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"), helper.make_node("Add", ["mm", "b"], ["y"], name="add")],
    "ir3", [vi("x", [1, 8]), vi("w", [8, 8]), vi("b", [8])], [vi("y", [1, 8])],
    [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)], producer_name="phantom-fp16-cases")
m.ir_version = 3
onnx.save(m, os.path.join(HERE, "ir3_initializers.onnx"))
body = helper.make_graph(
    [helper.make_node("MatMul", ["h_in", "w"], ["hw"], name="body_mm"),
     helper.make_node("Add", ["hw", "b"], ["hb"], name="body_add"),
     helper.make_node("Tanh", ["hb"], ["h_out"], name="body_tanh"),
     helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")], "body",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
     vi("h_in", [1, 8])],
    [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), vi("h_out", [1, 8])])
save("loop_body", [helper.make_node("Loop", ["trip", "cond", "x"], ["y"], body=body, name="loop")],
     [vi("x", [1, 8])], [vi("y", [1, 8])],
     {"trip": np.array(3, np.int64), "cond": np.array(True), "w": w * 0.3, "b": b})
# 12. Nearest Resize whose W scale is computed in the graph: 600·5/600/3 = 5/3, which fp16 stores as 1.66699. Source
#     coordinates (x + 0.5)/s − 0.5 up to 600 move by up to 0.12 and 30 of 1000 output columns read a neighbouring
#     source column (a GPU computing the scale in fp16 does this; ORT's CPU EP keeps this Div in fp32).
save(
    "resize_scale_flip",
    [
        helper.make_node("Shape", ["x"], ["xs"], name="shape", start=2),
        helper.make_node("Cast", ["xs"], ["xsf"], to=TensorProto.FLOAT, name="to_float"),
        helper.make_node("Mul", ["xsf", "num"], ["prod"], name="prod"),
        helper.make_node("Div", ["prod", "xsf"], ["tmp"], name="tmp"),
        helper.make_node("Div", ["tmp", "three"], ["ratio"], name="ratio"),
        helper.make_node("Concat", ["ones", "ratio"], ["scales"], axis=0, name="scales"),
        helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest", name="upsample"),
    ],
    [vi("x", [1, 1, 1, 600])],
    [vi("y", [1, 1, 1, 1000])],
    {"num": np.array([1.0, 5.0], np.float32), "three": np.array([1.0, 3.0], np.float32),
     "ones": np.array([1.0, 1.0], np.float32), "roi": np.array([], np.float32)},
)
print("wrote 12 models to", HERE)
