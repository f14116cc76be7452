#!/usr/bin/env bash
# Packs the CUDA build's test binaries and g4 for scripts/gpu-run.sh on a GPU
# machine that has the driver but no CUDA or compiler packages: stripped
# binaries (CUDA runtime and libstdc++ linked statically: configure with
# -DG4_CUDA=ON -DG4_STATIC_RUNTIME=ON -DG4_NATIVE=OFF) plus the shared
# libraries they need beyond glibc, into DEST/g4-gpu.tar.xz, and
# gpu-run.sh beside it.
#   scripts/gpu-pack.sh BUILD_DIR DEST
set -euo pipefail
build=${1:?build dir}
dest=${2:?destination dir}
stage=$(mktemp -d)
mkdir -p "$stage/bin" "$stage/lib" "$dest"
for b in test_backend test_model test_engine g4 cuda_ops_bench; do
  [ -x "$build/$b" ] || continue
  strip -o "$stage/bin/$b" "$build/$b"
done
# The kernel tracer (bench/cupti_trace.cc) for `gpu-run.sh trace`, when built.
[ -f "$build/libg4_cupti_trace.so" ] && strip -o "$stage/lib/libg4_cupti_trace.so" "$build/libg4_cupti_trace.so"
# Shared libraries outside glibc and the driver (libgomp, libcupti, ...);
# nullglob: without the tracer, lib/ is empty.
shopt -s nullglob
for b in "$stage"/bin/* "$stage"/lib/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libutil.so*|ld-linux*|libcuda.so*) ;;
    libstdc++.so*|libgcc_s.so*) ;;  # libcupti's: the GPU host's own are newer
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
# xz -9e: its 64 MiB dictionary spans the binaries, which share their CUDA
# kernels (half the size of the default -6; the carry has a 64 MiB limit).
tar -C "$stage" -cf - bin lib | xz -9e -T2 >"$dest/g4-gpu.tar.xz"
cp "$(dirname "$0")/gpu-run.sh" "$dest/gpu-run.sh"
# The peers' kit (scripts/peer-gpu-prepare.sh), when prepared, for `gpu-run.sh peers`.
peer_kit="$(dirname "$0")/../build/peer-gpu"
if [ -f "$peer_kit/llama-src.tar.xz" ]; then mkdir -p "$dest/peer" && cp "$peer_kit"/* "$dest/peer/"; fi
rm -rf "$stage"
ls -la "$dest"
