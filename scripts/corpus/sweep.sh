#!/usr/bin/env bash
# Runs `phantom onnx MODEL` with no flags on every model of a corpus (scripts/corpus/make.py's OUT_DIR) and prints a
# Markdown table: model, exit code, verdict line (`--quiet`: the verdict alone, or the error).
#
# usage: scripts/corpus/sweep.sh CORPUS_DIR [PHANTOM]      (default PHANTOM: target/release/phantom)
set -uo pipefail
# onnxruntime-extensions' models run with the library python3 imports: make.sh's environment leads PATH.
[ -x target/corpus-ext-venv/bin/python3 ] && export PATH="$PWD/target/corpus-ext-venv/bin:$PATH"
DIR=$1
PHANTOM=${2:-target/release/phantom}
echo "| model | exit | verdict |"
echo "|---|---|---|"
find "$DIR" -name '*.onnx' | sort | while read -r m; do
  name=${m#"$DIR"/}
  out=$(timeout 600 "$PHANTOM" onnx "$m" --quiet 2>&1)
  code=$?
  line=$(printf '%s\n' "$out" | grep -m1 -v '^ *$' | cut -c1-220 | tr '|' '/')
  echo "| $name | $code | $line |"
done
