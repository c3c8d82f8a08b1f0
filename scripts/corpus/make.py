"""A corpus of real exports, made by the toolchains themselves at their defaults, from small seeded configs (random
weights: the hub is not needed). Writes OUT_DIR/<name>.onnx (plus the files a toolchain writes beside it) and
OUT_DIR/corpus.tsv listing each model with the toolchain and the command that made it.

usage: python scripts/corpus/make.py OUT_DIR [NAME_FILTER]      (run by scripts/corpus/make.sh, which makes the venv;
       onnxruntime-genai's builder runs from make_genai.py, in an environment of its own)
"""
import os
import shutil
import sys
import tempfile

import torch
from makers import make_each  # scripts/corpus/makers.py

torch.manual_seed(0)
OUT = sys.argv[1]
FILTER = sys.argv[2] if len(sys.argv) > 2 else ""
ROWS = []


def record(name, toolchain, how):
    ROWS.append((name, toolchain, how))


def optimum(name, model_dir, task, **kw):
    """optimum-onnx's main_export of a local model directory; the files it writes go to OUT/name/."""
    from optimum.exporters.onnx import main_export
    out = os.path.join(OUT, name)
    main_export(model_dir, output=out, task=task, **kw)
    record(name, "optimum-onnx", f"main_export(task={task!r})")


def saved(model, tmp, tag, extra=None):
    d = os.path.join(tmp, tag)
    model.save_pretrained(d)
    if extra:
        extra(d)
    return d


def hf_models(tmp):
    import transformers as t
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    yield "bert", lambda: optimum("optimum_bert", saved(t.BertModel(t.BertConfig(vocab_size=500, **small)), tmp, "bert"),
                                  "feature-extraction")
    yield "gpt2", lambda: optimum("optimum_gpt2_with_past", saved(t.GPT2LMHeadModel(t.GPT2Config(
        vocab_size=500, n_embd=64, n_layer=2, n_head=4)), tmp, "gpt2"), "text-generation-with-past")
    yield "llama", lambda: optimum("optimum_llama_with_past", saved(t.LlamaForCausalLM(t.LlamaConfig(
        vocab_size=500, num_key_value_heads=2, **small)), tmp, "llama"), "text-generation-with-past")
    yield "vit", lambda: optimum("optimum_vit", saved(t.ViTForImageClassification(t.ViTConfig(
        image_size=64, patch_size=16, num_labels=10, **small)), tmp, "vit"), "image-classification")
    yield "t5", lambda: optimum("optimum_t5_with_past", saved(t.T5ForConditionalGeneration(t.T5Config(
        vocab_size=500, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)), tmp, "t5"),
        "text2text-generation-with-past")
    yield "whisper", lambda: optimum("optimum_whisper_with_past", saved(t.WhisperForConditionalGeneration(
        t.WhisperConfig(vocab_size=500, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=80,
                        max_source_positions=1500, max_target_positions=64, pad_token_id=1, bos_token_id=2,
                        eos_token_id=3, decoder_start_token_id=2)), tmp, "whisper"),
        "automatic-speech-recognition-with-past")


def timm_models():
    import timm
    for arch in ["resnet18", "mobilenetv3_small_100", "convnext_atto", "efficientnet_b0", "vit_tiny_patch16_224",
                 "repvit_m0_9", "mobilevitv2_050"]:
        for dynamo in (True, False):
            tag = "dynamo" if dynamo else "legacy"

            def make(arch=arch, dynamo=dynamo, tag=tag):
                m = timm.create_model(arch, pretrained=False).eval()
                x = torch.randn(1, 3, 224, 224)
                path = os.path.join(OUT, f"timm_{arch}_{tag}.onnx")
                torch.onnx.export(m, (x,), path, dynamo=dynamo, input_names=["input"], output_names=["logits"])
                record(os.path.basename(path)[:-5], f"timm + torch.onnx.export(dynamo={dynamo})", arch)
            yield f"timm_{arch}_{tag}", make


def ultralytics_models():
    from ultralytics import YOLO
    for cfg, kw in [("yolo11n.yaml", {}), ("yolo11n.yaml", {"dynamic": True}), ("yolo11n.yaml", {"nms": True}),
                    ("yolo11n-seg.yaml", {}), ("yolo11n-cls.yaml", {})]:
        tag = cfg[:-5] + "".join(f"_{k}" for k in kw)

        def make(cfg=cfg, kw=kw, tag=tag):
            path = YOLO(cfg).export(format="onnx", imgsz=320, **kw)
            shutil.move(path, os.path.join(OUT, f"ultralytics_{tag}.onnx"))
            record(f"ultralytics_{tag}", "ultralytics export", f"{cfg} {kw}")
        yield f"ultralytics_{tag}", make
    yield "ultralytics_yolo11t_nms_boxes", tiny_yolo_with_boxes


def tiny_yolo_with_boxes():
    """YOLO11 at a tiny width (a scale of the stock yolo11.yaml, 4 classes), exported by ultralytics with
    `nms=True` at its defaults. Random weights keep no box (the head's class biases start at a prior of about 1%), so
    the head's last convolutions are redrawn (a seeded normal) before the export: the NMS then keeps boxes."""
    import yaml
    import ultralytics
    from ultralytics import YOLO
    cfg = yaml.safe_load(open(os.path.join(os.path.dirname(ultralytics.__file__), "cfg/models/11/yolo11.yaml")))
    cfg["scales"], cfg["nc"] = {"t": [0.33, 0.0625, 1024]}, 4
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "yolo11t.yaml")
        yaml.safe_dump(cfg, open(path, "w"))
        torch.manual_seed(0)
        model = YOLO(path)
        g = torch.Generator().manual_seed(1)
        head = model.model.model[-1]
        for seq in list(head.cv2) + list(head.cv3):
            conv = seq[-1]
            conv.weight.data = torch.randn(conv.weight.shape, generator=g) * 0.05
            conv.bias.data = torch.randn(conv.bias.shape, generator=g) * 0.5
        out = model.export(format="onnx", imgsz=64, nms=True)
        shutil.move(out, os.path.join(OUT, "ultralytics_yolo11t_nms_boxes.onnx"))
    record("ultralytics_yolo11t_nms_boxes", "ultralytics export", "yolo11.yaml scale t (width 1/16), nc 4, "
           "head redrawn; nms=True imgsz=64")


def diffusers_models():
    import diffusers as d
    unet = d.UNet2DModel(sample_size=32, in_channels=3, out_channels=3, layers_per_block=1,
                         block_out_channels=(32, 64), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                         up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8).eval()
    vae = d.AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(32, 64), layers_per_block=1,
                          down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                          latent_channels=4, norm_num_groups=8).eval()

    class Decode(torch.nn.Module):
        def __init__(self, vae):
            super().__init__()
            self.vae = vae

        def forward(self, z):
            return self.vae.decode(z).sample

    class Denoise(torch.nn.Module):
        def __init__(self, unet):
            super().__init__()
            self.unet = unet

        def forward(self, x, t):
            return self.unet(x, t).sample

    def unet_export():
        path = os.path.join(OUT, "diffusers_unet2d.onnx")
        torch.onnx.export(Denoise(unet), (torch.randn(1, 3, 32, 32), torch.tensor([10])), path,
                          input_names=["sample", "timestep"], output_names=["out"])
        record("diffusers_unet2d", "diffusers + torch.onnx.export", "UNet2DModel")

    def vae_export():
        path = os.path.join(OUT, "diffusers_vae_decoder.onnx")
        torch.onnx.export(Decode(vae), (torch.randn(1, 4, 16, 16),), path, input_names=["latent"],
                          output_names=["image"])
        record("diffusers_vae_decoder", "diffusers + torch.onnx.export", "AutoencoderKL.decode")
    yield "diffusers_unet", unet_export
    yield "diffusers_vae", vae_export


def derived():
    """What other tools write from the models above: onnxslim, ONNX Runtime's transformer optimizer, quantizers."""
    def slim(src, dst):
        import onnxslim
        onnxslim.slim(os.path.join(OUT, src), os.path.join(OUT, dst))
        record(dst[:-5], "onnxslim", f"slim({src})")

    def ort_opt(src, dst, fp16):
        from onnxruntime.transformers import optimizer
        m = optimizer.optimize_model(os.path.join(OUT, src), model_type="bert", num_heads=4, hidden_size=64)
        if fp16:
            m.convert_float_to_float16(keep_io_types=True)
        m.save_model_to_file(os.path.join(OUT, dst))
        record(dst[:-5], "onnxruntime.transformers.optimizer", f"bert fp16={fp16}")

    def qdyn(src, dst):
        from onnxruntime.quantization import quantize_dynamic
        quantize_dynamic(os.path.join(OUT, src), os.path.join(OUT, dst))
        record(dst[:-5], "onnxruntime quantize_dynamic", src)

    def qstatic(src, dst, **kw):
        import numpy as np
        from onnxruntime.quantization import CalibrationDataReader, quantize_static
        rng = np.random.default_rng(0)

        class Images(CalibrationDataReader):
            def __init__(self):
                self.left = [{"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(4)]

            def get_next(self):
                return self.left.pop() if self.left else None
        quantize_static(os.path.join(OUT, src), os.path.join(OUT, dst), Images(), **kw)
        record(dst[:-5], "onnxruntime quantize_static", f"{src} {kw}")

    def fp16(src, dst):
        import onnx
        from onnxconverter_common import float16
        m = float16.convert_float_to_float16(onnx.load(os.path.join(OUT, src)), keep_io_types=True)
        onnx.save(m, os.path.join(OUT, dst))
        record(dst[:-5], "onnxconverter-common float16", f"{src} keep_io_types=True")

    def sim(src, dst):
        import onnx
        import onnxsim
        m, ok = onnxsim.simplify(onnx.load(os.path.join(OUT, src)))
        assert ok
        onnx.save(m, os.path.join(OUT, dst))
        record(dst[:-5], "onnxsim", src)

    def nncf_q(src, dst):
        import nncf
        import numpy as np
        import onnx
        rng = np.random.default_rng(0)
        data = [{"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(4)]
        q = nncf.quantize(onnx.load(os.path.join(OUT, src)), nncf.Dataset(data), subset_size=4)
        onnx.save(q, os.path.join(OUT, dst))
        record(dst[:-5], "nncf.quantize", src)

    yield "qdq_resnet18", lambda: qstatic("timm_resnet18_legacy.onnx", "qdq_timm_resnet18.onnx")
    yield "qdq_pc_mobilenetv3", lambda: qstatic("timm_mobilenetv3_small_100_legacy.onnx",
                                                "qdq_pc_timm_mobilenetv3.onnx", per_channel=True)
    yield "qdq_convnext", lambda: qstatic("timm_convnext_atto_legacy.onnx", "qdq_timm_convnext_atto.onnx")
    yield "nncf_resnet18", lambda: nncf_q("timm_resnet18_legacy.onnx", "nncf_timm_resnet18.onnx")
    yield "fp16_efficientnet", lambda: fp16("timm_efficientnet_b0_legacy.onnx", "fp16_timm_efficientnet_b0.onnx")
    yield "fp16_vit", lambda: fp16("timm_vit_tiny_patch16_224_dynamo.onnx", "fp16_timm_vit_tiny.onnx")
    yield "sim_repvit", lambda: sim("timm_repvit_m0_9_legacy.onnx", "sim_timm_repvit_m0_9.onnx")
    yield "slim_resnet18", lambda: slim("timm_resnet18_dynamo.onnx", "slim_timm_resnet18_dynamo.onnx")
    yield "slim_mobilevit", lambda: slim("timm_mobilevitv2_050_legacy.onnx", "slim_timm_mobilevitv2_050_legacy.onnx")
    yield "ortopt_bert", lambda: ort_opt("optimum_bert/model.onnx", "ortopt_bert_fp32.onnx", False)
    yield "ortopt_bert_fp16", lambda: ort_opt("optimum_bert/model.onnx", "ortopt_bert_fp16.onnx", True)
    yield "qdyn_bert", lambda: qdyn("optimum_bert/model.onnx", "qdyn_bert.onnx")


def main():
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        makers = [*hf_models(tmp), *timm_models(), *ultralytics_models(), *diffusers_models(),
                  *derived()]
        failed = make_each(makers, FILTER)
    with open(os.path.join(OUT, "corpus.tsv"), "w") as f:
        for row in ROWS:
            f.write("\t".join(row) + "\n")
    print(f"{len(ROWS)} made, {len(failed)} failed: {failed}")


if __name__ == "__main__":
    main()
