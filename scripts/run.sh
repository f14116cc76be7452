#!/usr/bin/env bash
# Builds g4 and runs it on the bundled default model: greedy continuation
# logits on a tiny Gemma 4 checkpoint (PLE, KV sharing, sliding + full
# layers), then a speed benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DG4_BUILD_TESTS=OFF -DG4_BUILD_BENCH=OFF >/dev/null
ninja -C build g4
model=build/testdata/models/tiny-e
[ -d "$model" ] || { echo "missing $model"; exit 1; }
out=$(mktemp -d)/logits.safetensors
./build/g4 logits --model "$model" --ids 2,17,300,45,9 --greedy 8 --out "$out"
echo "wrote $out"
./build/g4 bench --model "$model" --prompt 64 --gen 32
