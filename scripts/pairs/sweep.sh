#!/usr/bin/env bash
# For each pair of scripts/pairs/make.py's OUT_DIR/pairs.tsv (and, given the corpus, ONNX Runtime's transformer
# optimizer and quantize_dynamic on its BERT), runs `phantom equiv SOURCE TRANSFORMED` and `phantom onnx SOURCE
# --target-model TRANSFORMED`, and prints a Markdown table: how many of the transformed model's values were paired,
# how many of the source's are inside fused nodes, the equiv answer (and the node it names), and the verdict.
#
# usage: scripts/pairs/sweep.sh PAIRS_DIR [CORPUS_DIR] [PHANTOM]      (default PHANTOM: target/release/phantom)
set -uo pipefail
DIR=$1
CORPUS=${2:-}
PHANTOM=${3:-target/release/phantom}
rows() {
  cat "$DIR/pairs.tsv" | while IFS=$'\t' read -r src dst tool expected; do
    printf '%s\t%s\t%s\t%s\n' "$DIR/$src.onnx" "$DIR/$dst" "$tool" "$expected"
  done
  if [ -n "$CORPUS" ]; then
    for t in ortopt_bert_fp32:ort-transformers ortopt_bert_fp16:ort-transformers-fp16 qdyn_bert:quantize_dynamic; do
      exp=same; [ "${t#*:}" = quantize_dynamic ] && exp=lossy
      printf '%s\t%s\t%s\t%s\n' "$CORPUS/optimum_bert/model.onnx" "$CORPUS/${t%%:*}.onnx" "${t#*:}" "$exp"
    done
  fi
}
echo "| source | tool | expected | paired | fused away | equiv | onnx --target-model |"
echo "|---|---|---|---|---|---|---|"
rows | while IFS=$'\t' read -r src dst tool expected; do
  tmp=$(mktemp)
  "$PHANTOM" equiv "$src" "$dst" --json "$tmp" > /dev/null 2> "$tmp.err"
  code=$?
  if [ -s "$tmp" ]; then
    read -r paired fused answer < <(python3 - "$tmp" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
c = e["counts"]
d = e.get("divergence") or {}
inside = e.get("changed_inside") or []
if e["same_function"]:
    answer = "same"
elif d:
    answer = "differs at `%s`" % d["node"]
else:
    answer = "changed inside at `%s`" % inside[0]["node"]
print("%d/%d" % (c["paired"] + c["duplicates"], c["transformed_values"]), c["fused"], answer)
PY
)
  else
    paired=-; fused=-; answer="exit $code: $(grep -o 'Unimplemented([A-Za-z]*)' "$tmp.err" | head -1)"
  fi
  verdict=$("$PHANTOM" onnx "$src" --target-model "$dst" --quiet 2>&1 | grep -m1 -v '^ *$' | cut -c1-140 | tr '|' '/')
  echo "| $(basename "$src" .onnx) | $tool | $expected | $paired | $fused | $answer | $verdict |"
  rm -f "$tmp" "$tmp.err"
done
