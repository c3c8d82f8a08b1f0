#!/usr/bin/env bash
# Makes the pairs of graphs of one model (scripts/pairs/make.py) in OUT_DIR, in the corpus's venv (its lock
# tests/locks/corpus.txt pins timm, onnxsim, onnxslim, onnxconverter-common and onnxruntime), then
# `scripts/pairs/sweep.sh OUT_DIR` prints the table the book shows.
#
# usage: scripts/pairs/make.sh [OUT_DIR]      (default: target/pairs)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/pairs}
VENV=target/corpus-venv
if [ "$(cat "$VENV/.phantom-lock" 2>/dev/null)" != "$(cat tests/locks/corpus.txt)" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --require-hashes -r tests/locks/corpus.txt
  cp tests/locks/corpus.txt "$VENV/.phantom-lock"
fi
"$VENV/bin/python" scripts/pairs/make.py "$OUT"
