#!/usr/bin/env bash
# Writes the models of tests/data/toolchains/ with the toolchains themselves, at their defaults, in a virtual
# environment made from the locks tests/locks/toolchains.txt and toolchains-nodeps.txt, onnxruntime-extensions'
# models in one made from tests/locks/extensions.txt, and tf2onnx's in one made from tests/locks/tf2onnx.txt.
#
# usage: tests/data/toolchains/make.sh [VENV [EXT_VENV [TF_VENV]]]
#        (defaults: target/toolchains-venv, target/extensions-venv, target/tf2onnx-venv)
set -euo pipefail
cd "$(dirname "$0")/../../.."
VENV=${1:-target/toolchains-venv}
if [ "$(cat "$VENV/.phantom-lock" 2>/dev/null)" != "$(cat tests/locks/toolchains.txt tests/locks/toolchains-nodeps.txt)" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --require-hashes -r tests/locks/toolchains.txt
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r tests/locks/toolchains-nodeps.txt
  cat tests/locks/toolchains.txt tests/locks/toolchains-nodeps.txt > "$VENV/.phantom-lock"
fi
"$VENV/bin/python" tests/data/toolchains/make.py tests/data/toolchains
EXT=${2:-target/extensions-venv}
if [ "$(cat "$EXT/.phantom-lock" 2>/dev/null)" != "$(cat tests/locks/extensions.txt)" ]; then
  rm -rf "$EXT"
  python3 -m venv "$EXT"
  "$EXT/bin/pip" install --quiet --disable-pip-version-check --require-hashes -r tests/locks/extensions.txt
  cat tests/locks/extensions.txt > "$EXT/.phantom-lock"
fi
"$EXT/bin/python" tests/data/toolchains/make_extensions.py tests/data/toolchains
TF=${3:-target/tf2onnx-venv}
if [ "$(cat "$TF/.phantom-lock" 2>/dev/null)" != "$(cat tests/locks/tf2onnx.txt)" ]; then
  rm -rf "$TF"
  python3 -m venv "$TF"
  "$TF/bin/pip" install --quiet --disable-pip-version-check --require-hashes -r tests/locks/tf2onnx.txt
  cat tests/locks/tf2onnx.txt > "$TF/.phantom-lock"
fi
"$TF/bin/python" tests/data/toolchains/make_tf2onnx.py tests/data/toolchains
