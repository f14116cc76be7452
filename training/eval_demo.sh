#!/usr/bin/env bash
# Measures the numbers docs/demo-model.md reports, with g4 itself:
#  - held-out perplexity (ctx 512) of the bf16 and the shipped 4-bit model;
#  - per KV-cache mode, perplexity and KL(plain || mode) on the long held-out
#    texts (4 windows of 4096 tokens), for the bf16 and the 4-bit model
#    (each --kl run also reports the plain cache's perplexity).
# One JSON line per run goes to OUT (default demo-eval.jsonl). On two busy
# CPU cores this takes about half an hour.
#
# Usage: training/eval_demo.sh G4_BINARY BF16_DIR [OUT]
#   BF16_DIR: the trained checkpoint train.py exported (export/demo-bf16).
set -euo pipefail
g4=${1:?usage: eval_demo.sh G4_BINARY BF16_DIR [OUT]}
bf16=${2:?usage: eval_demo.sh G4_BINARY BF16_DIR [OUT]}
out=${3:-demo-eval.jsonl}
here=$(cd "$(dirname "$0")" && pwd)
q4="$here/../models/demo"
eval_dir="$here/data/eval"
long=$(mktemp)
trap 'rm -f "$long"' EXIT
cat "$eval_dir"/long-*.txt > "$long"

for model in "$bf16" "$q4"; do
  "$g4" perplexity --model "$model" --file "$eval_dir/heldout.txt" --ctx 512 --json --quiet >> "$out"
done
for model in "$bf16" "$q4"; do
  for mode in affine:8 affine:4 affine:4:32 turbo:k8v3 turbo:k4v3; do
    "$g4" perplexity --model "$model" --file "$long" --ctx 4096 --chunks 4 --kv "$mode" --kl --json --quiet >> "$out"
  done
done
