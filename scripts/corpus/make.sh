#!/usr/bin/env bash
# Makes the corpus of real exports (scripts/corpus/make.py, make_genai.py, and onnxruntime-extensions' models from
# tests/data/toolchains/make_extensions.py) in OUT_DIR with the toolchains installed from their locks
# (tests/locks/corpus.txt, corpus-genai.txt: PyTorch and its CUDA wheels, about 6 GB each; extensions.txt), then
# `scripts/corpus/sweep.sh OUT_DIR` prints the verdict table the book shows.
#
# usage: scripts/corpus/make.sh [OUT_DIR]      (default: target/corpus)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/corpus}
venv() {  # venv DIR LOCK
  if [ "$(cat "$1/.phantom-lock" 2>/dev/null)" != "$(cat "tests/locks/$2.txt")" ]; then
    rm -rf "$1"
    python3 -m venv "$1"
    "$1/bin/pip" install --quiet --disable-pip-version-check --require-hashes -r "tests/locks/$2.txt"
    cp "tests/locks/$2.txt" "$1/.phantom-lock"
  fi
}
venv target/corpus-venv corpus
venv target/corpus-genai-venv corpus-genai
mkdir -p "$OUT"
(cd "$OUT" && "$OLDPWD/target/corpus-venv/bin/python" "$OLDPWD/scripts/corpus/make.py" .)
target/corpus-genai-venv/bin/python scripts/corpus/make_genai.py "$OUT"
# onnxruntime-extensions' tools write a pre-processing pipeline and a tokenizer; the sweep finds the extensions'
# custom-op library through the python3 of this environment, as phantom finds it for a user who has it installed.
venv target/corpus-ext-venv extensions
target/corpus-ext-venv/bin/python tests/data/toolchains/make_extensions.py "$OUT"
