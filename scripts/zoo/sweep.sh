#!/usr/bin/env bash
# Runs phantom on the precision zoo (scripts/zoo/make.py's OUT_DIR) and prints two Markdown tables:
# - every pristine model with no flags, with ONNX Runtime's optimizations off (`--ort-opt-level disable`), and the
#   float32 ones with phantom's own `--precision fp16` and `bf16`: the verdict of each (none may be drift or
#   anomalous);
# - every planted fault, as `--target-model` beside its source: the verdict and the node named first (the first
#   culprit, else the first anomaly, else the first divergence), and whether it is the node the fault is in.
# The last line counts what is not as it should be.
#
# usage: scripts/zoo/sweep.sh ZOO_DIR [PHANTOM]      (default PHANTOM: target/release/phantom)
set -uo pipefail
DIR=$1
PHANTOM=${2:-target/release/phantom}
BAD=0
verdict() {  # verdict JSON [EXPECTED_NODES] -> "status<TAB>named node<TAB>ok"
  python3 - "$@" <<'PY'
import json, sys
try:
    v = json.load(open(sys.argv[1]))["verdict"]
except Exception:
    print("-\t-\t-"); sys.exit()
first = (v.get("culprits") or v.get("anomalies") or [v.get("first_divergence") or {}])[0]
named = first.get("node") or first.get("value") or "-"
ok = "-"
if len(sys.argv) > 2:
    expected = set(sys.argv[2].split(","))
    ok = "yes" if expected & {first.get("node"), first.get("value")} else "no"
print(f"{v['status']}\t{named}\t{ok}")
PY
}
run() {  # run JSON ARGS... -> exit code; the verdict line in $LINE
  LINE=$(timeout 900 "$PHANTOM" onnx "${@:2}" --quiet --json "$1" 2>&1 | grep -m1 -v '^ *$' | cut -c1-120 | tr '|' '/')
  return "${PIPESTATUS[0]}"
}
tmp=$(mktemp -d)
echo "| model | made by | settings | phantom | exit | verdict |"
echo "|---|---|---|---|---|---|"
while IFS=$'\t' read -r model tool how; do
  flags=("" "--ort-opt-level disable")
  case "$how" in fp32) flags+=("--precision fp16" "--precision bf16") ;; esac
  for f in "${flags[@]}"; do
    # shellcheck disable=SC2086
    run "$tmp/r.json" "$DIR/$model.onnx" $f; code=$?
    IFS=$'\t' read -r status _ _ < <(verdict "$tmp/r.json")
    case "$status" in drift|anomalous|-) BAD=$((BAD + 1)); mark=" ✗" ;; *) mark="" ;; esac
    echo "| $model | $tool | $how | ${f:-(no flags)} | $code | $LINE$mark |"
    rm -f "$tmp/r.json"
  done
done < "$DIR/pristine.tsv"
echo
echo "| source | fault | verdict | named first | its node |"
echo "|---|---|---|---|---|"
while IFS=$'\t' read -r src faulty kind nodes; do
  run "$tmp/r.json" "$DIR/$src.onnx" --target-model "$DIR/$faulty.onnx"; code=$?
  IFS=$'\t' read -r status named ok < <(verdict "$tmp/r.json" "$nodes")
  case "$status:$ok" in drift:yes|anomalous:yes) ;; *) BAD=$((BAD + 1)); ok="$ok ✗" ;; esac
  echo "| $src | $kind | $status (exit $code) | \`$named\` | $ok |"
  rm -f "$tmp/r.json"
done < "$DIR/faults.tsv"
rm -rf "$tmp"
echo
echo "not as expected: $BAD"
