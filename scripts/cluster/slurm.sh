#!/bin/bash
# phantom segment-wise comparison as Slurm jobs: plan here, then one boundary job, a job array with one task per
# segment (phantom reads SLURM_ARRAY_TASK_ID), and a merge job, chained by dependencies.
#
# usage: MODEL=/shared/model.onnx PLAN=/shared/phantom-plan K=8 MEM=6G bash scripts/cluster/slurm.sh [PHANTOM ARGS...]
# PLAN must be on a filesystem every node sees; extra arguments go to `phantom plan` (--ep, --precision, --shape...).
set -euo pipefail
: "${MODEL:?set MODEL}" "${PLAN:?set PLAN}"
K=${K:-8}
MEM=${MEM:-6G}

phantom plan "$MODEL" -o "$PLAN" --segments "$K" "$@"
boundary=$(sbatch --parsable --job-name=phantom-boundary --mem="$MEM" \
  --wrap "phantom segment $PLAN --boundary")
segments=$(sbatch --parsable --job-name=phantom-segment --mem="$MEM" --array="0-$((K - 1))" \
  --dependency="afterok:$boundary" --wrap "phantom segment $PLAN --quiet")
sbatch --parsable --job-name=phantom-merge --dependency="afterok:$segments" \
  --wrap "phantom merge $PLAN --json $PLAN/report.json --html $PLAN/report.html --junit $PLAN/junit.xml"
echo "submitted: boundary $boundary, segments $segments (array of $K); the merge writes $PLAN/report.html"
