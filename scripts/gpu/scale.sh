#!/usr/bin/env bash
# On the GPU machine: phantom's shaders against the vendor GEMM, and the 1.26B Llama-style decoder
# (benches/make_llama.py --preset 1b) through phantom's wgpu target and ONNX Runtime's CUDA provider.
#
#   STAGE wgpu: needs .gpu/p1 (phantom.zst, wgpu_throughput.zst, tools/, the first piece of ONNX Runtime's archive,
#               whose head holds the CPU library) and .gl (Vulkan loader debs). Writes throughput.md, decoder-wgpu.txt.
#   STAGE cuda: needs every piece .gpu/p1 … .gpu/pN. Writes decoder-cuda.txt. FP16_ONLY=1: only the fp16 runs.
#
# Each measured command is wrapped in `peak`: wall time, peak host memory (RSS of the process tree) and peak GPU
# memory (nvidia-smi, sampled every 0.2 s).
#
# usage: bash scripts/gpu/scale.sh OUT_DIR wgpu|cuda
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: scale.sh OUT_DIR wgpu|cuda}
STAGE=${2:?usage: scale.sh OUT_DIR wgpu|cuda}
W=/tmp/phantom-gpu
mkdir -p "$OUT" "$W/ort"
exec > >(tee -a "$OUT/log.txt") 2>&1
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
ldconfig -p | grep -q libvulkan.so.1 || echo "no Vulkan loader"
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
Z() { LD_LIBRARY_PATH="$PWD/.gpu/p1/tools" .gpu/p1/tools/zstd "$@"; }
[ -x "$W/phantom" ] || Z -q -d -f .gpu/p1/phantom.zst -o "$W/phantom"
[ ! -f .gpu/p1/wgpu_throughput.zst ] || [ -x "$W/wgpu_throughput" ] || Z -q -d -f .gpu/p1/wgpu_throughput.zst -o "$W/wgpu_throughput"
chmod +x "$W/phantom"; [ -f "$W/wgpu_throughput" ] && chmod +x "$W/wgpu_throughput"
P=$W/phantom
export PHANTOM_NO_INSTALL=1 PYTHONUNBUFFERED=1

# peak NAME CMD...: runs CMD, prints its exit code, wall seconds, peak RSS and peak GPU memory.
peak() {
  local name=$1; shift
  (while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; sleep 0.2; done) >"$W/gpu.$name" &
  local mon=$!
  python3 - "$@" >"$OUT/$name.txt" 2>&1 <<'EOF'
import resource, subprocess, sys, time
t = time.time()
rc = subprocess.call(sys.argv[1:])
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / (1 << 20)
print(f"PEAK rc {rc} wall {time.time() - t:.1f} s host {rss:.2f} GiB")
EOF
  kill $mon
  local gpu=$(sort -n "$W/gpu.$name" | tail -1)
  echo "### $name: $(tail -1 "$OUT/$name.txt"), GPU peak ${gpu:-?} MiB: $*"
  grep -E "^(✓|✗|~|!|\?|culprit|  cause|time:|target|first div|coverage|note: wgpu)" "$OUT/$name.txt" | head -14
}

decoder() {
  local m=$W/llama1b/llama.onnx
  [ -f "$m" ] || python3 benches/make_llama.py "$W/llama1b" --preset 1b >&2
  echo "$m"
}

if [ "$STAGE" = wgpu ]; then
  # The first piece's head holds the CPU library whole; what follows it is cut off (kept apart from the full set).
  mkdir -p "$W/ort-head"
  Z -q -d -c .gpu/p1/ort.tar.zst.0 2>/dev/null | tar -C "$W/ort-head" -xf - 2>/dev/null
  export ORT_DYLIB_PATH=$W/ort-head/libonnxruntime.so.1.31.1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$P" devices 2>&1 | head -8
  if [ -z "${NO_THROUGHPUT:-}" ]; then
  echo "## throughput"
  PHANTOM_BENCH_MATMUL=1024,2048,4096,8192 PHANTOM_BENCH_CONV=64,256 timeout 150 "$W/wgpu_throughput" \
    models/convnet.onnx >"$OUT/wgpu_bench.txt" 2>&1
  cat "$OUT/wgpu_bench.txt"
  timeout 120 python3 benches/vendor_gemm.py "$OUT/wgpu_bench.txt" | tee "$OUT/throughput.md"
  fi
  echo "## decoder"
  M=$(decoder)
  peak decoder-wgpu-f16 timeout 200 "$P" onnx "$M" --ep wgpu --precision fp16 --json "$OUT/decoder-wgpu-f16.json"
fi
if [ "$STAGE" = cuda ]; then
  n=$(cat .gpu/p1/pieces)
  if [ ! -f "$W/ort/libonnxruntime_providers_cuda.so" ]; then
    for i in $(seq 0 $((n - 1))); do cat ".gpu/p$((i + 1))/ort.tar.zst.$i"; done >"$W/ort.tar.zst"
    [ "$(sha256sum "$W/ort.tar.zst" | awk '{print $1}')" = "$(cat .gpu/p1/ort.sha256)" ] || { echo "pieces corrupt"; exit 2; }
    Z -q -d --long=27 -c "$W/ort.tar.zst" | tar -C "$W/ort" -xf - && rm "$W/ort.tar.zst"
  fi
  export ORT_DYLIB_PATH=$W/ort/libonnxruntime.so.1.31.1
  M=$(decoder)
  if [ -z "${FP16_ONLY:-}" ]; then
  peak ort-cuda timeout 90 "$P" run "$M" --runner target --ep cuda
  peak ort-cuda-all timeout 90 "$P" run "$M" --runner target --ep cuda --all-values
  peak decoder-cuda timeout 200 "$P" onnx "$M" --ep cuda --json "$OUT/decoder-cuda.json"
  peak decoder-cuda-notf32 timeout 200 "$P" onnx "$M" --ep cuda --ep-option use_tf32=0
  fi
  peak ort-cuda-fp16 timeout 90 "$P" run "$M" --runner target --ep cuda --precision fp16
  peak ort-cuda-fp16-all timeout 90 "$P" run "$M" --runner target --ep cuda --precision fp16 --all-values
  peak decoder-cuda-fp16 timeout 200 "$P" onnx "$M" --ep cuda --precision fp16 --json "$OUT/decoder-cuda-fp16.json"
fi
