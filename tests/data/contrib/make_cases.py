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


if __name__ == "__main__":
    main()
