"""Runs `phantom onnx` (ORT CPU fp32 vs the f64 reference, default tolerances) on the real-world models fetched by
scripts/fetch-real-models.sh and prints one row per model: verdict, nodes, coverage, reduced-precision nodes, time.

usage: python3 scripts/real_models.py MODELS_DIR [PHANTOM_BINARY]
PHANTOM_SWEEP_FLAGS (environment): more flags for every run, e.g. "--ep cuda" or "--ep cuda --precision fp16".
PHANTOM_SWEEP_OUT (environment): a folder that keeps every JSON report (MODEL.json).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

# Concrete shapes that run (dims not given default to 1); models not listed run with no flags.
ARGS = {
    "ppocr_det_v4": ["--shape", "x=1x3x640x640"],
    "ppocr_det_v6s": ["--shape", "x=1x3x640x640"],
    "ppocr_rec_v4": ["--shape", "x=1x3x48x320"],
    "ppocr_rec_v6s": ["--shape", "x=1x3x48x320"],
    "ppocr_cls_v2": ["--shape", "x=1x3x48x192"],
    "text_orientation": [],
    "open_nsfw": [],
    "yolov8n_nudenet": ["--shape", "images=1x3x320x320"],
    "picodet_layout": [],
    "ddddocr_det": [],
    "ddddocr_rec": ["--shape", "input1=1x1x64x256"],
    "minilm_l3": ["--dim", "sequence_length=16"],
    "magika": ["--val-range", "0,256"],
    "mtcnn_pnet": ["--shape", "input_1=1x48x64x3"],
    "mtcnn_rnet": [],
    "mtcnn_onet": [],
    "oww_melspec": ["--shape", "input=1x5120"],
    "oww_embedding": ["--shape", "input_1=1x76x32x1"],
    "oww_hey_jarvis": [],
    "captcha_crnn": [],
    "silero_vad_ifless": ["--shape", "input=1x512", "--shape", "state=2x1x128"],
    "silero_vad": ["--shape", "input=1x512", "--shape", "state=2x1x128"],
    "romanizer_enc": ["--dim", "src_len=12"],
    "romanizer_dec": ["--dim", "tgt_len=3", "--dim", "src_len=12"],
    "trueocr_order": ["--dim", "N=20"],
    "trueocr_rec": ["--shape", "x=1x1x96x384"],
    # scales = [noise, length, noise_w]; --val-range 1,2 keeps them in [1, 2) (N(0,1) could make length_scale
    # negative) and makes input_lengths 1 (only the first phoneme is unmasked). Phoneme ids come from the table.
    "vits_piper_joe": ["--dim", "phonemes=16", "--val-range", "1,2"],
    "t5_enc_dynquant": ["--dim", "encoder_sequence_length=16"],
    "minilm_dynamo_int8": ["--dim", "sequence=16"],
}


def main():
    models_dir = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else "target/release/phantom"
    flags = os.environ.get("PHANTOM_SWEEP_FLAGS", "").split()
    print("| model | verdict | nodes | compared / values | unchecked | reduced-precision ref nodes | first divergence | culprit (cause) | time (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    keep = os.environ.get("PHANTOM_SWEEP_OUT")
    # The models above with their flags, then every other model in the folder with none (phantom's defaults).
    others = sorted(f[:-5] for f in os.listdir(models_dir) if f.endswith(".onnx") and f[:-5] not in ARGS)
    for name, extra in [*ARGS.items(), *((n, []) for n in others)]:
        path = os.path.join(models_dir, name + ".onnx")
        if not os.path.exists(path):
            continue
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            t = time.time()
            p = subprocess.run([binary, "onnx", path, "--json", out, "--quiet", *flags, *extra], capture_output=True, text=True)
            dt = time.time() - t
            if p.returncode == 2:
                print(f"| {name} | error | | | | | | {p.stderr.strip().splitlines()[0][:120]} | {dt:.1f} |")
                continue
            r = json.load(open(out))
            if keep:
                os.makedirs(keep, exist_ok=True)
                json.dump(r, open(os.path.join(keep, name + ".json"), "w"))
            c = r["coverage"]
            reduced = sum(1 for n in r["nodes"] if n["reference"]["kind"] in ("reduced", "unavailable"))
            fd = r["verdict"]["first_divergence"]
            fd = f"#{fd['node_index']} {fd['op_type']}" if fd else ""
            cs = r["verdict"].get("culprits") or []
            cause = (cs[0].get("causes") or [{}])[0].get("kind", "") if cs else ""
            culprit = f"{cs[0]['op_type']} ({cause})" if cs else ""
            print(f"| {name} | {r['verdict']['status']} | {r['model']['nodes']} | {c['compared']} / {c['values']} | "
                  f"{c['unchecked']} | {reduced} | {fd} | {culprit} | {dt:.1f} |")


if __name__ == "__main__":
    main()
