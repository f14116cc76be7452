#!/usr/bin/env bash
# Prepares, on a machine with npm, what `gpu-run.sh peers` needs on the GPU
# machine (which has no network) to run the issue's peers on g4's weights:
# llama.cpp's CUDA build and transformers' generate.
#
#   scripts/peer-gpu-prepare.sh [DEST]      # default build/peer-gpu
#
# DEST then holds (about 3 MB, carried with the GPU run):
#   llama-src.tar.xz   the llama.cpp snapshot inside the npm package
#                      node-llama-cpp 3.22.1 (its git bundle), only what a
#                      CUDA build of libllama needs: the other GPU backends
#                      under ggml/src are left out
#   llama_bench.c, llama_abi.h, gguf_export.py
#                      the peer tools (../shared/tools/peer; read its README)
# Nothing of llama.cpp enters the repository.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest=${1:-$root/build/peer-gpu}
tools="$root/../shared/tools/peer"
version=3.22.1
[ -f "$tools/llama_bench.c" ] || { echo "peer-gpu-prepare: no peer tools at $tools" >&2; exit 1; }
command -v npm >/dev/null || { echo "peer-gpu-prepare: npm is needed" >&2; exit 1; }
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack "node-llama-cpp@$version" >/dev/null 2>&1)
mkdir -p "$work/pkg"
tar xzf "$work/node-llama-cpp-$version.tgz" -C "$work/pkg"
git clone -q "$work/pkg/package/llama/gitRelease.bundle" "$work/src" 2>/dev/null
cd "$work/src"
keep_backends="ggml-cpu ggml-cuda ggml-blas"
excludes=()
for d in ggml/src/ggml-*/; do
  d=${d%/}
  case " $keep_backends " in *" $(basename "$d") "*) ;; *) excludes+=(--exclude="$d") ;; esac
done
tar "${excludes[@]}" -cJf "$dest/llama-src.tar.xz" CMakeLists.txt cmake ggml src include vendor common LICENSE licenses
cp "$tools/llama_bench.c" "$tools/llama_abi.h" "$tools/gguf_export.py" "$dest/"
ls -la "$dest"
