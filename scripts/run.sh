#!/usr/bin/env bash
# Builds g4 and runs it on the bundled default model (models/demo: a small
# Gemma 4 trained on English text, 4-bit). With no arguments it answers one
# prompt; `scripts/run.sh chat` starts an interactive chat instead;
# `scripts/run.sh serve [flags]` serves the OpenAI and Anthropic APIs and a
# chat page on http://127.0.0.1:8080 (docs/server.md); any other arguments
# are passed to `g4` as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build g4 >/dev/null
model=models/demo
if [ $# -eq 0 ]; then
  exec ./build/g4 generate "$model" "What is a Python dictionary?" --seed 1 -n 80
elif [ "$1" = "chat" ]; then
  shift
  exec ./build/g4 chat "$model" "$@"
elif [ "$1" = "serve" ]; then
  shift
  exec ./build/g4 serve "$model" "$@"
else
  exec ./build/g4 "$@"
fi
