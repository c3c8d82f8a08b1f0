"""Small models, one per trait of real-world graphs that code building derived models must handle (issue 32).

Each model is what an exporter really writes for that trait, cut down to a few nodes; the surgery property test
(`tests/it/surgery.rs`) runs every surgery kind on each. Deterministic (fixed numpy seed). Run:
    python3 tests/data/traits/make_traits.py      (needs `pip install onnx numpy`)
The .onnx files are committed; this script records how they were made.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(32)
F = TensorProto.FLOAT


def w(name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def save(model, name, ir=8, check=True):
    model.ir_version = ir
    if check:
        onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(HERE, name))
    print("wrote", name, len(model.graph.node), "nodes")


def model(nodes, inputs, outputs, inits, opset=17, extra_opsets=(), value_info=()):
    g = helper.make_graph(nodes, "trait", inputs, outputs, inits, value_info=list(value_info))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(g, opset_imports=ops, producer_name="phantom-traits")


def dropout_mask():
    """torch 1.13's Swin export: Dropout with ratio and training_mode inputs and its bool mask as a second output."""
    n = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Dropout", ["h", "ratio", "train"], ["d", "d_mask"], name="drop"),
        helper.make_node("Relu", ["d"], ["r"], name="relu"),
        helper.make_node("Not", ["d_mask"], ["dropped"], name="not"),
        helper.make_node("Cast", ["dropped"], ["dropped_f"], name="cast", to=F),
        helper.make_node("Add", ["r", "dropped_f"], ["s"], name="add"),
        helper.make_node("MatMul", ["s", "w2"], ["y"], name="fc2"),
    ]
    inits = [w("w1", 8, 16), w("w2", 16, 4),
             numpy_helper.from_array(np.array(0.1, np.float32), "ratio"),
             numpy_helper.from_array(np.array(False), "train")]
    save(model(n, [vi("x", ["batch", 8])], [vi("y", ["batch", 4])], inits), "dropout_mask.onnx")


def optional_outputs():
    """Multi-output nodes with optional outputs: BatchNormalization (opset 9 with its training outputs named),
    TopK indices feeding a Gather, MaxPool indices, LSTM with Y omitted and Y_h/Y_c both read."""
    n = [
        helper.make_node("Conv", ["x", "cw"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn", "bn_mean", "bn_var", "bn_smean", "bn_svar"],
                         name="bn"),
        helper.make_node("MaxPool", ["bn"], ["p", "p_idx"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Cast", ["p_idx"], ["p_idx_f"], name="idx_cast", to=F),
        helper.make_node("Mul", ["p_idx_f", "tiny"], ["p_idx_s"], name="idx_scale"),
        helper.make_node("Add", ["p", "p_idx_s"], ["pa"], name="idx_add"),
        helper.make_node("Reshape", ["pa", "seq_shape"], ["seq"], name="to_seq"),
        helper.make_node("LSTM", ["seq", "lw", "lr", "lb"], ["", "yh", "yc"], name="lstm", hidden_size=6),
        helper.make_node("Add", ["yh", "yc"], ["hc"], name="hc"),
        helper.make_node("Squeeze", ["hc"], ["hc2"], name="squeeze", axes=[0]),
        helper.make_node("TopK", ["hc2", "k"], ["top", "top_idx"], name="topk", axis=-1),
        helper.make_node("GatherElements", ["hc2", "top_idx"], ["picked"], name="gather", axis=1),
        helper.make_node("Concat", ["top", "picked"], ["y"], name="concat", axis=-1),
    ]
    c = 4
    inits = [w("cw", c, 3, 3, 3),
             numpy_helper.from_array((np.abs(rng.standard_normal(c)) + 0.5).astype(np.float32), "s"),
             w("b", c, scale=0.1), w("m", c, scale=0.1),
             numpy_helper.from_array((np.abs(rng.standard_normal(c)) + 0.5).astype(np.float32), "v"),
             numpy_helper.from_array(np.array(1e-3, np.float32), "tiny"),
             numpy_helper.from_array(np.array([4, 1, c * 4 * 4 // 4], np.int64), "seq_shape"),
             w("lw", 1, 24, 16), w("lr", 1, 24, 6), w("lb", 1, 48, scale=0.1),
             numpy_helper.from_array(np.array([3], np.int64), "k")]
    # opset 11: BatchNormalization still has opset 9's five outputs (training outputs named, unused)
    m = model(n, [vi("x", [1, 3, 8, 8])], [vi("y", [1, 6])], inits, opset=11)
    save(m, "optional_outputs.onnx")


def ir3_initializers_as_inputs():
    """IR 3: every initializer also listed among the graph inputs (old Caffe2 and CNTK exports)."""
    n = [
        helper.make_node("Conv", ["data", "conv_w", "conv_b"], ["c"], name="", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name=""),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name=""),
        helper.make_node("Flatten", ["g"], ["f"], name=""),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name=""),
    ]
    inits = [w("conv_w", 6, 3, 3, 3), w("conv_b", 6, scale=0.1), w("fc_w", 5, 6), w("fc_b", 5, scale=0.1)]
    inputs = [vi("data", [1, 3, 10, 10])] + [vi(i.name, list(i.dims)) for i in inits]
    m = model(n, inputs, [vi("prob", [1, 5])], inits, opset=9)
    save(m, "ir3_initializers_as_inputs.onnx", ir=3)


def names():
    """Unnamed nodes (legal; ONNX Runtime refuses duplicate names, so those are not here), and value_info that
    disagrees with the real type."""
    n = [
        helper.make_node("Mul", ["x", "a"], ["m"], name="op"),
        helper.make_node("Add", ["m", "a"], ["s"], name="op_1"),
        helper.make_node("Tanh", ["s"], ["t"]),
        helper.make_node("ArgMax", ["t"], ["am"], axis=1, keepdims=1),
        helper.make_node("Cast", ["am"], ["amf"], to=F),
        helper.make_node("Add", ["t", "amf"], ["y"]),
    ]
    # exporters leave stale value_info (ONNX Runtime refuses a wrong element type, so only shapes are stale here):
    # this one says [2, 7] and [3] where ArgMax makes [2, 1] and Tanh [2, 5]
    m = model(n, [vi("x", [2, 5])], [vi("y", [2, 5])], [w("a", 5)],
              value_info=[vi("am", [2, 7], TensorProto.INT64), vi("t", [3])])
    save(m, "names_and_stale_value_info.onnx", check=False)


def shape_of_input():
    """Later layers read the batch size through Shape(input) (ViT/transformer exports), so a segment or cut of the
    tail needs the graph input's shape, not its values."""
    n = [
        helper.make_node("MatMul", ["input", "w1"], ["h1"], name="fc1"),
        helper.make_node("Relu", ["h1"], ["r1"], name="relu1"),
        helper.make_node("MatMul", ["r1", "w2"], ["h2"], name="fc2"),
        helper.make_node("Relu", ["h2"], ["r2"], name="relu2"),
        helper.make_node("MatMul", ["r2", "w3"], ["h3"], name="fc3"),
        # listed (and sorted) last, as exporters emit them beside the layer that reads them
        helper.make_node("Shape", ["input"], ["in_shape"], name="shape"),
        helper.make_node("Gather", ["in_shape", "zero"], ["batch"], name="batch", axis=0),
        helper.make_node("Unsqueeze", ["batch", "ax0"], ["batch1"], name="batch1"),
        helper.make_node("Concat", ["batch1", "minus1"], ["flat_shape"], name="flat_shape", axis=0),
        # torch exports guard on the batch size with an If whose condition reads Shape(input)
        helper.make_node("Greater", ["batch", "zero"], ["has_batch"], name="has_batch"),
        helper.make_node("If", ["has_batch"], ["h3b"], name="guard",
                         then_branch=helper.make_graph([helper.make_node("Identity", ["h3"], ["h3t"], name="keep")],
                                                       "then", [], [vi("h3t", None)]),
                         else_branch=helper.make_graph([helper.make_node("Neg", ["h3"], ["h3e"], name="neg")],
                                                       "else", [], [vi("h3e", None)])),
        helper.make_node("Reshape", ["h3b", "flat_shape"], ["y"], name="flatten"),
    ]
    inits = [w("w1", 6, 8), w("w2", 8, 8), w("w3", 8, 3),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    save(model(n, [vi("input", ["batch", 4, 6])], [vi("y", ["batch", 12])], inits), "shape_of_input.onnx")


def subgraph_outer_scope():
    """An If whose branches read a value of the enclosing graph (outer scope), and a Loop whose body does too."""
    then_g = helper.make_graph([helper.make_node("Mul", ["h", "h"], ["t_out"], name="then_mul")], "then", [],
                               [vi("t_out", [2, 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["h"], ["e_out"], name="else_neg")], "else", [],
                               [vi("e_out", [2, 4])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("Add", ["acc_in", "h"], ["acc_out"], name="body_add")],
        "body",
        [vi("iter", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("acc_in", [2, 4])],
        [vi("cond_out", [], TensorProto.BOOL), vi("acc_out", [2, 4])],
    )
    n = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("ReduceSum", ["h"], ["hs"], name="sum", keepdims=0),
        helper.make_node("Greater", ["hs", "zero"], ["pos"], name="gt"),
        helper.make_node("If", ["pos"], ["branch"], name="if", then_branch=then_g, else_branch=else_g),
        helper.make_node("Loop", ["trip", "", "branch"], ["looped"], name="loop", body=body),
        helper.make_node("Tanh", ["looped"], ["y"], name="tanh"),
    ]
    inits = [w("w1", 3, 4), numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(3, np.int64), "trip")]
    save(model(n, [vi("x", [2, 3])], [vi("y", [2, 4])], inits, opset=13), "subgraph_outer_scope.onnx")


def external_data_and_domains():
    """Weights in an external data file, and an op from another domain (com.microsoft FusedMatMul, Gelu)."""
    n = [
        helper.make_node("FusedMatMul", ["x", "w1"], ["h"], name="fmm", domain="com.microsoft", alpha=0.5),
        helper.make_node("Gelu", ["h"], ["g"], name="gelu", domain="com.microsoft"),
        helper.make_node("MatMul", ["g", "w2"], ["y"], name="fc2"),
    ]
    inits = [w("w1", 8, 64), w("w2", 64, 4)]
    m = model(n, [vi("x", ["batch", 8])], [vi("y", ["batch", 4])], inits, extra_opsets=[("com.microsoft", 1)])
    m.ir_version = 8
    data = os.path.join(HERE, "external_data.bin")
    if os.path.exists(data):
        os.remove(data)  # onnx.save appends to an existing data file
    onnx.save(m, os.path.join(HERE, "external_data.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="external_data.bin", size_threshold=256)
    print("wrote external_data.onnx", len(m.graph.node), "nodes")


def squeeze_without_axes():
    """An opset-11 Squeeze with no `axes` (every extent-1 axis goes), as PLCMOS and AECMOS are exported: tract needs
    the axes, so phantom's reference evaluates this form itself."""
    n = [
        helper.make_node("Squeeze", ["x"], ["s"], name="squeeze"),
        helper.make_node("MatMul", ["s", "w1"], ["h"], name="fc1"),
        helper.make_node("Tanh", ["h"], ["y"], name="tanh"),
    ]
    inits = [w("w1", 8, 4)]
    m = model(n, [vi("x", [1, 1, "frames", 8])], [vi("y", ["frames", 4])], inits, opset=11)
    onnx.checker.check_model(m)  # full inference cannot tell `frames` is not 1
    save(m, "squeeze_without_axes.onnx", check=False)


def constant_gemm():
    """A Gemm whose inputs are all constants (an LSTM cell's first step over its zero state, as a segment's cut
    embeds it): tract folds it at import, with float32 alpha/beta constants."""
    n = [
        helper.make_node("Gemm", ["h0", "wh", "bh"], ["g"], name="cell_gemm", transB=1, alpha=0.5, beta=2.0),
        helper.make_node("MatMul", ["x", "wx"], ["xw"], name="fc"),
        helper.make_node("Add", ["xw", "g"], ["y"], name="add"),
    ]
    inits = [w("h0", 1, 6), w("wh", 4, 6), w("bh", 4), w("wx", 8, 4)]
    save(model(n, [vi("x", ["batch", 8])], [vi("y", ["batch", 4])], inits), "constant_gemm.onnx")


def loop_until():
    """A decoder-style Loop its own condition stops (not unrollable before the run): the body reads a weight from
    the outer scope, indexes a buffer with the step counter, and reads a prefix of data-dependent length whose
    Shape drives an Expand (the SLANet table decoder's pattern)."""
    i64 = TensorProto.INT64
    b = [
        helper.make_node("Gather", ["buf", "i"], ["xi"], name="step_in", axis=1),
        helper.make_node("MatMul", ["h", "wl"], ["hw"], name="cell"),
        helper.make_node("Add", ["hw", "xi"], ["s"], name="cell_add"),
        helper.make_node("Tanh", ["s"], ["h2"], name="cell_tanh"),
        helper.make_node("Add", ["i", "one"], ["i1"], name="next"),
        helper.make_node("Unsqueeze", ["i1", "ax0"], ["end"], name="end"),
        helper.make_node("Slice", ["buf", "ax0", "end", "ax1"], ["prefix"], name="prefix"),
        helper.make_node("Shape", ["prefix"], ["pshape"], name="pshape"),
        helper.make_node("Unsqueeze", ["h2", "ax1"], ["h2u"], name="h2u"),
        helper.make_node("Expand", ["h2u", "pshape"], ["e"], name="spread"),
        helper.make_node("Mul", ["e", "prefix"], ["ep"], name="attend"),
        helper.make_node("ReduceMean", ["ep"], ["m"], name="pool", axes=[1], keepdims=0),
        helper.make_node("Add", ["h2", "m"], ["h3"], name="mix"),
        helper.make_node("Identity", ["buf"], ["buf_out"], name="keep_buf"),
        helper.make_node("Less", ["i", "three"], ["early"], name="early"),
        helper.make_node("Abs", ["h3"], ["ah"], name="abs"),
        helper.make_node("ReduceSum", ["ah"], ["total"], name="total", keepdims=0),
        helper.make_node("Less", ["total", "big"], ["bounded"], name="bounded"),
        helper.make_node("And", ["early", "bounded"], ["cond_out"], name="go_on"),
    ]
    consts = [numpy_helper.from_array(np.array(v, np.int64), k)
              for k, v in [("one", 1), ("three", 3), ("ax0", [0]), ("ax1", [1])]]
    consts.append(numpy_helper.from_array(np.array(1e9, np.float32), "big"))
    body = helper.make_graph(
        b, "decode",
        [helper.make_tensor_value_info("i", i64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         vi("h", [1, 4]), vi("buf", [1, 6, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), vi("h3", [1, 4]), vi("buf_out", [1, 6, 4])],
        consts)
    n = [
        helper.make_node("Loop", ["trips", "go", "h0", "x"], ["h_last", "x_last"], name="decoder", body=body),
        helper.make_node("Relu", ["h_last"], ["y"], name="head"),
    ]
    inits = [w("wl", 4, 4), numpy_helper.from_array(np.zeros((1, 4), np.float32), "h0"),
             numpy_helper.from_array(np.array(6, np.int64), "trips"),
             numpy_helper.from_array(np.array(True), "go")]
    save(model(n, [vi("x", [1, 6, 4])], [vi("y", [1, 4])], inits, opset=13), "loop_until.onnx")


if __name__ == "__main__":
    dropout_mask()
    optional_outputs()
    ir3_initializers_as_inputs()
    names()
    shape_of_input()
    subgraph_outer_scope()
    external_data_and_domains()
    squeeze_without_axes()
    constant_gemm()
    loop_until()
