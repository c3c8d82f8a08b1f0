#!/usr/bin/env bash
# Prepares, on a build machine, what a CUDA check on a GPU machine needs, in the git-ignored folder .gpu/:
# ONNX Runtime's CUDA build (the pinned onnxruntime-gpu wheel's three libraries, as one zstd tar cut into pieces
# small enough for one transfer each), the phantom release binary, the models, the WebGPU plugin EP's wheel, and a
# zstd that runs anywhere.
# The GPU machine brings CUDA 13 itself (the nvidia-* pip packages beside PyTorch); phantom finds them.
#
# usage: scripts/gpu/pack.sh [PIECE_MIB] [MODEL.onnx ...]
#   PIECE_MIB  size of each piece of the ONNX Runtime archive (default 50: a call carries at most 64 MB, the ~10 MB working tree included)
#   MODEL      extra models to carry (demo models and scripts/gpu/run.sh's own exports always go)
# NO_PLUGIN=1 leaves the WebGPU plugin EP's wheel out (room for more models)
# Then on the GPU machine, after every piece is there: scripts/gpu/run.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
PIECE=${1:-50}
shift || true
ORT_VERSION=$(sed -n 's/^pub const PINNED_ORT: &str = "\(.*\)";/\1/p' crates/runner/src/ort_lib.rs)
G=.gpu
mkdir -p "$G/cache" "$G/last"
rm -f "$G"/p*/ort.tar.zst.* 2>/dev/null || true

wheel=$(ls "$G"/cache/onnxruntime_gpu-"$ORT_VERSION"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$G/cache" "onnxruntime-gpu==$ORT_VERSION"
  wheel=$(ls "$G"/cache/onnxruntime_gpu-"$ORT_VERSION"-*.whl | head -1)
fi
ls "$G"/cache/onnxruntime_ep_webgpu-*.whl >/dev/null 2>&1 || python3 -m pip download --quiet --no-deps \
  --only-binary=:all: --platform manylinux_2_28_x86_64 -d "$G/cache" onnxruntime-ep-webgpu==0.4.0
if [ ! -s "$G/cache/ort.tar.zst" ]; then
  rm -rf "$G/cache/x"
  python3 -m zipfile -e "$wheel" "$G/cache/x" >/dev/null
  tar -C "$G/cache/x/onnxruntime/capi" -cf - libonnxruntime.so."$ORT_VERSION" libonnxruntime_providers_shared.so \
    libonnxruntime_providers_cuda.so | zstd -q -12 -T0 --long=27 -o "$G/cache/ort.tar.zst"
  rm -rf "$G/cache/x"
fi

# Pieces p1, p2, ... of the archive; one more folder holds the binary, zstd, the models and the plugin's wheel.
rm -rf "$G"/p[0-9]*
split -b "${PIECE}M" -d -a 1 "$G/cache/ort.tar.zst" "$G/cache/piece."
n=0
for f in "$G"/cache/piece.*; do
  n=$((n + 1)); mkdir -p "$G/p$n"; mv "$f" "$G/p$n/ort.tar.zst.$((n - 1))"
done
n=$((n + 1)); last="$G/p$n"; mkdir -p "$last"
test -x target/release/phantom || { echo "build the release binary first: cargo build --release" >&2; exit 2; }
zstd -q -19 -T0 -f target/release/phantom -o "$last/phantom.zst"
mkdir -p "$last/tools" "$last/models"
cp /usr/bin/zstd "$last/tools/"
for l in $(ldd /usr/bin/zstd | awk '/=>/ {print $3}' | grep -v -E 'libc\.so|libm\.so'); do cp -L "$l" "$last/tools/"; done
for m in "$@"; do cp "$m" "$last/models/"; done
[ -n "${NO_PLUGIN:-}" ] || cp "$G"/cache/onnxruntime_ep_webgpu-*.whl "$last/"
sha256sum "$G/cache/ort.tar.zst" | awk '{print $1}' >"$last/ort.sha256"
echo "$((n - 1))" >"$last/pieces"
du -sh "$G"/p*
echo "carry .gpu/p1 … .gpu/p$n, one per call, then run: bash scripts/gpu/run.sh \$OUT (with .gpu/p$n and .gl carried)"
