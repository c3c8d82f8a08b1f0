#!/bin/bash
# phantom segment-wise comparison on one machine: the segments run JOBS at a time, each holding one segment's
# weights (a model whose f64 reference does not fit at once still runs).
#
# usage: bash scripts/cluster/local-xargs.sh MODEL.onnx PLAN_DIR [K] [JOBS] [PHANTOM ARGS...]
set -euo pipefail
MODEL=${1:?usage: local-xargs.sh MODEL.onnx PLAN_DIR [K] [JOBS] [PHANTOM ARGS...]}
PLAN=${2:?usage: local-xargs.sh MODEL.onnx PLAN_DIR [K] [JOBS] [PHANTOM ARGS...]}
K=${3:-4}
JOBS=${4:-2}
shift $(($# < 4 ? $# : 4))

phantom plan "$MODEL" -o "$PLAN" --segments "$K" "$@"
phantom segment "$PLAN" --boundary
seq 0 $((K - 1)) | xargs -P "$JOBS" -I{} phantom segment "$PLAN" --index {} --quiet
phantom merge "$PLAN" --html "$PLAN/report.html" --json "$PLAN/report.json"
