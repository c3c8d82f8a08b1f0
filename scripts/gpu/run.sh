#!/usr/bin/env bash
# Runs on the GPU machine, once every piece scripts/gpu/pack.sh made is there (.gpu/p1 … .gpu/pN): joins ONNX
# Runtime's CUDA build, unpacks the phantom binary, exports the benchmark models and runs phantom with `--ep cuda`:
# `runtimes`, `onnx` on the demo and real models in fp32 and fp16 (and TF32 off), CUDA + CPU + wgpu in one run,
# `determinism`, and `record` on CPU then `check` on CUDA. Everything goes to OUT_DIR: log.txt (what to read),
# summary.md (one row per run) and reports.tar.gz (every JSON report and terminal output).
#
# usage: bash scripts/gpu/run.sh OUT_DIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: run.sh OUT_DIR}
mkdir -p "$OUT"
W=/tmp/phantom-gpu
R=$W/reports
mkdir -p "$W/ort" "$R" "$W/models"
exec > >(tee "$OUT/log.txt") 2>&1

last=$(ls -d .gpu/p* | sort -V | tail -1)
n=$(cat "$last/pieces")
Z() { LD_LIBRARY_PATH="$PWD/$last/tools" "$last/tools/zstd" "$@"; }
for i in $(seq 0 $((n - 1))); do
  test -f ".gpu/p$((i + 1))/ort.tar.zst.$i" || { echo "missing piece .gpu/p$((i + 1))/ort.tar.zst.$i"; exit 2; }
done
if [ ! -f "$W/ort/libonnxruntime_providers_cuda.so" ]; then
  for i in $(seq 0 $((n - 1))); do cat ".gpu/p$((i + 1))/ort.tar.zst.$i"; done >"$W/ort.tar.zst"
  [ "$(sha256sum "$W/ort.tar.zst" | awk '{print $1}')" = "$(cat "$last/ort.sha256")" ] || { echo "pieces corrupt"; exit 2; }
  Z -q -d --long=27 -c "$W/ort.tar.zst" | tar -C "$W/ort" -xf - && rm "$W/ort.tar.zst"
fi
Z -q -d -f "$last/phantom.zst" -o "$W/phantom" && chmod +x "$W/phantom"
P=$W/phantom
export ORT_DYLIB_PATH=$(ls "$W"/ort/libonnxruntime.so.* | head -1) PHANTOM_NO_INSTALL=1

echo "## machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import sys; print('python', sys.version.split()[0])"
echo "## phantom runtimes"
"$P" runtimes
echo "## phantom devices"
"$P" devices 2>&1 | head -12

python3 benches/make_bench_models.py "$W/models" >/dev/null 2>&1 || echo "bench models: export failed"
cp models/*.onnx "$last"/models/*.onnx "$W/models/" 2>/dev/null
declare -A ARGS=([ppocr_det_v4]="--shape x=1x3x640x640" [yolov8n_nudenet]="--shape images=1x3x320x320")

# One run: NAME then phantom's arguments; the report goes to $R/NAME.json, its terminal output to $R/NAME.txt.
run() {
  local name=$1; shift
  local t0=$EPOCHREALTIME
  timeout 120 "$P" "$@" --json "$R/$name.json" >"$R/$name.txt" 2>&1
  local rc=$?
  printf '### %s (exit %s, %.1f s): phantom %s\n' "$name" "$rc" "$(awk "BEGIN{print $EPOCHREALTIME - $t0}")" "$*"
  grep -v '^\s*$' "$R/$name.txt" | head -${LINES_SHOWN:-14}
}

# SECTIONS (environment): the parts to run, default all: cuda tf32 threeway sweep determinism check plugin python
# missing. CUDA_MODELS: the models of the cuda part.
want() { [[ " ${SECTIONS:-all} " == *" all "* || " ${SECTIONS:-} " == *" $1 "* ]]; }

if want cuda; then
  echo "## onnx --ep cuda"
  for m in ${CUDA_MODELS:-convnet encoder noisy resnet18 vit_tiny ppocr_det_v4 yolov8n_nudenet}; do
    f=$W/models/$m.onnx; [ -f "$f" ] || { echo "(no $m)"; continue; }
    LINES_SHOWN=${CUDA_LINES:-14} run "$m-cuda" onnx "$f" --ep cuda ${ARGS[$m]:-}
    run "$m-cuda-fp16" onnx "$f" --ep cuda --precision fp16 ${ARGS[$m]:-}
  done
fi
if want tf32; then
  for m in resnet18 vit_tiny; do
    run "$m-cuda-notf32" onnx "$W/models/$m.onnx" --ep cuda --ep-option use_tf32=0
    run "$m-cpu" onnx "$W/models/$m.onnx" --ep cpu
  done
fi
if want threeway; then
  echo "## cuda + cpu + wgpu in one run"
  LINES_SHOWN=30 run convnet-3way onnx "$W/models/convnet.onnx" --ep cuda --ep cpu --ep wgpu
  LINES_SHOWN=30 run resnet18-3way onnx "$W/models/resnet18.onnx" --ep cuda --ep cpu --ep wgpu
fi
if want sweep; then
  echo "## real models (carried), --ep cuda, then --ep cuda --precision fp16"
  PHANTOM_SWEEP_OUT=$R/sweep-cuda PHANTOM_SWEEP_FLAGS="--ep cuda" timeout 200 python3 scripts/real_models.py \
    "$last/models" "$P"
  PHANTOM_SWEEP_OUT=$R/sweep-fp16 PHANTOM_SWEEP_FLAGS="--ep cuda --precision fp16" timeout 200 \
    python3 scripts/real_models.py "$last/models" "$P"
fi
if want determinism; then
  echo "## determinism --ep cuda"
  run convnet-determinism determinism "$W/models/convnet.onnx" --ep cuda --runs 5
  run resnet18-determinism determinism "$W/models/resnet18.onnx" --ep cuda --runs 5
fi
if want check; then
  echo "## record on CPU, check on CUDA"
  rm -rf "$W/golden"
  "$P" record "$W/models/resnet18.onnx" -o "$W/golden" --ep cpu >"$R/record.txt" 2>&1; echo "record exit $?"
  LINES_SHOWN=20 run resnet18-check-cuda check "$W/models/resnet18.onnx" --golden "$W/golden" --ep cuda
  LINES_SHOWN=20 run resnet18-check-cuda-notf32 check "$W/models/resnet18.onnx" --golden "$W/golden" --ep cuda \
    --ep-option use_tf32=0
fi
if want plugin && ls "$last"/onnxruntime_ep_webgpu-*.whl >/dev/null 2>&1; then
  echo "## plugin EP: onnxruntime-ep-webgpu vs phantom's wgpu vs f64"
  python3 -m pip install -q --no-index --no-deps --target "$W/site" "$last"/onnxruntime_ep_webgpu-*.whl
  PYTHONPATH=$W/site "$P" runtimes 2>&1 | sed -n '/plugin/,$p'
  PYTHONPATH=$W/site LINES_SHOWN=30 run convnet-webgpu-plugin onnx "$W/models/convnet.onnx" --ep webgpu --ep wgpu
  PYTHONPATH=$W/site LINES_SHOWN=30 run resnet18-webgpu-plugin onnx "$W/models/resnet18.onnx" --ep webgpu --ep wgpu \
    --ep cuda
  LINES_SHOWN=6 run convnet-webgpu-library onnx "$W/models/convnet.onnx" --ep webgpu \
    --ep-library webgpu="$W/site/onnxruntime_ep_webgpu/libonnxruntime_providers_webgpu.so"
fi
if want python; then
  echo "## Python API (PYTHONPATH=python, PHANTOM_GPU=1)"
  PYTHONPATH=python PHANTOM_BIN=$P PHANTOM_GPU=1 timeout 300 python3 -m pytest -q -p no:cacheprovider python/tests 2>&1 \
    | tail -25
fi
if want missing; then
  echo "## missing CUDA libraries are named"
  env -u LD_LIBRARY_PATH PATH=/usr/bin:/bin "$P" onnx "$W/models/convnet.onnx" --ep cuda 2>&1 | head -4
fi

python3 scripts/gpu/summary.py "$R" | tee "$OUT/summary.md"
tar -C "$W" -czf "$OUT/reports.tar.gz" reports
