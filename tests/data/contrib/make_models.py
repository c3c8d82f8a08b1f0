#!/usr/bin/env python3
"""Generates the end-to-end contrib models of tests/it/contrib.rs (random weights, a few hundred KB):
- bert_opt.onnx: a 2-layer BERT written in the pattern torch exports, then fused by ONNX Runtime's own
  `onnxruntime.transformers.optimizer` (opt_level 0): EmbedLayerNormalization, Attention, SkipLayerNormalization,
  BiasGelu;
- decoder_int4.onnx: a 2-layer decoder in the structure onnxruntime-genai's builder writes: MatMulNBits int4
  projections, SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization, GroupQueryAttention with rotary and a
  KV cache (seqlens_k and total_sequence_length computed from attention_mask), SiLU MLP.
Run: python3 tests/data/contrib/make_models.py (needs onnx, numpy, onnxruntime)."""

import math
import os

import numpy as np
import onnx
from onnx import TensorProto as TP, helper as oh, numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
MS = "com.microsoft"


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def init(self, name, arr):
        self.inits.append(nh.from_array(np.asarray(arr), name))
        return name

    def const(self, name, v, dt=np.float32):
        return self.init(name, np.array(v, dt))

    def weight(self, name, *shape, s=0.2):
        return self.init(name, (self.rng.standard_normal(shape) * s).astype(np.float32))

    def node(self, op, ins, outs, domain="", **kw):
        outs = [outs] if isinstance(outs, str) else outs
        self.nodes.append(oh.make_node(op, ins, outs, name=outs[0] + "_node", domain=domain, **kw))
        return outs[0] if len(outs) == 1 else outs

    def save(self, name, inputs, outputs, path, ms=False):
        g = oh.make_graph(self.nodes, name, inputs, outputs, self.inits)
        opsets = [oh.make_opsetid("", 17)] + ([oh.make_opsetid(MS, 1)] if ms else [])
        m = oh.make_model(g, opset_imports=opsets)
        m.ir_version = 8
        onnx.save(m, path)


def bert(path):
    V, P, D, N, FF, L = 100, 64, 32, 2, 64, 2
    H = D // N
    b = Builder(1)
    n, c, w = b.node, b.const, b.weight
    e1 = n("Gather", [w("word_embeddings", V, D), "input_ids"], "emb_word")
    shape = n("Shape", ["input_ids"], "ids_shape")
    seqlen = n("Gather", [shape, c("one_i", 1, np.int64)], "seq_len")
    rng = n("Range", [c("zero_i", 0, np.int64), seqlen, c("one_i2", 1, np.int64)], "pos_range")
    posids = n("Unsqueeze", [rng, c("ax0", [0], np.int64)], "position_ids")
    e2 = n("Gather", [w("position_embeddings", P, D), posids], "emb_pos")
    tts = n("ConstantOfShape", [shape], "token_types", value=oh.make_tensor("v", TP.INT64, [1], [0]))
    e3 = n("Gather", [w("token_type_embeddings", 2, D), tts], "emb_tt")
    s2 = n("Add", [n("Add", [e1, e2], "emb_sum1"), e3], "emb_sum2")
    x = n("LayerNormalization", [s2, w("emb_ln_g", D), w("emb_ln_b", D)], "emb_ln", epsilon=1e-12, axis=-1)
    m2 = n("Unsqueeze", [n("Unsqueeze", ["attention_mask", c("ax1", [1], np.int64)], "mask_u1"),
                         c("ax2", [2], np.int64)], "mask_u2")
    m4 = n("Sub", [c("onef", 1.0), n("Cast", [m2], "mask_f", to=TP.FLOAT)], "mask_inv")
    mask = n("Mul", [m4, c("neg", -10000.0)], "mask_add")
    for layer in range(L):
        p = f"l{layer}_"

        def proj(nm, x_in, din, dout):
            mm = n("MatMul", [x_in, w(p + nm + "_w", din, dout)], p + nm + "_mm")
            return n("Add", [mm, w(p + nm + "_b", dout, s=0.05)], p + nm)

        shp = c(p + "shape4", [0, 0, N, H], np.int64)
        q = n("Transpose", [n("Reshape", [proj("q", x, D, D), shp], p + "q_r")], p + "q_t", perm=[0, 2, 1, 3])
        k = n("Transpose", [n("Reshape", [proj("k", x, D, D), shp], p + "k_r")], p + "k_t", perm=[0, 2, 3, 1])
        v = n("Transpose", [n("Reshape", [proj("v", x, D, D), shp], p + "v_r")], p + "v_t", perm=[0, 2, 1, 3])
        qk = n("Div", [n("MatMul", [q, k], p + "qk"), c(p + "sqrt_h", math.sqrt(H))], p + "qk_s")
        pr = n("Softmax", [n("Add", [qk, mask], p + "qk_m")], p + "probs", axis=-1)
        ctx = n("Transpose", [n("MatMul", [pr, v], p + "ctx")], p + "ctx_t", perm=[0, 2, 1, 3])
        ctx = n("Reshape", [ctx, c(p + "shape3", [0, 0, D], np.int64)], p + "ctx_r")
        r = n("Add", [proj("o", ctx, D, D), x], p + "res1")
        x1 = n("LayerNormalization", [r, w(p + "ln1_g", D), w(p + "ln1_b", D)], p + "ln1", epsilon=1e-12, axis=-1)
        f = proj("ff1", x1, D, FF)
        g3 = n("Add", [n("Erf", [n("Div", [f, c(p + "sqrt2", math.sqrt(2.0))], p + "g_div")], p + "g_erf"),
                       c(p + "g_one", 1.0)], p + "g_add")
        g5 = n("Mul", [n("Mul", [f, g3], p + "g_mul"), c(p + "g_half", 0.5)], p + "gelu")
        r2 = n("Add", [proj("ff2", g5, FF, D), x1], p + "res2")
        x = n("LayerNormalization", [r2, w(p + "ln2_g", D), w(p + "ln2_b", D)], p + "ln2", epsilon=1e-12, axis=-1)
    n("Identity", [x], "last_hidden_state")
    raw = path + ".unfused.onnx"
    b.save("tiny_bert",
           [oh.make_tensor_value_info("input_ids", TP.INT64, ["batch_size", "sequence_length"]),
            oh.make_tensor_value_info("attention_mask", TP.INT64, ["batch_size", "sequence_length"])],
           [oh.make_tensor_value_info("last_hidden_state", TP.FLOAT, ["batch_size", "sequence_length", D])], raw)
    from onnxruntime.transformers import optimizer
    om = optimizer.optimize_model(raw, model_type="bert", num_heads=N, hidden_size=D, opt_level=0)
    om.save_model_to_file(path)
    os.remove(raw)
    ops = sorted({nd.op_type for nd in om.model.graph.node if nd.domain == MS})
    assert ops == ["Attention", "BiasGelu", "EmbedLayerNormalization", "SkipLayerNormalization"], ops


def decoder(path):
    V, D, N, NKV, H, FF, L, MAXP, BLOCK = 128, 64, 4, 2, 16, 128, 2, 256, 32
    b = Builder(2)
    n, c = b.node, b.const

    def nbits(name, x, k, out, zp=False):
        wt = b.rng.standard_normal((out, k)).astype(np.float32) * (1.0 / math.sqrt(k))
        blocks = k // BLOCK
        scale = (np.abs(wt.reshape(out, blocks, BLOCK)).max(-1) / 7.0).astype(np.float32)
        codes = np.clip(np.round(wt.reshape(out, blocks, BLOCK) / scale[..., None]) + 8, 0, 15).astype(np.uint8)
        packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
        ins = [x, b.init(name + ".qweight", packed), b.init(name + ".scales", scale.reshape(-1))]
        if zp:
            z = np.full((out, blocks), 8, np.uint8)
            z[:, 0] = 7
            ins.append(b.init(name + ".qzeros", (z[:, 0::2] | (z[:, 1::2] << 4)).astype(np.uint8).reshape(-1)))
        return n("MatMulNBits", ins, name, domain=MS, K=k, N=out, bits=4, block_size=BLOCK)

    def norm_weight(name):
        return b.init(name, (1.0 + 0.1 * b.rng.standard_normal(D)).astype(np.float32))

    x = n("Gather", [b.init("model.embed_tokens.weight", (b.rng.standard_normal((V, D)) * 0.5).astype(np.float32)),
                     "input_ids"], "embed_out")
    ms = n("ReduceSum", ["attention_mask", c("rs_axes", [1], np.int64)], "mask_sum", keepdims=0)
    seqlens = n("Cast", [n("Sub", [ms, c("one64", 1, np.int64)], "seqlens_sub")], "seqlens_k", to=TP.INT32)
    tot = n("Gather", [n("Shape", ["attention_mask"], "mask_shape"), c("idx1", 1, np.int64)], "total_len64", axis=0)
    total = n("Cast", [tot], "total_seq_len", to=TP.INT32)
    ang = np.arange(MAXP)[:, None] * (1.0 / 10000 ** (np.arange(H // 2) / (H // 2)))[None]
    cos = b.init("cos_cache", np.cos(ang).astype(np.float32))
    sin = b.init("sin_cache", np.sin(ang).astype(np.float32))
    h = n("SimplifiedLayerNormalization", [x, norm_weight("layers.0.input_layernorm.weight")],
          "layers.0.input_layernorm", epsilon=1e-6)
    res = x
    inputs = [oh.make_tensor_value_info("input_ids", TP.INT64, ["batch_size", "sequence_length"]),
              oh.make_tensor_value_info("attention_mask", TP.INT64, ["batch_size", "total_sequence_length"])]
    outputs = [oh.make_tensor_value_info("logits", TP.FLOAT, ["batch_size", "sequence_length", V])]
    for layer in range(L):
        p = f"layers.{layer}."
        pk, pv = f"past_key_values.{layer}.key", f"past_key_values.{layer}.value"
        inputs += [oh.make_tensor_value_info(nm, TP.FLOAT, ["batch_size", NKV, "past_sequence_length", H])
                   for nm in (pk, pv)]
        outputs += [oh.make_tensor_value_info(nm, TP.FLOAT, ["batch_size", NKV, "total_sequence_length", H])
                    for nm in (f"present.{layer}.key", f"present.{layer}.value")]
        q = nbits(p + "attn.q_proj", h, D, N * H, zp=(layer == 0))
        k = nbits(p + "attn.k_proj", h, D, NKV * H)
        v = nbits(p + "attn.v_proj", h, D, NKV * H)
        attn = n("GroupQueryAttention", [q, k, v, pk, pv, seqlens, total, cos, sin],
                 [p + "attn.gqa", f"present.{layer}.key", f"present.{layer}.value"], domain=MS,
                 num_heads=N, kv_num_heads=NKV, do_rotary=1)[0]
        h2, _, _, res = n("SkipSimplifiedLayerNormalization",
                          [nbits(p + "attn.o_proj", attn, N * H, D), res, norm_weight(p + "post_attention_layernorm.weight")],
                          [p + "post_attention_layernorm", "", "", p + "post_attention_layernorm.sum"], domain=MS,
                          epsilon=1e-6)
        gate = nbits(p + "mlp.gate_proj", h2, D, FF)
        act = n("Mul", [gate, n("Sigmoid", [gate], p + "mlp.act.sigmoid")], p + "mlp.act")
        m = n("Mul", [act, nbits(p + "mlp.up_proj", h2, D, FF)], p + "mlp.mul")
        last = layer + 1 == L
        name = "final_norm" if last else f"layers.{layer + 1}.input_layernorm"
        h, _, _, res = n("SkipSimplifiedLayerNormalization",
                         [nbits(p + "mlp.down_proj", m, FF, D), res, norm_weight(name + ".weight")],
                         [name, "", "", name + ".sum"], domain=MS, epsilon=1e-6)
    n("Identity", [nbits("lm_head", h, D, V)], "logits")
    b.save("tiny_decoder", inputs, outputs, path, ms=True)


def if_sample_rate(path):
    """Silero VAD's shape: an If on the sample rate at the top, an If on a shape inside the taken branch, and an
    untaken branch that does not type for the inputs given (a Reshape to 3×7 of 8 samples)."""
    T = TP.FLOAT
    inner_then = oh.make_graph([oh.make_node("Sigmoid", ["y"], ["z_then"], name="inner_sigmoid")], "inner_then",
                               [], [oh.make_tensor_value_info("z_then", T, None)])
    inner_else = oh.make_graph([oh.make_node("Tanh", ["y"], ["z_else"], name="inner_tanh")], "inner_else",
                               [], [oh.make_tensor_value_info("z_else", T, None)])
    then_nodes = [
        oh.make_node("Mul", ["x", "two"], ["x2"], name="then_mul"),
        oh.make_node("Relu", ["x2"], ["y"], name="then_relu"),
        oh.make_node("Shape", ["x"], ["xs"], name="then_shape"),
        oh.make_node("Gather", ["xs", "one"], ["n"], name="then_len", axis=0),
        oh.make_node("Equal", ["n", "eight"], ["is8"], name="then_is8"),
        oh.make_node("If", ["is8"], ["z"], name="inner_if", then_branch=inner_then, else_branch=inner_else),
        oh.make_node("Add", ["z", "x"], ["t_out"], name="then_add"),
    ]
    then_g = oh.make_graph(then_nodes, "then", [], [oh.make_tensor_value_info("t_out", T, None)],
                           [nh.from_array(np.array(2.0, np.float32), "two"), nh.from_array(np.array(1, np.int64), "one"),
                            nh.from_array(np.array(8, np.int64), "eight")])
    else_g = oh.make_graph([oh.make_node("Reshape", ["x", "shape37"], ["r"], name="else_reshape"),
                            oh.make_node("Reshape", ["r", "shape_back"], ["e_out"], name="else_back")], "else", [],
                           [oh.make_tensor_value_info("e_out", T, None)],
                           [nh.from_array(np.array([-1, 3, 7], np.int64), "shape37"),
                            nh.from_array(np.array([1, -1], np.int64), "shape_back")])
    nodes = [oh.make_node("Constant", [], ["sr16k"], name="sr16k", value=nh.from_array(np.array(16000, np.int64))),
             oh.make_node("Equal", ["sr", "sr16k"], ["is16k"], name="is16k"),
             oh.make_node("If", ["is16k"], ["out"], name="top_if", then_branch=then_g, else_branch=else_g)]
    g = oh.make_graph(nodes, "if_sample_rate",
                      [oh.make_tensor_value_info("x", T, [1, "samples"]), oh.make_tensor_value_info("sr", TP.INT64, [])],
                      [oh.make_tensor_value_info("out", T, [1, "samples"])])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def loop_scan(path):
    """A recurrence written as a Loop: trip count from the input's shape, a carried state, a scan output."""
    T = TP.FLOAT
    body = oh.make_graph(
        [oh.make_node("Gather", ["x", "i"], ["xi"], name="body_gather", axis=0),
         oh.make_node("Mul", ["h_in", "w"], ["hw"], name="body_mul"),
         oh.make_node("Add", ["hw", "xi"], ["pre"], name="body_add"),
         oh.make_node("Tanh", ["pre"], ["h_out"], name="body_tanh"),
         oh.make_node("Identity", ["h_out"], ["h_scan"], name="body_scan"),
         oh.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "body",
        [oh.make_tensor_value_info("i", TP.INT64, []), oh.make_tensor_value_info("cond_in", TP.BOOL, []),
         oh.make_tensor_value_info("h_in", T, None)],
        [oh.make_tensor_value_info("cond_out", TP.BOOL, []), oh.make_tensor_value_info("h_out", T, None),
         oh.make_tensor_value_info("h_scan", T, None)])
    nodes = [oh.make_node("Shape", ["x"], ["xs"], name="x_shape"),
             oh.make_node("Gather", ["xs", "zero"], ["steps"], name="steps", axis=0),
             oh.make_node("Loop", ["steps", "yes", "h0"], ["h_final", "hs"], name="recurrence", body=body)]
    g = oh.make_graph(nodes, "loop_scan",
                      [oh.make_tensor_value_info("x", T, ["steps", 4]), oh.make_tensor_value_info("h0", T, [1, 4])],
                      [oh.make_tensor_value_info("h_final", T, [1, 4]), oh.make_tensor_value_info("hs", T, ["steps", 1, 4])],
                      [nh.from_array(np.array(0, np.int64), "zero"), nh.from_array(np.array(True), "yes"),
                       nh.from_array(np.array([0.9, -0.5, 0.3, 1.1], np.float32), "w")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def recurrence_body(state):
    """A Scan body: h ← tanh(h·w + x_t − y_t), h also scanned out; the state shaped `state`, the slices [4]."""
    T = TP.FLOAT
    return oh.make_graph(
        [oh.make_node("Mul", ["h_in", "w"], ["hw"], name="body_mul"),
         oh.make_node("Add", ["hw", "x_t"], ["pre"], name="body_add"),
         oh.make_node("Sub", ["pre", "y_t"], ["pre2"], name="body_sub"),
         oh.make_node("Tanh", ["pre2"], ["h_out"], name="body_tanh"),
         oh.make_node("Identity", ["h_out"], ["h_scan"], name="body_scan")],
        "body",
        [oh.make_tensor_value_info("h_in", T, state), oh.make_tensor_value_info("x_t", T, [4]),
         oh.make_tensor_value_info("y_t", T, [4])],
        [oh.make_tensor_value_info("h_out", T, state), oh.make_tensor_value_info("h_scan", T, state)],
        [nh.from_array(np.array([0.9, -0.5, 0.3, 1.1], np.float32), "w")])


def scan(path):
    """A recurrence written as a Scan: one input scanned forward along axis 0, one backward along axis 1, a carried
    state, a scan output stacked backward along axis 1."""
    T = TP.FLOAT
    body = recurrence_body([1, 4])
    nodes = [oh.make_node("Scan", ["h0", "x", "y"], ["h_final", "hs"], name="scan", body=body, num_scan_inputs=2,
                          scan_input_axes=[0, 1], scan_input_directions=[0, 1], scan_output_axes=[1],
                          scan_output_directions=[1])]
    g = oh.make_graph(nodes, "scan",
                      [oh.make_tensor_value_info("h0", T, [1, 4]), oh.make_tensor_value_info("x", T, ["steps", 4]),
                       oh.make_tensor_value_info("y", T, [4, "steps"])],
                      [oh.make_tensor_value_info("h_final", T, [1, 4]),
                       oh.make_tensor_value_info("hs", T, [1, "steps", 4])])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def scan8(path):
    """Opset 8's Scan: a batch axis leads every state, scan input and scan output; no sequence_lens; two scan inputs,
    the second read backward (`directions`), a carried state and a scan output."""
    T = TP.FLOAT
    body = recurrence_body([4])
    nodes = [oh.make_node("Scan", ["", "h0", "x", "y"], ["h_final", "hs"], name="scan8", body=body,
                          num_scan_inputs=2, directions=[0, 1])]
    g = oh.make_graph(nodes, "scan8",
                      [oh.make_tensor_value_info("h0", T, ["batch", 4]),
                       oh.make_tensor_value_info("x", T, ["batch", "steps", 4]),
                       oh.make_tensor_value_info("y", T, ["batch", "steps", 4])],
                      [oh.make_tensor_value_info("h_final", T, ["batch", 4]),
                       oh.make_tensor_value_info("hs", T, ["batch", "steps", 4])])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 8)])
    m.ir_version = 4
    onnx.checker.check_model(m)
    onnx.save(m, path)


def loop_if(path, trips):
    """A Loop whose body branches on its own state (an If inside: double h when its sum is positive, else negate it),
    `trips` iterations: unrolled with each copy of the If resolved when the conditions can all be computed before the
    run; kept whole when they cannot (150 steps: the last conditions hang on more nodes than are evaluated)."""
    T = TP.FLOAT
    then_b = oh.make_graph([oh.make_node("Mul", ["h_in", "two"], ["y_then"], name="dbl")], "then", [],
                           [oh.make_tensor_value_info("y_then", T, [4])])
    else_b = oh.make_graph([oh.make_node("Neg", ["h_in"], ["y_else"], name="neg")], "else", [],
                           [oh.make_tensor_value_info("y_else", T, [4])])
    body = oh.make_graph(
        [oh.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
         oh.make_node("ReduceSum", ["h_in"], ["s"], name="sum", keepdims=0),
         oh.make_node("Greater", ["s", "zero"], ["pos"], name="pos"),
         oh.make_node("If", ["pos"], ["b"], name="branch", then_branch=then_b, else_branch=else_b),
         oh.make_node("Tanh", ["b"], ["t"], name="squash"),
         oh.make_node("Add", ["t", "x"], ["h_out"], name="step")],
        "body",
        [oh.make_tensor_value_info("i", TP.INT64, []), oh.make_tensor_value_info("cond_in", TP.BOOL, []),
         oh.make_tensor_value_info("h_in", T, [4])],
        [oh.make_tensor_value_info("cond_out", TP.BOOL, []), oh.make_tensor_value_info("h_out", T, [4])])
    g = oh.make_graph([oh.make_node("Loop", ["n", "", "h0"], ["h"], name="loop", body=body)], "loop_if",
                      [oh.make_tensor_value_info("x", T, [4]), oh.make_tensor_value_info("h0", T, [4])],
                      [oh.make_tensor_value_info("h", T, [4])],
                      [nh.from_array(np.array(trips, np.int64), "n"), nh.from_array(np.array(2.0, np.float32), "two"),
                       nh.from_array(np.array(0.0, np.float32), "zero")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def random_ops(path):
    """Random ops as VITS uses them: noise shaped like a computed value, scaled and added; a uniform of fixed shape."""
    T = TP.FLOAT
    nodes = [oh.make_node("Relu", ["x"], ["h"], name="relu"),
             oh.make_node("RandomNormalLike", ["h"], ["noise"], name="noise", mean=0.5, scale=2.0),
             oh.make_node("Mul", ["noise", "s"], ["scaled"], name="scale"),
             oh.make_node("Add", ["h", "scaled"], ["y"], name="add"),
             oh.make_node("RandomUniform", [], ["u"], name="uniform", shape=[64, 64], low=-1.0, high=3.0,
                          dtype=TP.FLOAT)]
    g = oh.make_graph(nodes, "random_ops", [oh.make_tensor_value_info("x", T, [64, "n"])],
                      [oh.make_tensor_value_info("y", T, [64, "n"]), oh.make_tensor_value_info("u", T, [64, 64])],
                      [nh.from_array(np.array(0.3, np.float32), "s")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def if_unnamed(path):
    """Silero VAD v6's shape: a top If on the sample rate whose branch holds unnamed Constants and a nested If whose
    condition is a shape computed inside the branch (tract refuses duplicate node names while evaluating it)."""
    T = TP.FLOAT
    inner_then = oh.make_graph([oh.make_node("Sigmoid", ["y"], ["z1"], name="inner_sigmoid")], "inner_then", [],
                               [oh.make_tensor_value_info("z1", T, None)])
    inner_else = oh.make_graph([oh.make_node("Tanh", ["y"], ["z2"], name="inner_tanh")], "inner_else", [],
                               [oh.make_tensor_value_info("z2", T, None)])
    then_g = oh.make_graph(
        [oh.make_node("Constant", [], ["c1"], value=nh.from_array(np.array(1.5, np.float32))),
         oh.make_node("Constant", [], ["c2"], value=nh.from_array(np.array(-0.25, np.float32))),
         oh.make_node("Constant", [], ["one"], value=nh.from_array(np.array(1, np.int64))),
         oh.make_node("Constant", [], ["eight"], value=nh.from_array(np.array(8, np.int64))),
         oh.make_node("Mul", ["x", "c1"], ["xm"]),
         oh.make_node("Add", ["xm", "c2"], ["y"]),
         oh.make_node("Shape", ["y"], ["ys"]),
         oh.make_node("Gather", ["ys", "one"], ["len"], axis=0),
         oh.make_node("Equal", ["len", "eight"], ["is8"]),
         oh.make_node("If", ["is8"], ["z"], name="inner", then_branch=inner_then, else_branch=inner_else),
         oh.make_node("Identity", ["z"], ["then_out"])],
        "then", [], [oh.make_tensor_value_info("then_out", T, None)])
    else_g = oh.make_graph([oh.make_node("Neg", ["x"], ["else_out"], name="else_neg")], "else", [],
                           [oh.make_tensor_value_info("else_out", T, None)])
    nodes = [oh.make_node("Constant", [], ["sr16k"], value=nh.from_array(np.array(16000, np.int64))),
             oh.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
             oh.make_node("If", ["is16k"], ["out"], name="top_if", then_branch=then_g, else_branch=else_g)]
    g = oh.make_graph(nodes, "if_unnamed",
                      [oh.make_tensor_value_info("x", T, [1, "samples"]), oh.make_tensor_value_info("sr", TP.INT64, [])],
                      [oh.make_tensor_value_info("out", T, [1, "samples"])])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def slice_to_end(path):
    """Slice bounds as torch exports write them: ends = Concat(a length computed from a shape, INT64_MAX)."""
    T = TP.FLOAT
    big = np.iinfo(np.int64).max
    nodes = [oh.make_node("Shape", ["x"], ["s"], name="shape"),
             oh.make_node("Gather", ["s", "two"], ["d2"], name="rows", axis=0),
             oh.make_node("Sub", ["d2", "one"], ["n"], name="n"),
             oh.make_node("Unsqueeze", ["n", "ax0"], ["nu"], name="n1"),
             oh.make_node("Concat", ["nu", "to_end"], ["ends"], name="ends", axis=0),
             oh.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="slice"),
             oh.make_node("Relu", ["y"], ["z"], name="relu")]
    g = oh.make_graph(nodes, "slice_to_end", [oh.make_tensor_value_info("x", T, [1, 2, 17, 31])],
                      [oh.make_tensor_value_info("z", T, [1, 2, 16, 16])],
                      [nh.from_array(np.array(2, np.int64), "two"), nh.from_array(np.array(1, np.int64), "one"),
                       nh.from_array(np.array([0], np.int64), "ax0"),
                       nh.from_array(np.array([big], np.int64), "to_end"),
                       nh.from_array(np.array([0, 15], np.int64), "starts"),
                       nh.from_array(np.array([2, 3], np.int64), "axes")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def data_dependent(path):
    """Shapes the data decides, as VITS voices compute them: a Range whose length is a sum of rounded durations,
    `arange(t)` in float over the length of that Range (read back through Shape), and a Slice that ends at the
    count of a NonZero."""
    T = TP.FLOAT
    nodes = [oh.make_node("Abs", ["x"], ["ax"], name="abs"),
             oh.make_node("Mul", ["ax", "two_f"], ["ax2"], name="scale"),
             oh.make_node("Ceil", ["ax2"], ["dur"], name="durations"),
             oh.make_node("ReduceSum", ["dur", "ax1"], ["total"], name="total", keepdims=0),
             oh.make_node("Cast", ["total"], ["total_i"], name="total_int", to=TP.INT64),
             oh.make_node("ReduceMax", ["total_i"], ["t"], name="t", keepdims=0),
             oh.make_node("Range", ["zero_i", "t", "one_i"], ["frames"], name="frames"),
             oh.make_node("Cast", ["frames"], ["frames_f"], name="frames_f", to=T),
             oh.make_node("Unsqueeze", ["frames_f", "ax0"], ["row"], name="row"),
             oh.make_node("Shape", ["row"], ["row_shape"], name="row_shape"),
             oh.make_node("Gather", ["row_shape", "one_i"], ["t_y"], name="t_y", axis=0),
             oh.make_node("Cast", ["t_y"], ["t_yf"], name="t_yf", to=T),
             oh.make_node("Range", ["zero_f", "t_yf", "one_f"], ["arange"], name="arange"),
             oh.make_node("Add", ["arange", "frames_f"], ["y"], name="y"),
             oh.make_node("Greater", ["x", "zero_f"], ["pos"], name="pos"),
             oh.make_node("NonZero", ["pos"], ["nz"], name="nonzero"),
             oh.make_node("Shape", ["nz"], ["nz_shape"], name="nz_shape"),
             oh.make_node("Gather", ["nz_shape", "ax1"], ["k"], name="k", axis=0),
             oh.make_node("Slice", ["x", "ax0", "k", "ax1"], ["head"], name="head"),
             oh.make_node("Mul", ["head", "two_f"], ["z"], name="z")]
    g = oh.make_graph(nodes, "data_dependent", [oh.make_tensor_value_info("x", T, [1, 8])],
                      [oh.make_tensor_value_info("y", T, ["t"]), oh.make_tensor_value_info("z", T, [1, "k"])],
                      [nh.from_array(np.array(2, np.float32), "two_f"),
                       nh.from_array(np.array(0, np.float32), "zero_f"),
                       nh.from_array(np.array(1, np.float32), "one_f"),
                       nh.from_array(np.array(0, np.int64), "zero_i"),
                       nh.from_array(np.array(1, np.int64), "one_i"),
                       nh.from_array(np.array([0], np.int64), "ax0"),
                       nh.from_array(np.array([1], np.int64), "ax1")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def negative_pads(path):
    """Pads that crop (negative, allowed by ONNX): on every axis, on chosen axes, and computed from a shape."""
    T = TP.FLOAT
    nodes = [oh.make_node("Pad", ["x", "pads_all"], ["a"], name="pad_all"),
             oh.make_node("Pad", ["a", "pads_axis", "", "axis1"], ["b"], name="pad_axis"),
             oh.make_node("Shape", ["b"], ["bs"], name="b_shape"),
             oh.make_node("Gather", ["bs", "one"], ["w"], name="width", axis=0),
             oh.make_node("Sub", ["three", "w"], ["short"], name="short"),
             oh.make_node("Concat", ["zero", "zero", "zero", "short"], ["pads_dyn"], name="pads_dyn", axis=0),
             oh.make_node("Pad", ["b", "pads_dyn", "fill"], ["c"], name="pad_dyn"),
             oh.make_node("Relu", ["c"], ["y"], name="relu")]
    g = oh.make_graph(nodes, "negative_pads", [oh.make_tensor_value_info("x", T, [2, 5])],
                      [oh.make_tensor_value_info("y", T, [2, 3])],
                      [nh.from_array(np.array([1, -1, -1, 2], np.int64), "pads_all"),
                       nh.from_array(np.array([-2, 1], np.int64), "pads_axis"),
                       nh.from_array(np.array([1], np.int64), "axis1"),
                       nh.from_array(np.array(1, np.int64), "one"),
                       nh.from_array(np.array([3], np.int64), "three"),
                       nh.from_array(np.array([0], np.int64), "zero"),
                       nh.from_array(np.array(0.5, np.float32), "fill")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


if __name__ == "__main__":
    negative_pads(os.path.join(HERE, "negative_pads.onnx"))
    data_dependent(os.path.join(HERE, "data_dependent.onnx"))
    slice_to_end(os.path.join(HERE, "slice_to_end.onnx"))
    if_unnamed(os.path.join(HERE, "if_unnamed.onnx"))
    random_ops(os.path.join(HERE, "random_ops.onnx"))
    scan(os.path.join(HERE, "scan.onnx"))
    scan8(os.path.join(HERE, "scan8.onnx"))
    loop_if(os.path.join(HERE, "loop_if_short.onnx"), 5)
    loop_if(os.path.join(HERE, "loop_if_long.onnx"), 150)
    loop_scan(os.path.join(HERE, "loop_scan.onnx"))
    if_sample_rate(os.path.join(HERE, "if_sample_rate.onnx"))
    bert(os.path.join(HERE, "bert_opt.onnx"))
    decoder(os.path.join(HERE, "decoder_int4.onnx"))
