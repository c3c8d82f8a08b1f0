#!/usr/bin/env python3
"""Generates the contrib-op cases of tests/it/contrib.rs: one-node models of ONNX Runtime's com.microsoft ops,
float32 inputs, and float64 expected outputs computed here with numpy from each op's definition (independently of
phantom's Rust kernels). Layout per case, as the oracle's: cases/<name>/model.onnx, input_<k>_<name>.npy,
expected_<k>_<name>.npy. Run: python3 tests/data/contrib/make_cases.py (needs onnx and numpy)."""

import math
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cases")
RNG = np.random.default_rng(20261125)
MS = "com.microsoft"


def rand(*shape, scale=1.0, offset=0.0):
    return (RNG.standard_normal(shape) * scale + offset).astype(np.float32)


def write_case(name, op, inputs, outputs, attrs=None, domain=MS, inits=None):
    """inputs: list of (name, array or None for an absent optional input); outputs: list of (name, f64 array or
    None for an absent output). Arrays named in `inits` become initializers."""
    inits = inits or set()
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    node = helper.make_node(op, [n if a is not None else "" for n, a in inputs],
                            [n if a is not None else "" for n, a in outputs], name=name, domain=domain,
                            **(attrs or {}))
    g_inputs, g_inits = [], []
    k = 0
    for n, a in inputs:
        if a is None:
            continue
        if n in inits:
            g_inits.append(numpy_helper.from_array(a, n))
            continue
        g_inputs.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
        np.save(os.path.join(d, f"input_{k}_{n}.npy"), a)
        k += 1
    g_outputs = []
    k = 0
    for n, a in outputs:
        if a is None:
            continue
        dt = TensorProto.FLOAT if a.dtype == np.float64 else helper.np_dtype_to_tensor_dtype(a.dtype)
        g_outputs.append(helper.make_tensor_value_info(n, dt, a.shape))
        np.save(os.path.join(d, f"expected_{k}_{n}.npy"), a)
        k += 1
    graph = helper.make_graph([node], name, g_inputs, g_outputs, g_inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    onnx.save(model, os.path.join(d, "model.onnx"))


def f64(a):
    return None if a is None else a.astype(np.float64)


# ---- activations -------------------------------------------------------------------------------------------------

def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def activations():
    x, b = rand(2, 3, 16, scale=2.0), rand(16)
    write_case("bias_gelu", "BiasGelu", [("x", x), ("bias", b)], [("y", gelu(f64(x) + f64(b)))])
    write_case("fast_gelu_bias", "FastGelu", [("x", x), ("bias", b)], [("y", gelu_tanh(f64(x) + f64(b)))])
    write_case("fast_gelu", "FastGelu", [("x", x)], [("y", gelu_tanh(f64(x)))])
    write_case("gelu_ms", "Gelu", [("x", x)], [("y", gelu(f64(x)))])
    q = 1.0 / (1.0 + np.exp(-1.5 * f64(x)))
    write_case("quick_gelu", "QuickGelu", [("x", x)], [("y", f64(x) * q)], {"alpha": 1.5})
    skip = rand(2, 3, 16)
    write_case("bias_add", "BiasAdd", [("x", x), ("bias", b), ("skip", skip)],
               [("y", f64(x) + f64(b) + f64(skip))])
    xs, bs = rand(2, 3, 32), rand(32)
    s = f64(xs) + f64(bs)
    write_case("bias_split_gelu", "BiasSplitGelu", [("x", xs), ("bias", bs)], [("y", s[..., :16] * gelu(s[..., 16:]))])


# ---- normalizations ----------------------------------------------------------------------------------------------

def layer_norm(s, gamma, beta, eps, simplified):
    mean = 0.0 if simplified else s.mean(-1, keepdims=True)
    var = ((s - mean) ** 2).mean(-1, keepdims=True)
    y = (s - mean) / np.sqrt(var + eps) * gamma
    return y if beta is None else y + beta


def norms():
    h = 24
    x, skip = rand(2, 5, h, scale=3.0, offset=1.0), rand(2, 5, h)
    gamma, beta, bias = rand(h), rand(h), rand(h)
    eps = np.float32(1e-5)
    s = f64(x) + f64(skip) + f64(bias)
    write_case("skip_layer_norm", "SkipLayerNormalization",
               [("x", x), ("skip", skip), ("gamma", gamma), ("beta", beta), ("bias", bias)],
               [("y", layer_norm(s, f64(gamma), f64(beta), float(eps), False)), ("mean", None), ("inv_std", None),
                ("sum", s)], {"epsilon": float(eps)}, inits={"gamma", "beta", "bias"})
    s2 = f64(x) + f64(skip[0])  # skip broadcast over the batch
    write_case("skip_layer_norm_bcast_nobias", "SkipLayerNormalization",
               [("x", x), ("skip", skip[0]), ("gamma", gamma)],
               [("y", layer_norm(s2, f64(gamma), None, 1e-12, False))], inits={"gamma"})
    s3 = f64(x) + f64(skip) + f64(bias)  # its slot 3 is the bias (it has no beta)
    write_case("skip_simplified_layer_norm", "SkipSimplifiedLayerNormalization",
               [("x", x), ("skip", skip), ("gamma", gamma), ("bias", bias)],
               [("y", layer_norm(s3, f64(gamma), None, float(eps), True)), ("mean", None), ("inv_std", None),
                ("sum", s3)], {"epsilon": float(eps)}, inits={"gamma", "bias"})
    x4 = rand(3, 4, 8, scale=2.0)
    scale = rand(4, 8)
    xs = f64(x4).reshape(3, 32)
    inv = 1.0 / np.sqrt((xs ** 2).mean(-1, keepdims=True) + float(eps))
    y = (xs * inv).reshape(3, 4, 8) * f64(scale)
    write_case("simplified_layer_norm_axis1", "SimplifiedLayerNormalization", [("x", x4), ("scale", scale)],
               [("y", y), ("inv_std", inv.reshape(3, 1, 1))], {"axis": 1, "epsilon": float(eps)}, domain="",
               inits={"scale"})


# ---- matrix products ---------------------------------------------------------------------------------------------

def fused_matmul():
    a, b = rand(2, 3, 5, 4), rand(2, 1, 6, 4)
    y = 0.25 * np.matmul(f64(a), np.swapaxes(f64(b), -1, -2))
    write_case("fused_matmul_transb_alpha", "FusedMatMul", [("a", a), ("b", b)], [("y", y)],
               {"alpha": 0.25, "transB": 1})
    a2, b2 = rand(4, 3), rand(4, 5)
    write_case("fused_matmul_transa", "FusedMatMul", [("a", a2), ("b", b2)], [("y", f64(a2).T @ f64(b2))],
               {"transA": 1})
    # transBatchA: [d0, d1, d2, e] -> [d1, d2, d0, e]
    a3, b3 = rand(3, 2, 4, 5), rand(2, 4, 5, 6)
    ta = np.transpose(f64(a3), (1, 2, 0, 3))
    write_case("fused_matmul_transbatch_a", "FusedMatMul", [("a", a3), ("b", b3)], [("y", ta @ f64(b3))],
               {"transBatchA": 1})


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    activations()
    norms()
    fused_matmul()
    embed_layer_norm()
    matmul_nbits()
    attention_cases()
    mha_cases()
    rotary_cases()
    gqa_cases()
    quantized_cases()
    dynamic_quantize_linear()
    dynamic_quantize_lstm()
    print(f"wrote {len(os.listdir(OUT))} cases to {OUT}", file=sys.stderr)


# ---- embeddings and quantized products (appended; main() calls them) ---------------------------------------------

def embed_layer_norm():
    b, s, h, vocab, npos, nseg = 2, 5, 16, 30, 8, 2
    ids = RNG.integers(0, vocab, (b, s)).astype(np.int32)
    segs = RNG.integers(0, nseg, (b, s)).astype(np.int32)
    word, pos, seg = rand(vocab, h), rand(npos, h), rand(nseg, h)
    gamma, beta = rand(h), rand(h)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    emb = f64(word)[ids] + f64(pos)[np.arange(s)][None] + f64(seg)[segs]
    out = layer_norm(emb, f64(gamma), f64(beta), 1e-12, False)
    write_case("embed_layer_norm", "EmbedLayerNormalization",
               [("ids", ids), ("segs", segs), ("word", word), ("pos", pos), ("seg", seg), ("gamma", gamma),
                ("beta", beta), ("mask", mask)],
               [("y", out), ("mask_index", mask.sum(1).astype(np.int32)), ("emb", emb)],
               inits={"word", "pos", "seg", "gamma", "beta"})
    pos_ids = np.array([[3, 1, 4, 1, 5]], np.int32)
    emb2 = f64(word)[ids] + f64(pos)[pos_ids[0]][None]
    write_case("embed_layer_norm_pos_ids", "EmbedLayerNormalization",
               [("ids", ids), ("segs", None), ("word", word), ("pos", pos), ("seg", None), ("gamma", gamma),
                ("beta", beta), ("mask", None), ("pos_ids", pos_ids)],
               [("y", layer_norm(emb2, f64(gamma), f64(beta), 1e-5, False)), ("mask_index", np.zeros(b, np.int32))],
               {"epsilon": 1e-5}, inits={"word", "pos", "gamma", "beta"})


def pack_codes(codes, bits):
    """Packs the last axis of uint codes low bits first, padding it to whole bytes."""
    per = 8 // bits
    pad = (-codes.shape[-1]) % per
    c = np.concatenate([codes, np.zeros(codes.shape[:-1] + (pad,), codes.dtype)], -1).astype(np.uint8)
    c = c.reshape(codes.shape[:-1] + (-1, per))
    out = np.zeros(c.shape[:-1], np.uint8)
    for i in range(per):
        out |= (c[..., i] << (bits * i)).astype(np.uint8)
    return out


def matmul_nbits_case(name, m_shape, k, n, bits, block, zp="packed", bias=False):
    blocks = -(-k // block)
    codes = RNG.integers(0, 1 << bits, (n, blocks * block)).astype(np.uint8)
    scales = (RNG.random((n, blocks)) * 0.1 + 0.01).astype(np.float32)
    if zp == "packed":
        z = RNG.integers(0, 1 << bits, (n, blocks)).astype(np.uint8)
        zp_in = pack_codes(z, bits).reshape(-1)
        zf = z.astype(np.float64)
    elif zp == "float":
        zp_in = (RNG.random((n, blocks)) * (1 << bits)).astype(np.float32)
        zf = f64(zp_in)
    else:
        zp_in, zf = None, np.full((n, blocks), float(1 << (bits - 1)))
    blk = np.arange(k) // block
    w = (codes[:, :k].astype(np.float64) - zf[:, blk]) * f64(scales)[:, blk]
    a = rand(*m_shape, k)
    bias_v = rand(n) if bias else None
    y = f64(a) @ w.T + (f64(bias_v) if bias else 0.0)
    bq = pack_codes(codes.reshape(n, blocks, block), bits)
    write_case(name, "MatMulNBits",
               [("a", a), ("b", bq), ("scales", scales.reshape(-1)), ("zp", zp_in), ("g_idx", None),
                ("bias", bias_v)],
               [("y", y)], {"K": k, "N": n, "bits": bits, "block_size": block},
               inits={"b", "scales", "zp", "bias"})


def matmul_nbits():
    matmul_nbits_case("matmul_nbits_4_zp_bias", (2, 3), 64, 12, 4, 32, bias=True)
    matmul_nbits_case("matmul_nbits_4_default_zp_ragged_k", (5,), 40, 7, 4, 16, zp=None)
    matmul_nbits_case("matmul_nbits_4_float_zp", (3,), 32, 6, 4, 16, zp="float")
    matmul_nbits_case("matmul_nbits_8", (4,), 48, 5, 8, 16)
    matmul_nbits_case("matmul_nbits_2_odd_blocks", (4,), 48, 5, 2, 16)

# ---- attention -----------------------------------------------------------------------------------------------------

LOW = float(np.finfo(np.float32).min)


def softmax(x, sink=None):
    m = x.max(-1, keepdims=True)
    if sink is not None:
        m = np.maximum(m, sink)
    e = np.exp(x - m)
    den = e.sum(-1, keepdims=True) + (np.exp(sink - m) if sink is not None else 0.0)
    return e / den


def heads(x, n):
    """(B, S, N*H) -> (B, N, S, H)"""
    b, s, w = x.shape
    return x.reshape(b, s, n, w // n).transpose(0, 2, 1, 3)


def merge(x):
    """(B, N, S, H) -> (B, S, N*H)"""
    b, n, s, h = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, n * h)


def bert_core(q, k, v, scale, pad_add, bias, causal, past):
    """q (B,N,S,H), k/v (B,N,T,*); pad_add (B,S,T) additive; returns output (B,N,S,Hv), pre-softmax scores."""
    sc = scale * q @ np.swapaxes(k, -1, -2)
    if bias is not None:
        sc = sc + bias
    if pad_add is not None:
        sc = sc + pad_add[:, None]
    if causal:
        t = k.shape[2]
        for i in range(q.shape[2]):
            sc[:, :, i, past + i + 1:t] += LOW
    return softmax(sc) @ v, sc


def attention_cases():
    b, s, din, n = 2, 4, 12, 2
    d = 8
    x, w, bias = rand(b, s, din), rand(din, 3 * d, scale=0.5), rand(3 * d)
    qkv = f64(x) @ f64(w) + f64(bias)
    q, k, v = heads(qkv[..., :d], n), heads(qkv[..., d:2 * d], n), heads(qkv[..., 2 * d:], n)
    lens = np.array([3, 4], np.int32)
    pad = np.zeros((b, s, s))
    for bi in range(b):
        pad[bi, :, lens[bi]:] = -10000.0
    out, _ = bert_core(q, k, v, 1 / math.sqrt(d // n), pad, None, False, 0)
    write_case("attention_lengths", "Attention", [("x", x), ("w", w), ("bias", bias), ("mask", lens)],
               [("y", merge(out))], {"num_heads": n}, inits={"w", "bias"})
    # raw mask, unidirectional, past
    p = 3
    past = rand(2, b, n, p, d // n)
    kc, vc = np.concatenate([f64(past[0]), k], 2), np.concatenate([f64(past[1]), v], 2)
    raw = np.ones((b, p + s), np.int32)
    raw[0, 1] = 0
    pad = np.where(raw[:, None, :] > 0, 0.0, -10000.0).repeat(s, 1)
    out, _ = bert_core(q, kc, vc, 1 / math.sqrt(d // n), pad, None, True, p)
    write_case("attention_raw_mask_causal_past", "Attention",
               [("x", x), ("w", w), ("bias", bias), ("mask", raw), ("past", past)],
               [("y", merge(out)), ("present", np.stack([kc, vc]))], {"num_heads": n, "unidirectional": 1},
               inits={"w", "bias"})
    # qkv_hidden_sizes with a wider V, a (2B) span mask, an attention bias broadcast over the batch
    dv = 12
    w2, bias2 = rand(din, 2 * d + dv, scale=0.5), rand(2 * d + dv)
    qkv = f64(x) @ f64(w2) + f64(bias2)
    q, k, v = heads(qkv[..., :d], n), heads(qkv[..., d:2 * d], n), heads(qkv[..., 2 * d:], n)
    span = np.array([4, 3, 1, 0], np.int32)  # ends, then starts
    pad = np.zeros((b, s, s))
    for bi in range(b):
        for j in range(s):
            if j >= span[bi] or j < span[b + bi]:
                pad[bi, :, j] = -10000.0
    ab = rand(1, n, s, s)
    out, _ = bert_core(q, k, v, float(np.float32(0.3)), pad, f64(ab), False, 0)  # attributes are float32
    write_case("attention_span_mask_bias_sizes", "Attention",
               [("x", x), ("w", w2), ("bias", bias2), ("mask", span), ("past", None), ("ab", ab)],
               [("y", merge(out))], {"num_heads": n, "qkv_hidden_sizes": [d, d, dv], "scale": 0.3},
               inits={"w", "bias"})


def mha_cases():
    b, s, l, n, h = 2, 3, 5, 2, 4
    d = n * h
    q, k, v, bias = rand(b, s, d), rand(b, l, d), rand(b, l, d), rand(3 * d)
    Q, K, V = heads(f64(q) + f64(bias[:d]), n), heads(f64(k) + f64(bias[d:2 * d]), n), heads(f64(v) + f64(bias[2 * d:]), n)
    raw = np.ones((b, l), np.int32)
    raw[1, 3:] = 0
    pad = np.where(raw[:, None, :] > 0, 0.0, -10000.0).repeat(s, 1)
    out, sc = bert_core(Q, K, V, 1 / math.sqrt(h), pad, None, False, 0)
    write_case("mha_cross_bias_mask_qk", "MultiHeadAttention",
               [("q", q), ("k", k), ("v", v), ("bias", bias), ("mask", raw)],
               [("y", merge(out)), ("present_key", None), ("present_value", None), ("qk", sc)], {"num_heads": n})
    p = 4
    q3, k3, v3 = rand(b, s, d), rand(b, s, d), rand(b, s, d)
    pk, pv = rand(b, n, p, h), rand(b, n, p, h)
    ab = rand(b, 1, s, p + s)
    K = np.concatenate([f64(pk), heads(f64(k3), n)], 2)
    V = np.concatenate([f64(pv), heads(f64(v3), n)], 2)
    out, _ = bert_core(heads(f64(q3), n), K, V, 1 / math.sqrt(h), None, f64(ab), True, p)
    write_case("mha_past_causal_bias", "MultiHeadAttention",
               [("q", q3), ("k", k3), ("v", v3), ("bias", None), ("mask", None), ("ab", ab), ("pk", pk), ("pv", pv)],
               [("y", merge(out)), ("present_key", K), ("present_value", V)], {"num_heads": n, "unidirectional": 1})
    k4, v4 = rand(b, n, l, h), rand(b, n, l, h)
    out, _ = bert_core(heads(f64(q) + f64(bias[:d]), n), f64(k4), f64(v4), 1 / math.sqrt(h), None, None, False, 0)
    write_case("mha_split_kv", "MultiHeadAttention", [("q", q), ("k", k4), ("v", v4), ("bias", bias)],
               [("y", merge(out))], {"num_heads": n})


# ---- rotary and grouped-query attention ----------------------------------------------------------------------------

def rope(x, cos, sin, interleaved):
    """Rotates the first 2*cos.shape[-1] values of x's last axis; cos/sin broadcast against x[..., :R/2]."""
    r2 = cos.shape[-1]
    y = x.copy()
    if interleaved:
        a, b = x[..., 0:2 * r2:2], x[..., 1:2 * r2:2]
        y[..., 0:2 * r2:2], y[..., 1:2 * r2:2] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x[..., :r2], x[..., r2:2 * r2]
        y[..., :r2], y[..., r2:2 * r2] = a * cos - b * sin, a * sin + b * cos
    return y


def caches(max_pos, half, base=10000.0):
    inv = 1.0 / base ** (np.arange(half) / half)
    ang = np.arange(max_pos)[:, None] * inv[None]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def rotary_cases():
    b, s, n, h = 2, 3, 2, 16
    cos, sin = caches(12, h // 2)
    x = rand(b, s, n * h)
    pos = np.array([4], np.int64)
    xr = f64(x).reshape(b, s, n, h)
    p = np.arange(s) + 4
    y = rope(xr, f64(cos)[p][None, :, None], f64(sin)[p][None, :, None], False).reshape(b, s, n * h)
    write_case("rotary_offset", "RotaryEmbedding", [("x", x), ("pos", pos), ("cos", cos), ("sin", sin)],
               [("y", y)], inits={"cos", "sin"})
    x4 = rand(b, n, s, h)
    ids = np.array([[0, 5, 2], [7, 7, 1]], np.int64)
    y4 = rope(f64(x4), f64(cos)[ids][:, None], f64(sin)[ids][:, None], True)
    write_case("rotary_4d_ids_interleaved", "RotaryEmbedding", [("x", x4), ("pos", ids), ("cos", cos), ("sin", sin)],
               [("y", y4)], {"interleaved": 1}, inits={"cos", "sin"})
    cos8, sin8 = caches(12, 4)
    y = rope(xr, f64(cos8)[p][None, :, None], f64(sin8)[p][None, :, None], False).reshape(b, s, n * h)
    write_case("rotary_partial", "RotaryEmbedding", [("x", x), ("pos", pos), ("cos", cos8), ("sin", sin8)],
               [("y", y)], {"rotary_embedding_dim": 8, "num_heads": n}, inits={"cos", "sin"})


def gqa_ref(q, k, v, pk, pv, seqlens, tsl, n, nkv, rot=None, window=-1, softcap=0.0, bias=None, sink=None):
    b, s, _ = q.shape
    h = q.shape[2] // n
    Q, K, V = heads(f64(q), n), heads(f64(k), nkv), heads(f64(v), nkv)
    p = 0 if pk is None else pk.shape[2]
    first = s == tsl
    if rot is not None:
        cos, sin, inter = rot
        for bi in range(b):
            for si in range(s):
                pos = si if first else seqlens[bi] + 1 - s + si
                Q[bi, :, si] = rope(Q[bi, :, si], f64(cos)[pos], f64(sin)[pos], inter)
                K[bi, :, si] = rope(K[bi, :, si], f64(cos)[pos], f64(sin)[pos], inter)
    lp = p + s
    PK, PV = np.zeros((b, nkv, lp, h)), np.zeros((b, nkv, lp, h))
    out = np.zeros((b, s, n, h))
    for bi in range(b):
        tot = int(seqlens[bi]) + 1
        pb = 0 if first else tot - s
        if pk is not None:
            PK[bi, :, :pb], PV[bi, :, :pb] = f64(pk)[bi, :, :pb], f64(pv)[bi, :, :pb]
        PK[bi, :, pb:pb + s], PV[bi, :, pb:pb + s] = K[bi], V[bi]
        for ni in range(n):
            g = ni // (n // nkv)
            sc = (Q[bi, ni] @ PK[bi, g, :tot].T) / math.sqrt(h)
            for i in range(s):
                eff = min(pb + i + 1, tot)
                lo = eff - window if 0 <= window < eff else 0
                xr = sc[i, lo:eff]
                if softcap > 0:
                    xr = softcap * np.tanh(xr / softcap)
                if bias is not None:
                    xr = xr + f64(bias)[0, ni, i, lo:eff]
                pr = softmax(xr[None], None if sink is None else float(sink[ni]))[0]
                out[bi, i, ni] = pr @ PV[bi, g, lo:eff]
    return out.reshape(b, s, n * h), PK, PV


def gqa_cases():
    n, nkv, h = 4, 2, 16
    b, s = 2, 5
    q, k, v = rand(b, s, n * h), rand(b, s, nkv * h), rand(b, s, nkv * h)
    cos, sin = caches(16, h // 2)
    seqlens, tsl = np.array([4, 2], np.int32), np.array(5, np.int32)
    y, pk_, pv_ = gqa_ref(q, k, v, None, None, seqlens, 5, n, nkv, rot=(cos, sin, False))
    write_case("gqa_prompt_rotary_padded", "GroupQueryAttention",
               [("q", q), ("k", k), ("v", v), ("pk", None), ("pv", None), ("seqlens", seqlens), ("tsl", tsl),
                ("cos", cos), ("sin", sin)],
               [("y", y), ("present_key", pk_), ("present_value", pv_)],
               {"num_heads": n, "kv_num_heads": nkv, "do_rotary": 1}, inits={"cos", "sin"})
    h2, p = 32, 6
    q, k, v = rand(b, 1, n * h2), rand(b, 1, nkv * h2), rand(b, 1, nkv * h2)
    pk, pv = rand(b, nkv, p, h2), rand(b, nkv, p, h2)
    cos, sin = caches(16, 8)
    seqlens, tsl = np.array([6, 4], np.int32), np.array(7, np.int32)
    y, pk_, pv_ = gqa_ref(q, k, v, pk, pv, seqlens, 7, n, nkv, rot=(cos, sin, True), window=3, softcap=2.0)
    write_case("gqa_decode_window_softcap_partial_rotary", "GroupQueryAttention",
               [("q", q), ("k", k), ("v", v), ("pk", pk), ("pv", pv), ("seqlens", seqlens), ("tsl", tsl),
                ("cos", cos), ("sin", sin)],
               [("y", y), ("present_key", pk_), ("present_value", pv_)],
               {"num_heads": n, "kv_num_heads": nkv, "do_rotary": 1, "rotary_interleaved": 1,
                "local_window_size": 3, "softcap": 2.0}, inits={"cos", "sin"})
    b, s, p = 1, 3, 4
    qkv = rand(b, s, (n + 2 * nkv) * h)
    pk, pv = rand(b, nkv, p, h), rand(b, nkv, p, h)
    ab, sink = rand(1, n, s, p + s), rand(n)
    seqlens, tsl = np.array([6], np.int32), np.array(7, np.int32)
    qq, kk, vv = qkv[..., :n * h], qkv[..., n * h:(n + nkv) * h], qkv[..., (n + nkv) * h:]
    y, pk_, pv_ = gqa_ref(qq, kk, vv, pk, pv, seqlens, 7, n, nkv, bias=ab, sink=sink)
    write_case("gqa_packed_chunk_bias_sink", "GroupQueryAttention",
               [("qkv", qkv), ("k", None), ("v", None), ("pk", pk), ("pv", pv), ("seqlens", seqlens), ("tsl", tsl),
                ("cos", None), ("sin", None), ("pos", None), ("ab", ab), ("sink", sink)],
               [("y", y), ("present_key", pk_), ("present_value", pv_)],
               {"num_heads": n, "kv_num_heads": nkv})


# ---- quantized ops -------------------------------------------------------------------------------------------------

def quantized_cases():
    v, h, block, bits = 10, 64, 32, 4
    blocks = h // block
    codes = RNG.integers(0, 16, (v, h)).astype(np.uint8)
    z = RNG.integers(0, 16, (v, blocks)).astype(np.uint8)
    scales = (RNG.random((v, blocks)) * 0.1 + 0.01).astype(np.float32)
    table = (codes.astype(np.float64) - z.repeat(block, 1)) * f64(scales).repeat(block, 1)
    idx = np.array([[0, 9, -1], [3, 3, 7]], np.int64)
    write_case("gather_block_quantized_zp", "GatherBlockQuantized",
               [("data", pack_codes(codes, bits)), ("idx", idx), ("scales", scales), ("zp", pack_codes(z, bits))],
               [("y", table[idx % v])], {"block_size": block, "bits": bits, "quantize_axis": 1},
               inits={"data", "scales", "zp"})
    table8 = (codes.astype(np.float64) - 8) * f64(scales).repeat(block, 1)
    write_case("gather_block_quantized_default_zp", "GatherBlockQuantized",
               [("data", pack_codes(codes, bits)), ("idx", idx[0]), ("scales", scales)],
               [("y", table8[idx[0] % v])], {"block_size": block, "bits": bits, "quantize_axis": 1},
               inits={"data", "scales"})
    m, k, n = 6, 16, 5
    a = RNG.integers(0, 256, (2, m // 2, k)).astype(np.uint8)
    b = RNG.integers(-128, 128, (k, n)).astype(np.int8)
    sa, sb = np.array(0.02, np.float32), (RNG.random(n) * 0.01 + 0.001).astype(np.float32)
    za, zb = np.array(120, np.uint8), np.zeros(n, np.int8)
    bias = rand(n)
    y = ((a.astype(np.float64) - 120) @ b.astype(np.float64)) * (float(sa) * f64(sb)) + f64(bias)
    write_case("matmul_integer_to_float", "MatMulIntegerToFloat",
               [("a", a), ("b", b), ("sa", sa), ("sb", sb), ("za", za), ("zb", zb), ("bias", bias)], [("y", y)],
               inits={"b", "sa", "sb", "za", "zb", "bias"})
    af = rand(3, k, scale=2.0)
    lo, hi = min(f64(af).min(), 0.0), max(f64(af).max(), 0.0)
    s = float(np.float32((hi - lo) / 255.0))  # the scale is a float32 value, as ORT computes it
    zp = np.clip(np.round(-lo / s), 0, 255)
    qa = np.clip(np.round(f64(af) / s) + zp, 0, 255)
    y = ((qa - zp) @ b.astype(np.float64)) * (s * f64(sb)) + f64(bias)
    write_case("dynamic_quantize_matmul", "DynamicQuantizeMatMul",
               [("a", af), ("b", b), ("sb", sb), ("zb", zb), ("bias", bias)], [("y", y)],
               inits={"b", "sb", "zb", "bias"})



def dynamic_quantize_linear():
    """ONNX DynamicQuantizeLinear: values on a grid whose range is exactly 255 (scale 1, zero point 100), with
    half-way values that round half to even; exact in fp32 too, so ORT must agree code for code."""
    grid = np.arange(-100, 156, dtype=np.float64)
    halves = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 100.5, 101.5])
    x = np.concatenate([RNG.permutation(grid), halves]).reshape(8, 33)
    lo, hi = min(x.min(), 0.0), max(x.max(), 0.0)
    scale = float(np.float32((hi - lo) / 255.0))
    zp = np.clip(np.round(-lo / scale), 0, 255)
    y = np.clip(np.round(x / scale) + zp, 0, 255).astype(np.uint8)
    write_case("dynamic_quantize_linear", "DynamicQuantizeLinear", [("x", x.astype(np.float32))],
               [("y", y), ("y_scale", np.array(scale)), ("y_zero_point", np.array(zp, np.uint8))], domain="")



def requant(a):
    """ORT's per-tensor uint8 dynamic quantization of a GEMM operand, dequantized (float64)."""
    lo, hi = min(a.min(), 0.0), max(a.max(), 0.0)
    scale = 1.0 if hi == lo else float(np.float32((hi - lo) / 255.0))
    zp = np.clip(np.round(-lo / scale), 0, 255)
    return (np.clip(np.round(a / scale) + zp, 0, 255) - zp) * scale


def dynamic_quantize_lstm():
    """com.microsoft DynamicQuantizeLSTM, forward, one sequence of length 4 in 5 steps: X requantized once over the
    steps computed, the hidden state before every recurrent product (one sequence: ORT's grouping of sequences per
    quantization follows its thread count beyond batch 1)."""
    seq, batch, inp, h = 5, 1, 6, 8
    x = rand(seq, batch, inp)
    w = RNG.integers(-100, 100, (1, inp, 4 * h)).astype(np.int8)
    r = RNG.integers(-100, 100, (1, h, 4 * h)).astype(np.int8)
    b = rand(1, 8 * h, scale=0.1)
    lens = np.array([4], np.int32)
    ws, rs = np.array([0.004], np.float32), np.array([0.003], np.float32)
    wz, rz = np.zeros(1, np.int8), np.zeros(1, np.int8)
    W = w[0].astype(np.float64) * float(ws[0])
    R = r[0].astype(np.float64) * float(rs[0])
    xq = requant(f64(x))
    sig = lambda v: 1 / (1 + np.exp(-v))
    hs, cs = np.zeros((batch, h)), np.zeros((batch, h))
    y = np.zeros((seq, 1, batch, h))
    bias = f64(b[0, :4 * h]) + f64(b[0, 4 * h:])
    for t in range(seq):
        read = np.stack([requant(row) for row in hs])
        for bi in range(batch):
            if t >= lens[bi]:
                continue
            g = xq[t, bi] @ W + read[bi] @ R + bias
            i, o, f, c = g[:h], g[h:2 * h], g[2 * h:3 * h], g[3 * h:]
            cs[bi] = sig(f) * cs[bi] + sig(i) * np.tanh(c)
            hs[bi] = sig(o) * np.tanh(cs[bi])
            y[t, 0, bi] = hs[bi]
    write_case("dynamic_quantize_lstm", "DynamicQuantizeLSTM",
               [("x", x), ("w", w), ("r", r), ("b", b), ("lens", lens), ("h0", None), ("c0", None), ("p", None),
                ("ws", ws), ("wz", wz), ("rs", rs), ("rz", rz)],
               [("y", y), ("y_h", hs[None]), ("y_c", cs[None])], {"hidden_size": h},
               inits={"w", "r", "b", "ws", "wz", "rs", "rz"})


if __name__ == "__main__":
    main()
