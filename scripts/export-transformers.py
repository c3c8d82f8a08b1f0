#!/usr/bin/env python3
"""Export 20 Hugging Face transformers architectures built from small configs (random weights, seed 0; no download)
with both of torch's ONNX exporters: TorchScript (opset 17; GPT-2, Llama and the T5 dynamo export fail in torch
itself and are reported as FAIL) and dynamo (opset 18). Encoders (BERT, DistilBERT, RoBERTa, ALBERT, ELECTRA,
DeBERTa-v2, MobileBERT, T5 encoder, BART encoder), decoders (GPT-2, Llama, Qwen2, Phi), vision (ViT, CLIP vision,
ConvNeXt, SegFormer, MobileViT) and audio (Whisper encoder, wav2vec2). `--train` exports in training mode (the
mistake of forgetting `model.eval()`: Dropout nodes in training mode).

usage: python3 scripts/export-transformers.py OUT_DIR [--train]   then: python3 scripts/real_models.py OUT_DIR
needs: pip install torch transformers onnx onnxscript
"""
import os
import sys
import warnings

import torch
import transformers as T

warnings.filterwarnings("ignore")
out = sys.argv[1]
train = "--train" in sys.argv[2:]
torch.manual_seed(0)
small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
seq2 = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=128, decoder_ffn_dim=128)
ZOO = {
    "bert": (lambda: T.BertModel(T.BertConfig(**small, vocab_size=1000)), "ids"),
    "distilbert": (lambda: T.DistilBertModel(T.DistilBertConfig(dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                                                vocab_size=1000)), "ids"),
    "roberta": (lambda: T.RobertaModel(T.RobertaConfig(**small, vocab_size=1000)), "ids"),
    "albert": (lambda: T.AlbertModel(T.AlbertConfig(**small, embedding_size=32, vocab_size=1000)), "ids"),
    "electra": (lambda: T.ElectraModel(T.ElectraConfig(**small, embedding_size=32, vocab_size=1000)), "ids"),
    "deberta_v2": (lambda: T.DebertaV2Model(T.DebertaV2Config(**small, vocab_size=1000)), "ids"),
    "mobilebert": (lambda: T.MobileBertModel(T.MobileBertConfig(vocab_size=1000, num_hidden_layers=2)), "ids"),
    "t5enc": (lambda: T.T5EncoderModel(T.T5Config(d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16,
                                                  vocab_size=1000)), "ids"),
    "bart_enc": (lambda: T.BartModel(T.BartConfig(**seq2, vocab_size=1000)).encoder, "ids"),
    "gpt2": (lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=1000)), "ids"),
    "llama": (lambda: T.LlamaForCausalLM(T.LlamaConfig(**small, vocab_size=1000, num_key_value_heads=2)), "ids"),
    "qwen2": (lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**small, vocab_size=1000, num_key_value_heads=2)), "ids"),
    "phi": (lambda: T.PhiForCausalLM(T.PhiConfig(**small, vocab_size=1000)), "ids"),
    "vit": (lambda: T.ViTModel(T.ViTConfig(**small, image_size=64, patch_size=16)), "pixels"),
    "clip_vision": (lambda: T.CLIPVisionModel(T.CLIPVisionConfig(**small, image_size=64, patch_size=16)), "pixels"),
    "convnext": (lambda: T.ConvNextModel(T.ConvNextConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])),
                 "pixels"),
    "segformer": (lambda: T.SegformerModel(T.SegformerConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                                             decoder_hidden_size=64)), "pixels"),
    "mobilevit": (lambda: T.MobileViTModel(T.MobileViTConfig(image_size=64, hidden_sizes=[32, 48, 64],
                                                             neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 128])),
                  "pixels"),
    "whisper_enc": (lambda: T.WhisperModel(T.WhisperConfig(**seq2, num_mel_bins=80, max_source_positions=100)).encoder,
                    "mel"),
    "wav2vec2": (lambda: T.Wav2Vec2Model(T.Wav2Vec2Config(**small, conv_dim=(32, 32), conv_stride=(5, 2),
                                                          conv_kernel=(10, 3), num_feat_extract_layers=2,
                                                          num_conv_pos_embeddings=16,
                                                          num_conv_pos_embedding_groups=4)), "audio"),
}
ARGS = {
    "ids": lambda: (torch.randint(0, 1000, (1, 16)),),
    "pixels": lambda: (torch.randn(1, 3, 64, 64),),
    "mel": lambda: (torch.randn(1, 80, 200),),
    "audio": lambda: (torch.randn(1, 4000),),
}


class Wrapped(torch.nn.Module):
    """The model's first output (logits, or the last hidden state) as one tensor."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        o = self.m(x)
        if isinstance(o, tuple):
            return o[0]
        return o.logits if getattr(o, "logits", None) is not None else o.last_hidden_state


os.makedirs(out, exist_ok=True)
for name, (make, kind) in ZOO.items():
    model = make()
    model = model.train() if train else model.eval()
    if hasattr(model, "config"):
        model.config.use_cache = False
    w = Wrapped(model)
    w = w.train() if train else w.eval()
    for dynamo in (False, True):
        path = os.path.join(out, f"{name}_{'dynamo' if dynamo else 'ts'}{'_train' if train else ''}.onnx")
        try:
            torch.onnx.export(w, ARGS[kind](), path, opset_version=18 if dynamo else 17, dynamo=dynamo,
                              input_names=["x"], output_names=["y"])
            print("ok", path, flush=True)
        except Exception as e:  # an exporter limitation, not phantom's
            print("FAIL", path, type(e).__name__, str(e).splitlines()[0][:160], flush=True)
