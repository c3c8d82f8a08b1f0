"""A precision zoo for `scripts/zoo/sweep.sh`: small real models (timm CNNs through the legacy exporter, optimum's
BERT, a Llama exported in native float16) in the precisions their toolchains write at their defaults, then copies
of some of them with one planted fault each. Random seeded weights; the hub is not needed.

Writes OUT_DIR/<model>.onnx and
- OUT_DIR/pristine.tsv: model, toolchain and settings (each must read clean, precision-limited or
  precision-insufficient, with ONNX Runtime's optimizations on and off);
- OUT_DIR/faults.tsv: source model, faulty copy, fault, the nodes a verdict may name first (the changed node and the
  node computing from it), comma-separated.

usage: python scripts/zoo/make.py OUT_DIR [NAME_FILTER]      (run by scripts/zoo/make.sh, in the corpus venv)
With ZOO_ARCHS=a,b,... (timm architectures, or ultralytics configs such as yolo11n) only those CNNs are made, in every precision and with their faults: a
zoo of models phantom's thresholds were not measured on.
"""
import os
import sys

import numpy as np
import onnx
import torch
from faults import plant  # scripts/zoo/faults.py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))
from makers import make_each  # noqa: E402  (scripts/corpus/makers.py)

OUT = sys.argv[1]
FILTER = sys.argv[2] if len(sys.argv) > 2 else ""
ARCHS = ["resnet18", "mobilenetv3_small_100", "repvit_m0_9", "mobilevitv2_050", "convnext_atto"]
CNNS_ONLY = bool(os.environ.get("ZOO_ARCHS"))
ARCHS = os.environ["ZOO_ARCHS"].split(",") if CNNS_ONLY else ARCHS
PRISTINE, FAULTS = [], []


def path(name):
    return os.path.join(OUT, name + ".onnx")


def export_timm(arch):
    import timm
    torch.manual_seed(0)
    m = timm.create_model(arch, pretrained=False).eval()
    # timm zero-initialises the last norm of each residual block (its branch computes zeros) and leaves the others
    # at identity; random ones, as training leaves them, make every value and bias informative.
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.LayerNorm, torch.nn.GroupNorm)) \
                    and mod.weight is not None:
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
        for name, param in m.named_parameters():
            if name.endswith("gamma"):  # layer scale, 1e-6 at init
                param.uniform_(0.1, 1.0)
    torch.onnx.export(m, (torch.randn(1, 3, 224, 224),), path(arch), dynamo=False, input_names=["input"],
                      output_names=["logits"])
    PRISTINE.append((arch, "timm + torch.onnx.export(dynamo=False)", "fp32"))


def export_yolo(cfg):
    """An ultralytics detector from its config (random weights), exported at ultralytics' defaults (640²)."""
    import shutil
    from ultralytics import YOLO
    torch.manual_seed(0)
    shutil.move(YOLO(cfg + ".yaml").export(format="onnx"), path(cfg))
    PRISTINE.append((cfg, "ultralytics export", "defaults"))


def export(arch):
    return export_yolo(arch) if arch.startswith("yolo") else export_timm(arch)


def calibration(src):
    """Eight seeded N(0, 1) batches for the model's one input, by its name and shape."""
    rng = np.random.default_rng(0)
    i = onnx.load(path(src), load_external_data=False).graph.input[0]
    shape = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
    return [{i.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(8)]


def images(src):
    from onnxruntime.quantization import CalibrationDataReader

    class Images(CalibrationDataReader):
        def __init__(self):
            self.left = calibration(src)

        def get_next(self):
            return self.left.pop() if self.left else None
    return Images()


def qstatic(src, tag, **kw):
    from onnxruntime.quantization import quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    pre = path(src + "__pre")
    quant_pre_process(path(src), pre)
    quantize_static(pre, path(f"{src}__{tag}"), images(src), **kw)
    os.remove(pre)
    shown = ", ".join(f"{k}={getattr(v, 'name', v)}" for k, v in kw.items()) or "defaults"
    PRISTINE.append((f"{src}__{tag}", "onnxruntime quantize_static (after quant_pre_process)", shown))


def static_variants(src):
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType
    yield "qdq", {}
    yield "qdq_pc", {"per_channel": True}
    yield "qdq_u8_entropy", {"activation_type": QuantType.QUInt8, "calibrate_method": CalibrationMethod.Entropy}
    yield "qdq_percentile", {"calibrate_method": CalibrationMethod.Percentile}
    yield "qop", {"quant_format": QuantFormat.QOperator}
    yield "qop_u8_pc", {"quant_format": QuantFormat.QOperator, "activation_type": QuantType.QUInt8,
                        "per_channel": True}


def nncf_q(src):
    import nncf
    data = calibration(src)
    onnx.save(nncf.quantize(onnx.load(path(src)), nncf.Dataset(data), subset_size=8), path(src + "__nncf"))
    PRISTINE.append((src + "__nncf", "nncf.quantize", "defaults"))


def fp16(src):
    from onnxconverter_common import float16
    m = float16.convert_float_to_float16(onnx.load(path(src)), keep_io_types=True)
    onnx.save(m, path(src + "__fp16"))
    PRISTINE.append((src + "__fp16", "onnxconverter-common float16", "keep_io_types=True"))


def bert():
    import transformers as t
    from optimum.exporters.onnx import main_export
    torch.manual_seed(0)
    d = os.path.join(OUT, "src_bert")
    t.BertModel(t.BertConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=128)).save_pretrained(d)
    main_export(d, output=os.path.join(OUT, "optimum_bert"), task="feature-extraction")
    os.replace(os.path.join(OUT, "optimum_bert", "model.onnx"), path("bert"))
    PRISTINE.append(("bert", "optimum-onnx main_export", "feature-extraction"))


def bert_quantized():
    from onnxruntime.quantization import quantize_dynamic
    quantize_dynamic(path("bert"), path("bert__qdyn"))
    PRISTINE.append(("bert__qdyn", "onnxruntime quantize_dynamic", "defaults"))
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    for level in (0, 4):
        q = MatMulNBitsQuantizer(onnx.load(path("bert")), accuracy_level=level)
        q.process()
        q.model.save_model_to_file(path(f"bert__int4_acc{level}"))
        PRISTINE.append((f"bert__int4_acc{level}", "onnxruntime MatMulNBitsQuantizer", f"accuracy_level={level}"))


def llama_fp16():
    """A Llama decoder exported in native float16 (weights and activations in fp16, RoPE computed in the graph), no
    cache."""
    import transformers as t
    torch.manual_seed(0)
    cfg = t.LlamaConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, intermediate_size=128)
    m = t.LlamaForCausalLM(cfg).eval().half()

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).logits
    ids = torch.randint(0, 500, (1, 16))
    seq = torch.export.Dim("seq", min=2, max=64)  # a dynamic length keeps RoPE's angles, Cos and Sin in the graph
    torch.onnx.export(Logits(m), (ids,), path("llama_fp16"), dynamo=True, input_names=["input_ids"],
                      output_names=["logits"], external_data=False, dynamic_shapes={"ids": {1: seq}})
    PRISTINE.append(("llama_fp16", "transformers + torch.onnx.export(dynamo=True)", "LlamaForCausalLM.half()"))


def makers():
    for arch in ARCHS:
        yield arch, lambda arch=arch: export(arch)
        for tag, kw in static_variants(arch):
            yield f"{arch}__{tag}", lambda arch=arch, tag=tag, kw=kw: qstatic(arch, tag, **kw)
        yield f"{arch}__nncf", lambda arch=arch: nncf_q(arch)
        yield f"{arch}__fp16", lambda arch=arch: fp16(arch)
        for variant in ("", "__qdq", "__qdq_pc", "__qop", "__fp16"):
            yield f"{arch}{variant}__faults", lambda m=arch + variant: FAULTS.extend(plant(OUT, m))
    if CNNS_ONLY:
        return
    yield "bert", bert
    yield "bert__quantized", bert_quantized
    yield "bert__faults", lambda: FAULTS.extend(plant(OUT, "bert"))
    yield "llama_fp16", llama_fp16


def main():
    os.makedirs(OUT, exist_ok=True)
    failed = make_each(makers(), FILTER)
    for name, rows in (("pristine", PRISTINE), ("faults", FAULTS)):
        with open(os.path.join(OUT, f"{name}.tsv"), "a" if FILTER else "w") as f:
            for row in rows:
                f.write("\t".join(row) + "\n")
    print(f"{len(PRISTINE)} pristine, {len(FAULTS)} faulty made, {len(failed)} failed: {failed}")


if __name__ == "__main__":
    sys.exit(main())
