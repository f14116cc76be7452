#!/usr/bin/env bash
# g4 against llama.cpp on the CPU, on the same weights, in one run.
#
#   scripts/peer-bench.sh [--threads "2 16"] [--prompt 512] [--gen 64] [--reps 3]
#                         [--work DIR] [--g4 PATH] [--peer DIR] [--tools DIR] [--prepare]
#
# Weights: `g4 synth --preset e2b --quant bf16`, then the same checkpoint
# twice: `g4 quantize --bits 4` (MLX affine, group 64) for g4 and a pure
# Q4_0 GGUF for llama.cpp (both 4.5 bits per weight), made once in --work
# (default /tmp/g4-peer; about 12 GB).
#
# llama.cpp: the CPU build in the npm package @node-llama-cpp/linux-x64
# 3.22.1 (its libraries pick their AVX2 / AVX-512 variant at start-up),
# driven through its C API by llama_bench.c and exported by gguf_export.py
# from the peer tools folder (--tools, default ../shared/tools/peer; read its
# README). Nothing of llama.cpp is kept in this repository: the package is
# fetched with npm into --peer (default build/peer) on first use, and
# llama_bench is compiled there. `--prepare` only does that (and copies the
# two peer tools in), so the folder can be carried to a machine without a
# network and used there with --peer.
#
# Per thread count: g4 bench and llama_bench, each --reps times (best run
# kept: the machine may be busy), same prompt length, same greedy decode
# steps, same threads; then one table with the ratios g4 / llama.cpp and g4's
# decode traffic against the copy bandwidth g4 bench measures.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
threads="2 16"
prompt=512
gen=64
reps=3
work=/tmp/g4-peer
g4="$root/build/g4"
peer="$root/build/peer"
tools="$root/../shared/tools/peer"
prepare_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    --gen) gen="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --g4) g4="$2"; shift 2 ;;
    --peer) peer="$2"; shift 2 ;;
    --tools) tools="$2"; shift 2 ;;
    --prepare) prepare_only=1; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "peer-bench: unknown argument $1" >&2; exit 2 ;;
  esac
done

version=3.22.1
lib="$peer/package/bins/linux-x64"

# --- llama.cpp: the npm package and the C benchmark over its API ----------
if [ ! -f "$lib/libllama.v0.5.0.so" ]; then
  command -v npm >/dev/null || { echo "peer-bench: npm is needed to fetch @node-llama-cpp/linux-x64" >&2; exit 1; }
  mkdir -p "$peer"
  (cd "$peer" && npm pack --silent "@node-llama-cpp/linux-x64@$version" >/dev/null &&
     tar xzf "node-llama-cpp-linux-x64-$version.tgz" && rm -f "node-llama-cpp-linux-x64-$version.tgz")
fi
if [ ! -x "$peer/llama_bench" ] || [ ! -f "$peer/gguf_export.py" ]; then
  [ -f "$tools/llama_bench.c" ] || { echo "peer-bench: no llama_bench.c in $tools (see --tools)" >&2; exit 1; }
  cp "$tools/llama_bench.c" "$tools/llama_abi.h" "$tools/gguf_export.py" "$peer/"
  cc -O2 -o "$peer/llama_bench" "$peer/llama_bench.c" "$lib/libllama.v0.5.0.so" "$lib/libggml.v0.5.0.so" \
    "$lib/libggml-base.so" -Wl,-rpath,'$ORIGIN/package/bins/linux-x64'
fi
[ "$prepare_only" = 1 ] && { echo "peer-bench: prepared $peer"; exit 0; }

# --- the weights -------------------------------------------------------------
[ -x "$g4" ] || { echo "peer-bench: no g4 binary at $g4 (build it, or --g4)" >&2; exit 1; }
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' 2>/dev/null; then py="$p"; break; fi
done
[ -n "$py" ] || { echo "peer-bench: gguf_export.py needs numpy (apt-get install python3-numpy)" >&2; exit 1; }
mkdir -p "$work"
bf16="$work/e2b-bf16" q4="$work/e2b-q4" gguf="$work/e2b-q4_0.gguf"
[ -f "$bf16/config.json" ] || "$g4" synth --preset e2b --quant bf16 --out "$bf16" >&2
[ -f "$q4/config.json" ] || "$g4" quantize "$bf16" "$q4" --bits 4 >&2
[ -f "$gguf" ] || "$py" "$peer/gguf_export.py" "$bf16" "$gguf" --type q4_0 -q >&2

# --- runs ----------------------------------------------------------------------
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
results="$work/results-$(date +%Y%m%d-%H%M%S).jsonl"
echo "peer-bench: $(nproc) CPUs ($cpu_model); prompt $prompt, $gen decode steps, best of $reps; g4 $($g4 --version 2>/dev/null || true)" >&2
best() {  # best value of a JSON field over lines on stdin
  python3 -c '
import json, sys
f = sys.argv[1]
vals = [json.loads(l)[f] for l in sys.stdin if l.strip().startswith("{")]
print(max(vals) if vals else 0)' "$1"
}
rows=""
for t in $threads; do
  g4_lines="" ll_lines=""
  for ((r = 0; r < reps; r++)); do
    # g4 at its default wait policy: an inherited OMP_WAIT_POLICY=passive
    # would make its team sleep at every wait (llama.cpp's CPU build does not
    # use OpenMP, so it is not affected either way).
    line="$(env -u OMP_WAIT_POLICY OMP_NUM_THREADS=$t "$g4" bench --model "$q4" --backend cpu -t "$t" --prompt "$prompt" --gen "$gen" --json)"
    echo "{\"who\":\"g4\",\"threads\":$t,\"run\":$line}" >> "$results"
    g4_lines+="$line"$'\n'
    line="$("$peer/llama_bench" -m "$gguf" -t "$t" -p "$prompt" -n "$gen" -r 1)"
    echo "{\"who\":\"llama.cpp\",\"threads\":$t,\"run\":$line}" >> "$results"
    ll_lines+="$line"$'\n'
  done
  gp=$(printf '%s' "$g4_lines" | best prefill_tok_s) gd=$(printf '%s' "$g4_lines" | best decode_tok_s)
  lp=$(printf '%s' "$ll_lines" | best prefill_tok_s) ld=$(printf '%s' "$ll_lines" | best decode_tok_s)
  gbs=$(printf '%s' "$g4_lines" | best decode_gb_s) copy=$(printf '%s' "$g4_lines" | best copy_gb_s)
  backend="$(printf '%s' "$g4_lines" | head -1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["backend"])')"
  rows+="$(python3 -c "
t, gp, lp, gd, ld, gbs, copy = $t, $gp, $lp, $gd, $ld, $gbs, $copy
print(f'| {t} | {gp:.1f} | {lp:.1f} | {gp / lp:.2f}x | {gd:.2f} | {ld:.2f} | {gd / ld:.2f}x | {gbs:.1f} GB/s of {copy:.1f} ({100 * gbs / copy:.0f}%) |')
")"$'\n'
done
echo
echo "g4 backend: $backend"
echo "llama.cpp: @node-llama-cpp/linux-x64 $version (CPU), Q4_0; g4: MLX affine 4-bit g64; $cpu_model"
echo
echo "| threads | prefill g4 tok/s | prefill llama.cpp | ratio | decode g4 tok/s | decode llama.cpp | ratio | g4 decode traffic vs memcpy |"
echo "|---:|---:|---:|---:|---:|---:|---:|---|"
printf '%s' "$rows"
echo
echo "raw runs: $results"
