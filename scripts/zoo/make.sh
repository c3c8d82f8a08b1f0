#!/usr/bin/env bash
# Makes the precision zoo (scripts/zoo/make.py) in OUT_DIR with the corpus toolchains (tests/locks/corpus.txt, the
# venv scripts/corpus/make.sh makes), then `scripts/zoo/sweep.sh OUT_DIR` prints the tables the book shows.
#
# usage: scripts/zoo/make.sh [OUT_DIR]      (default: target/zoo)
#        ZOO_ARCHS=efficientvit_b0,convnextv2_atto,efficientnet_b0,yolo11n scripts/zoo/make.sh target/zoo_unseen
#                                           (only those CNNs, in every precision with their faults: the book's
#                                            models phantom's thresholds were not measured on)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/zoo}
source <(sed -n '/^venv()/,/^}/p' scripts/corpus/make.sh)
venv target/corpus-venv corpus
mkdir -p "$OUT"
target/corpus-venv/bin/python scripts/zoo/make.py "$OUT"
[ -n "${ZOO_ARCHS:-}" ] && exit 0
venv target/corpus-genai-venv corpus-genai
target/corpus-genai-venv/bin/python scripts/corpus/make_genai.py "$OUT" fp16
printf 'genai_llama_fp16/model\tonnxruntime-genai builder\t-p fp16 -e cpu\n' >> "$OUT/pristine.tsv"
