"""Models whose values are optional sequences, as onnx.helper and the ONNX backend suite write them (issue 56 item 3).

optional_sequence_loop.onnx: an `optional(seq(tensor))` input threaded through a Loop whose body asks
`OptionalHasElement`, picks the given sequence or a fresh one in an `If`, and appends a step per row of `x`
(h = tanh(x[i] + last element)); the result is concatenated (`y`, one row per element). Deterministic. Run:
    python3 tests/data/sequences/make_sequences.py      (needs `pip install onnx numpy`)
The .onnx files are committed; this script records how they were made.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def const(name, value, dtype):
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(np.array(value, dtype), name))


def optional_sequence_loop():
    row = helper.make_tensor_type_proto(F, [3])
    opt_seq = helper.make_optional_type_proto(helper.make_sequence_type_proto(row))
    then_b = helper.make_graph(
        [const("zeros", [0.0, 0.0, 0.0], np.float32),
         helper.make_node("SequenceConstruct", ["zeros"], ["fresh"], name="fresh")],
        "fresh", [], [helper.make_value_info("fresh", helper.make_sequence_type_proto(row))])
    else_b = helper.make_graph(
        [helper.make_node("OptionalGetElement", ["seq_in"], ["given"], name="given")],
        "given", [], [helper.make_value_info("given", helper.make_sequence_type_proto(row))])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("OptionalHasElement", ["seq_in"], ["has"], name="has"),
         helper.make_node("Not", ["has"], ["none"], name="none"),
         helper.make_node("If", ["none"], ["seq"], name="pick", then_branch=then_b, else_branch=else_b),
         helper.make_node("Gather", ["x", "i"], ["xi"], name="row", axis=0),
         const("last", -1, np.int64),
         helper.make_node("SequenceAt", ["seq", "last"], ["prev"], name="prev"),
         helper.make_node("Add", ["xi", "prev"], ["s"], name="step"),
         helper.make_node("Tanh", ["s"], ["h"], name="squash"),
         helper.make_node("SequenceInsert", ["seq", "h"], ["seq_out"], name="append")],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_value_info("seq_in", opt_seq)],
        [helper.make_tensor_value_info("cond_out", B, []),
         helper.make_value_info("seq_out", helper.make_sequence_type_proto(row))])
    nodes = [
        helper.make_node("Shape", ["x"], ["xs"], name="xs", end=1),
        helper.make_node("Squeeze", ["xs"], ["trips"], name="trips"),
        const("go", True, np.bool_),
        helper.make_node("Loop", ["trips", "go", "opt_seq"], ["seq_res"], name="steps", body=body),
        helper.make_node("ConcatFromSequence", ["seq_res"], ["y"], name="stack", axis=0, new_axis=1),
    ]
    g = helper.make_graph(
        nodes, "optional_sequence_loop",
        [helper.make_tensor_value_info("x", F, [4, 3]), helper.make_value_info("opt_seq", opt_seq)],
        [helper.make_tensor_value_info("y", F, ["n", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)], producer_name="phantom-sequences")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(HERE, "optional_sequence_loop.onnx"))
    print("wrote optional_sequence_loop.onnx")


if __name__ == "__main__":
    optional_sequence_loop()
