#!/usr/bin/env python3
"""Generates the dumps of tests/it/diff.rs (a few KB each). torch is not needed: `.pt` files are written in
torch.save's own zip layout (archive/data.pkl with torch._utils._rebuild_tensor_v2 and persistent storage ids,
archive/data/<key>, byteorder, version), with the pickle opcodes spelled out — what torch ≥ 1.6 writes for a dict of
tensors at protocol 2. Run: python3 tests/data/diff/make_dumps.py (needs numpy)."""

import io
import json
import os
import shutil
import struct
import tarfile
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
STORAGE = {np.float32: "FloatStorage", np.float16: "HalfStorage", np.float64: "DoubleStorage",
           np.int64: "LongStorage"}


def _str(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _int(i):
    return b"J" + struct.pack("<i", i)


def _tuple(items):
    return b"(" + b"".join(items) + b"t"


def _tensor(key, a, legacy=False):
    """Pickle opcodes of one tensor whose storage is data/<key> (legacy: storage `key` after the pickles)."""
    numel = a.size
    strides = [int(s // a.itemsize) for s in a.strides]
    pid_items = [_str("storage"), b"ctorch\n" + STORAGE[a.dtype.type].encode() + b"\n", _str(key), _str("cpu"),
                 _int(numel)] + ([b"N"] if legacy else [])
    pid = _tuple(pid_items) + b"Q"
    args = _tuple([pid, _int(0), _tuple([_int(d) for d in a.shape]), _tuple([_int(s) for s in strides]), b"\x89",
                   b"ccollections\nOrderedDict\n)R"])
    return b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R"


def save_pt(path, tensors, extra_pickle=None):
    """torch.save(dict) in the zip layout; `extra_pickle` replaces data.pkl (for the malicious file)."""
    body = b"}(" + b"".join(_str(k) + _tensor(str(i), np.ascontiguousarray(a))
                            for i, (k, a) in enumerate(tensors.items())) + b"u"
    pkl = extra_pickle or (b"\x80\x02" + body + b".")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        for i, a in enumerate(tensors.values()):
            z.writestr(f"archive/data/{i}", np.ascontiguousarray(a).tobytes())
        z.writestr("archive/version", "3\n")


def save_pt_legacy(path, tensors):
    """torch.save(dict, _use_new_zipfile_serialization=False): five pickles (magic number, protocol, system info, the
    object, the storage keys), then each storage as its element count and raw bytes."""
    import pickle
    out = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2)
    out += pickle.dumps({"protocol_version": 1001, "little_endian": True,
                         "type_sizes": {"short": 2, "int": 4, "long": 4}}, protocol=2)
    body = b"}(" + b"".join(_str(k) + _tensor(str(i), np.ascontiguousarray(a), legacy=True)
                            for i, (k, a) in enumerate(tensors.items())) + b"u"
    out += b"\x80\x02" + body + b"."
    out += pickle.dumps([str(i) for i in range(len(tensors))], protocol=2)
    for a in tensors.values():
        a = np.ascontiguousarray(a)
        out += struct.pack("<q", a.size) + a.tobytes()
    with open(path, "wb") as f:
        f.write(out)


def save_safetensors(path, tensors):
    """safetensors with BF16 (given as uint16 bit patterns under a `bf16:` key prefix) and the numpy types."""
    header, blobs, at = {}, [], 0
    for k, a in tensors.items():
        dtype = {np.float32: "F32", np.float16: "F16", np.uint16: "BF16", np.int64: "I64"}[a.dtype.type]
        b = np.ascontiguousarray(a).tobytes()
        header[k] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def bf16_bits(a):
    """Round-to-nearest-even bfloat16 bit patterns of float32 values."""
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def layers(rng):
    """A 4-layer model's per-layer activations (batch 2, sequence 3, hidden 8)."""
    out = {}
    h = rng.standard_normal((2, 3, 8)).astype(np.float32)
    for i in range(4):
        attn = np.tanh(h * 0.5).astype(np.float32)
        out[f"layer{i}_attn"] = attn
        h = (h + attn).astype(np.float32)
        mlp = (np.maximum(h, 0) * 0.3).astype(np.float32)
        out[f"layer{i}_mlp"] = mlp
        h = (h + mlp).astype(np.float32)
    return out


def tp_pair(root):
    """TP=1 (A) against TP=2 (B): B's activations split along the hidden axis into rank0/, rank1/, B's layer2_mlp
    off by 1e-2 (the divergence), B's layer1_attn written sequence-first (transposed)."""
    rng = np.random.default_rng(0)
    a = layers(rng)
    b = {k: v.copy() for k, v in a.items()}
    b["layer2_mlp"] = b["layer2_mlp"] + np.float32(1e-2)
    for d in ("tp1", "tp2"):
        shutil.rmtree(os.path.join(root, d), ignore_errors=True)
    os.makedirs(os.path.join(root, "tp1"))
    for k, v in a.items():
        save_pt(os.path.join(root, "tp1", f"{k}.pth"), {"out": v})
    for r in range(2):
        os.makedirs(os.path.join(root, "tp2", f"rank{r}"))
        for k, v in b.items():
            shard = v[..., r * 4:(r + 1) * 4]
            if k == "layer1_attn":
                shard = shard.transpose(1, 0, 2)
            save_pt(os.path.join(root, "tp2", f"rank{r}", f"{k}.pth"), {"out": shard})
    # The same runs zipped and tarred (the archives phantom diff unpacks, and phantom serve's uploads).
    for name, mode, src in (("tp1.zip", "zip", "tp1"), ("tp1.tar.gz", "gztar", "tp1"), ("tp2.zip", "zip", "tp2")):
        base = os.path.join(root, name.split(".")[0] + "_archive")
        made = shutil.make_archive(base, mode, os.path.join(root, src))
        os.replace(made, os.path.join(root, name))


def fused_and_bf16(root):
    """A: separate attn output and residual (npz); B: their fused sum and bf16 copies (safetensors)."""
    rng = np.random.default_rng(1)
    attn = rng.standard_normal((4, 8)).astype(np.float32)
    resid = rng.standard_normal((4, 8)).astype(np.float32)
    np.savez(os.path.join(root, "unfused.npz"), attn=attn, residual=resid, logits=attn * 2)
    save_pt_legacy(os.path.join(root, "legacy.pt"), {"attn": attn, "residual": resid, "logits": attn * 2})
    save_safetensors(os.path.join(root, "fused_bf16.safetensors"),
                     {"hidden": (attn + resid).astype(np.float32), "logits": bf16_bits(attn * 2)})


def bad_inputs(root):
    """A pickle that calls os.system, a zip-slip entry, a zip bomb, a truncated .npy and a file that is no zip."""
    cmd = b"echo pwned >&2"
    evil = b"\x80\x02cposix\nsystem\nq\x00X" + struct.pack("<I", len(cmd)) + cmd + b"q\x01\x85q\x02Rq\x03."
    save_pt(os.path.join(root, "evil.pt"), {"x": np.zeros(2, np.float32)}, extra_pickle=evil)
    with zipfile.ZipFile(os.path.join(root, "slip.zip"), "w") as z:
        z.writestr("ok.npy", npy_bytes(np.ones(3, np.float32)))
        z.writestr("../../escaped.npy", npy_bytes(np.ones(3, np.float32)))
    with zipfile.ZipFile(os.path.join(root, "bomb.zip"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("zeros.npy", b"\0" * (64 << 20))
    good = npy_bytes(np.arange(64, dtype=np.float32))
    os.makedirs(os.path.join(root, "truncated"), exist_ok=True)
    with open(os.path.join(root, "truncated", "x.npy"), "wb") as f:
        f.write(good[: len(good) - 40])
    with open(os.path.join(root, "notazip.zip"), "wb") as f:
        f.write(b"this is not a zip archive")


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


if __name__ == "__main__":
    tp_pair(HERE)
    fused_and_bf16(HERE)
    bad_inputs(HERE)
    os.makedirs(os.path.join(HERE, "truncated_ok"), exist_ok=True)
    np.save(os.path.join(HERE, "truncated_ok", "x.npy"), np.arange(64, dtype=np.float32))
