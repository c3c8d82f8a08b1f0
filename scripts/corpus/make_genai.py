"""onnxruntime-genai's model builder, at its defaults for the CPU (`-p fp32` and `-p int4 -e cpu`), on a small seeded
Llama directory with a word-level tokenizer (the builder saves one): OUT_DIR/genai_llama_{fp32,int4}/ with the
model, its weights and genai_config.json.

usage: python scripts/corpus/make_genai.py OUT_DIR [PRECISION...]      (run by scripts/corpus/make.sh; the precision
       zoo, scripts/zoo/make.sh, asks for fp16)
"""
import os
import subprocess
import sys
import tempfile

import torch
import transformers as t
from tokenizers import Tokenizer, models, pre_tokenizers

torch.manual_seed(0)
OUT = sys.argv[1]
CFG = t.LlamaConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, intermediate_size=128)


def source(d):
    t.LlamaForCausalLM(CFG).save_pretrained(d)
    tk = Tokenizer(models.WordLevel({f"w{i}": i for i in range(500)}, unk_token="w0"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    t.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="w0", bos_token="w1", eos_token="w2").save_pretrained(d)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for precision in sys.argv[2:] or ("fp32", "int4"):
            src = os.path.join(tmp, precision)
            source(src)
            dst = os.path.join(OUT, f"genai_llama_{precision}")
            subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", src, "-m", src, "-o", dst,
                            "-p", precision, "-e", "cpu", "-c", os.path.join(tmp, "cache")], check=True)
            print("made", dst)


if __name__ == "__main__":
    main()
