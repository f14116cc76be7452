#!/usr/bin/env bash
# The server benchmark of docs/benchmarks.md: for each concurrency, the
# aggregate decode speed of `g4 bench --batch N` (in process) against the
# same model served by `g4 serve` and loaded by an independent client
# (bench/server_load.mjs, N concurrent streams); then the time to first token
# of a long prompt, cold (nothing cached) and warm (the same prompt again,
# from the prefix cache). Prints JSON lines.
# Usage: bench/server_bench.sh [MODEL_DIR] [GEN_TOKENS] [CONCURRENCIES...]
# Environment: G4_BIN (default build/g4); G4_REPS (runs per level, default 3); G4_BENCH_ARGS, flags given to both
# `g4 serve` and `g4 bench` (e.g. "--backend cuda"); G4_BAN, token ids the
# load generator bans so answers run to max_tokens (default 1,6: the demo
# model's end-of-text ids). The load generator is bench/server_load.mjs under
# Node.js, else bench/server_load.py (Python standard library only).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/demo}
gen=${2:-128}
shift $(( $# > 2 ? 2 : $# ))
levels=("$@")
[ ${#levels[@]} -eq 0 ] && levels=(1 4 16 64)
max=${levels[-1]}
export OMP_WAIT_POLICY=passive
g4=${G4_BIN:-build/g4}
read -r -a extra <<< "${G4_BENCH_ARGS:-}"
ban=${G4_BAN:-1,6}
if command -v node >/dev/null; then load=(node bench/server_load.mjs); else load=(python3 bench/server_load.py); fi

echo "{\"date\":\"$(date -u +%FT%TZ)\",\"commit\":\"${G4_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}\",\"load\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"cpus\":$(nproc)}"
log=$(mktemp)
$g4 serve "$model" --port 0 --max-seqs "$max" --max-queue "$max" "${extra[@]}" > "$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1200); do grep -q "listening on" "$log" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$log")
grep -o 'ready in [0-9.]* s' "$log" | sed 's/^/{"serve":"/; s/$/"}/'

# In process and served alternate (three times each), so a machine whose
# load drifts treats both alike.
for n in "${levels[@]}"; do
  for rep in $(seq "${G4_REPS:-3}"); do
    inproc=$($g4 bench "$model" --prompt 32 --gen "$gen" --batch "$n" --json "${extra[@]}" 2>/dev/null | tail -1)
    served=$("${load[@]}" --url "$url" --streams "$n" --requests 1 --max-tokens "$gen" \
             --prompt-words $((18 + rep)) --ban "$ban")
    echo "{\"streams\":$n,\"rep\":$rep,\"in_process\":$inproc,\"served\":$served}"
  done
done

# Cold and warm time to first token of a ~500-token prompt.
long=$(python3 -c "print(' '.join(['the river runs past the old stone bridge']*60))")
body=$(python3 -c "import json,sys; print(json.dumps({'model':'g4','max_tokens':1,'temperature':0,'messages':[{'role':'user','content':sys.argv[1]}]}))" "$long")
for which in cold warm; do
  t=$(curl -s -o /tmp/g4_ttft.json -w '%{time_total}' "$url/v1/chat/completions" -H 'content-type: application/json' -d "$body")
  cached=$(python3 -c "import json; u=json.load(open('/tmp/g4_ttft.json'))['usage']; print(u['prompt_tokens'], u['prompt_tokens_details']['cached_tokens'])")
  echo "{\"ttft\":\"$which\",\"seconds\":$t,\"prompt_and_cached_tokens\":\"$cached\"}"
done
