#!/bin/bash
# phantom segment-wise comparison as Slurm jobs: plan here, then one boundary job, a job array with one task per
# segment (phantom reads SLURM_ARRAY_TASK_ID), and a merge job, chained by dependencies.
#
# usage: MODEL=/shared/model.onnx PLAN=/shared/phantom-plan [K=8 | SEGMENT_MEMORY=4GiB] [MEM=6G] [TIME=2:00:00]
#        [CPUS=2] bash scripts/cluster/slurm.sh [PHANTOM PLAN ARGS...]
# PLAN must be on a filesystem every node sees; extra arguments go to `phantom plan` (--ep, --precision, --shape...).
# K cuts the model into K segments; SEGMENT_MEMORY cuts it so that each segment's job fits that much instead.
# MEM (each job's memory request) defaults to twice the plan's largest per-segment estimate plus 256 MiB: measured
# peaks ran up to 1.7x the estimates. The merge runs once every segment task has ended, failed or not: a segment
# that failed is then named in its error (with the command that reruns it) instead of the merge waiting forever.
set -euo pipefail
: "${MODEL:?set MODEL}" "${PLAN:?set PLAN}"
TIME=${TIME:-2:00:00}
CPUS=${CPUS:-2}
K=${K:-8}
if [[ -n "${SEGMENT_MEMORY:-}" ]]; then
  phantom plan "$MODEL" -o "$PLAN" --segment-memory "$SEGMENT_MEMORY" "$@"
else
  phantom plan "$MODEL" -o "$PLAN" --segments "$K" "$@"
fi
estimates=$(grep -oE '"job_bytes": *[0-9]+' "$PLAN/plan.json" | grep -oE '[0-9]+$')
K=$(echo "$estimates" | wc -l)
peak=$(echo "$estimates" | sort -n | tail -1)
MEM=${MEM:-$(((2 * peak + (256 << 20)) >> 20))M}
q=$(printf %q "$PLAN")
common=(--parsable --mem="$MEM" --time="$TIME" --cpus-per-task="$CPUS")

boundary=$(sbatch "${common[@]}" --job-name=phantom-boundary --wrap "phantom segment $q --boundary")
# Cancelled, not left pending, when the boundary job fails; the merge then reports every segment missing.
segments=$(sbatch "${common[@]}" --job-name=phantom-segment --array="0-$((K - 1))" \
  --dependency="afterok:$boundary" --kill-on-invalid-dep=yes --wrap "phantom segment $q --quiet")
merge=$(sbatch "${common[@]}" --job-name=phantom-merge --dependency="afterany:$segments" \
  --wrap "phantom merge $q --json $q/report.json --html $q/report.html --junit $q/junit.xml")
echo "submitted: boundary $boundary, segments $segments (array of $K, $MEM each), merge $merge;" \
  "the merge writes $PLAN/report.html"
