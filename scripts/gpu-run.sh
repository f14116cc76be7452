#!/usr/bin/env bash
# Runs g4's CUDA tests and benchmarks on a GPU machine from binaries built
# elsewhere; builds nothing. The binaries come packed in
# .gpu-carry/g4-gpu.tar.xz (scripts/gpu-pack.sh makes it on a build machine
# with nvcc); test data is unpacked from the repository's testdata/.
#
#   .gpu-carry/gpu-run.sh tests            # tests/backend on "cuda", model + engine tests with G4_TEST_BACKEND=cuda
#   .gpu-carry/gpu-run.sh bench PRESET:QUANT[:KV] ...   # g4 synth, then decode at batch 1/8/32/64 and prefill
#   .gpu-carry/gpu-run.sh tests bench e4b:q4 12b:q4     # both
#   .gpu-carry/gpu-run.sh profile e4b:q4   # per-op device time of a short decode (G4_CUDA_PROFILE)
#   .gpu-carry/gpu-run.sh micro            # bench/cuda_ops_bench (MatMul on Gemma 4 shapes)
#   .gpu-carry/gpu-run.sh peers e4b 12b    # transformers, llama.cpp CUDA and g4 on the same weights (run_peers)
#   .gpu-carry/gpu-run.sh ncu e4b:q4       # Nsight Compute: kernel time of one decode step by kernel (run_ncu)
#   .gpu-carry/gpu-run.sh trace e4b:q4     # CUPTI: a decode step inside its graph, by kernel (run_trace)
#   .gpu-carry/gpu-run.sh ab G4_CUDA_ATTN_MMA e4b:q4 12b:q4   # a switch at 0 and 1, same call (run_ab;
#                                          G4_AB_CASES: PROMPT:CHUNK:GEN cases, default decode at 512 and 32k, prefill 4096;
#                                          G4_AB_BATCH: sequences, default 1)
#
# Logs go to $OUT (or /tmp/g4-gpu-out): summary.txt, tests.log, bench.jsonl,
# misc.log, profile.log; the last lines printed are a short table. Environment: G4_BENCH_BATCHES (default "1 8 32 64"), G4_BENCH_GEN
# (decode steps, default 64), G4_BENCH_PREFILL (prompt lengths, default
# "512 4096"), G4_TEST_FILTER (gtest filter for test_backend).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(pwd)
out=${OUT:-/tmp/g4-gpu-out}
work=/tmp/g4-gpu
mkdir -p "$out" "$work"
summary="$out/summary.txt"
touch "$summary"  # appended to by every invocation in one run
note() { echo "$*" | tee -a "$summary"; }

# --- binaries and libraries
if [ -f "$here/g4-gpu.tar.xz" ] && [ ! -x "$work/bin/g4" ]; then
  tar -xJf "$here/g4-gpu.tar.xz" -C "$work" || { echo "cannot unpack binaries"; exit 1; }
fi
bin=$work/bin
export LD_LIBRARY_PATH="$work/lib:${LD_LIBRARY_PATH:-}"
export OMP_WAIT_POLICY=passive
export G4_BINARY_DIR=$bin G4_REPO_DIR=$repo

# --- test data, unpacked as CMake does (.gz files decompressed), from the
# repository root this runs in
[ -d "$repo/testdata" ] || note "warning: no testdata/ in $repo (run gpu-run.sh from the repository root); the model tests will find no models"
if [ ! -d "$work/testdata" ] && [ -d "$repo/testdata" ]; then
  (cd "$repo/testdata" && find . -type f) | while read -r rel; do
    src="$repo/testdata/$rel"
    case "$rel" in
      *.gz) dst="$work/testdata/${rel%.gz}"; mkdir -p "$(dirname "$dst")"; gzip -dc "$src" >"$dst" ;;
      *) dst="$work/testdata/$rel"; mkdir -p "$(dirname "$dst")"; cp "$src" "$dst" ;;
    esac
  done
fi
export G4_TESTDATA=$work/testdata

misc="$out/misc.log"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader >>"$misc" 2>&1
note "gpu: $(head -1 "$misc")"
ldd "$bin/g4" >"$work/ldd.txt" 2>&1
if grep -q "not found" "$work/ldd.txt"; then note "missing libraries:"; grep "not found" "$work/ldd.txt" | tee -a "$summary"; fi

# gtest summary of one log: passed / failed counts and the failed names.
gtest_line() {
  local log=$1 name=$2
  local passed failed
  passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  failed=$(grep -oE '\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1 || echo 0)
  note "$(printf '%-14s passed %4s  failed %4s  (%s)' "$name" "${passed:-0}" "${failed:-0}" "$(tail -c 300 "$log" | tr '\n' ' ' | grep -oE 'real [0-9.]+s' || true)")"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | head -40 | tee -a "$summary"
}

# rerun LABEL LOG [VAR=VALUE...] -- BINARY [ARGS...]: a test binary again
# under the given switches, logged to $work/LOG and summarized as LABEL.
rerun() {
  local label=$1 log=$work/$2
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout "${G4_TEST_TIMEOUT:-300}" "$@" >"$log" 2>&1
  gtest_line "$log" "$label"
  cat "$log" >>"$out/tests.log"
}

run_tests() {
  local filter=${G4_TEST_FILTER:-*cuda*}
  local t0
  t0=$(date +%s)
  timeout "${G4_TEST_TIMEOUT:-300}" "$bin/test_backend" --gtest_filter="$filter" >"$work/test_backend.log" 2>&1
  echo "real $(( $(date +%s) - t0 ))s" >>"$work/test_backend.log"
  gtest_line "$work/test_backend.log" test_backend
  cat "$work/test_backend.log" >>"$out/tests.log"
  # The one-row kernel's own bf16 path, which the block-shared kernel
  # (G4_CUDA_ROW_BLOCK) otherwise takes over.
  local matmul="*MatMul*/cuda:*Affine*/cuda:*Moe*/cuda"
  rerun "test_backend G4_CUDA_ROW_BLOCK=0" test_backend_noblock.log G4_CUDA_ROW_BLOCK=0 -- \
    "$bin/test_backend" --gtest_filter="$matmul"
  # Every attention test with plain bf16 stores on the CUDA-core kernels
  # too (the tensor-core ones take them by default: kMmaByDefault).
  rerun "test_backend G4_CUDA_ATTN_MMA=0" test_backend_mma.log G4_CUDA_ATTN_MMA=0 -- \
    "$bin/test_backend" --gtest_filter="*PagedAttention*/cuda"
  # And the tensor-core kernel with its wait at the start and the merge
  # launched after it (the measuring switches' other side).
  rerun "test_backend ATTN_LATE_WAIT=0 ATTN_ALLOW=0" test_backend_wait.log G4_CUDA_ATTN_LATE_WAIT=0 \
    G4_CUDA_ATTN_ALLOW=0 -- "$bin/test_backend" --gtest_filter="*PagedAttention*/cuda"
  # The MatMul tests on the tensor-core one-row kernel (opt-in, slower so
  # far: kRowMmaByDefault), then the model tests with it.
  rerun "test_backend G4_CUDA_ROW_MMA=1" test_backend_rowmma.log G4_CUDA_ROW_MMA=1 -- \
    "$bin/test_backend" --gtest_filter="$matmul"
  # The few-row kernel on every product of up to 32 rows, in its
  # one-buffer instance (taken by default only where it needs fewer waves).
  rerun "test_backend ROWS_MMA=32 ROWS_OCC3=1" test_backend_occ3.log G4_CUDA_ROWS_MMA=32 G4_CUDA_ROWS_OCC3=1 -- \
    "$bin/test_backend" --gtest_filter="$matmul"
  [ -x "$bin/test_model" ] &&
    rerun "test_model G4_CUDA_ROW_MMA=1" test_model_mma.log G4_CUDA_ROW_MMA=1 G4_TEST_BACKEND=cuda -- "$bin/test_model"
  for t in test_model test_engine; do
    [ -x "$bin/$t" ] || continue
    t0=$(date +%s)
    G4_TEST_BACKEND=cuda timeout "${G4_TEST_TIMEOUT:-300}" "$bin/$t" ${G4_MODEL_FILTER:+--gtest_filter=$G4_MODEL_FILTER} >"$work/$t.log" 2>&1
    echo "real $(( $(date +%s) - t0 ))s" >>"$work/$t.log"
    gtest_line "$work/$t.log" "$t"
    cat "$work/$t.log" >>"$out/tests.log"
  done
}

# True once G4_DEADLINE (seconds since the epoch), when set, has passed.
past_deadline() { [ -n "${G4_DEADLINE:-}" ] && [ "$(date +%s)" -gt "$G4_DEADLINE" ]; }

# synth_model PRESET QUANT: the synthetic checkpoint in /tmp/g4-synth-PRESET-QUANT,
# made unless it is there already (a failure is noted, and returns 1).
synth_model() {
  local preset=$1 quant=$2 dir=/tmp/g4-synth-$1-$2 t0
  t0=$(date +%s)
  if [ ! -f "$dir/config.json" ]; then
    "$bin/g4" synth --preset "$preset" --quant "$quant" --out "$dir" >>"$misc" 2>&1 ||
      { note "synth $preset $quant failed: $(tail -2 "$misc")"; rm -rf "$dir"; return 1; }
  fi
  note "synth $preset $quant: $(( $(date +%s) - t0 )) s, $(du -sh "$dir" | cut -f1)"
}

# bench PRESET:QUANT[:KV]: synthesize the checkpoint in /tmp, then decode
# at each batch size and prefill at each prompt length; one JSON line each
# into $out/bench.jsonl, removed afterwards (the disk is small).
run_bench() {
  local spec=$1 preset quant kv dir
  if past_deadline; then note "skipped $spec (deadline)"; return; fi
  IFS=: read -r preset quant kv <<<"$spec"
  kv=${kv:-plain:bf16}
  dir=/tmp/g4-synth-$preset-$quant
  synth_model "$preset" "$quant" || return 1
  local gen=${G4_BENCH_GEN:-64}
  local bp b p
  for bp in ${G4_BENCH_BATCHES-1 8 32 64}; do
    IFS=: read -r b p <<<"$bp"
    p=${p:-512}
    "$bin/g4" bench --model "$dir" --backend cuda --kv "$kv" --batch "$b" --prompt "$p" --gen "$gen" \
      --memcpy-mib "$( [ "$b" = 1 ] && echo 2048 || echo 0)" --chunk 512 --json ${G4_BENCH_EXTRA:-} \
      >>"$out/bench.jsonl" 2>>"$misc" || note "bench $spec batch $b failed: $(tail -1 "$misc")"
  done
  for p in ${G4_BENCH_PREFILL-512 4096}; do
    "$bin/g4" bench --model "$dir" --backend cuda --kv "$kv" --batch 1 --prompt "$p" --gen 2 --memcpy-mib 0 \
      --chunk "$p" --json >>"$out/bench.jsonl" 2>>"$misc" || note "prefill $spec $p failed: $(tail -1 "$misc")"
  done
  if [ -n "${G4_BENCH_NONINVARIANT:-}" ]; then  # the canonical order's cost: prefill without it
    G4_CUDA_NONINVARIANT=1 "$bin/g4" bench --model "$dir" --backend cuda --kv "$kv" --batch 1 --prompt 4096 --gen 2 \
      --memcpy-mib 0 --chunk 4096 --json | sed 's/"kv":"[^"]*"/"kv":"noninv"/' >>"$out/bench.jsonl" 2>>"$misc"
  fi
  [ -n "${G4_BENCH_KEEP:-}" ] || rm -rf "$dir"
}

# profile PRESET:QUANT: per-op device time of a short batch-1 decode after
# a prompt of G4_PROFILE_PROMPT tokens (default 512, one chunk) and
# G4_PROFILE_GEN steps (default 16; 1 for a prefill profile).
run_profile() {
  local spec=$1 preset quant kv
  IFS=: read -r preset quant kv <<<"$spec"
  G4_BENCH_KEEP=1 G4_BENCH_BATCHES= G4_BENCH_PREFILL= run_bench "$spec" || return
  local prompt=${G4_PROFILE_PROMPT:-512}
  G4_CUDA_PROFILE=1 "$bin/g4" bench --model "/tmp/g4-synth-$preset-$quant" --backend cuda --kv "${kv:-plain:bf16}" \
    --batch 1 --prompt "$prompt" --chunk "$prompt" --gen "${G4_PROFILE_GEN:-16}" --memcpy-mib 0 >>"$out/profile.log" 2>&1
  note "profile $spec: $(grep -m1 'in ops' "$out/profile.log")"
  grep '\[cuda profile\]' "$out/profile.log" | head -14 | tee -a "$summary"
}

# ncu PRESET:QUANT: Nsight Compute's duration of every kernel of a short
# batch-1 decode (G4_NCU_BATCH rows), run without recordings; the kernels of
# the last decode step (after the last sampling kernel but one) summed per
# kernel name into $out/ncu-PRESET.txt. G4_NCU_DETAIL=REGEX adds `--set full`
# for the first G4_NCU_COUNT (default 2) kernels of the last step matching it.
run_ncu() {
  local spec=$1 preset quant kv ncu
  IFS=: read -r preset quant kv <<<"$spec"
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { note "ncu: not found"; return; }
  G4_BENCH_KEEP=1 G4_BENCH_BATCHES= G4_BENCH_PREFILL= run_bench "$spec" || return
  local dir=/tmp/g4-synth-$preset-$quant csv=$out/ncu-$preset-$quant.csv
  local args=(bench --model "$dir" --backend cuda --kv "${kv:-plain:bf16}" --batch "${G4_NCU_BATCH:-1}" --prompt 512
              --gen 3 --memcpy-mib 0 ${G4_BENCH_EXTRA---gpu-memory 64G})  # replay needs free memory
  G4_CUDA_GRAPHS=0 timeout 240 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    "$bin/g4" "${args[@]}" >"$csv" 2>>"$misc" || note "ncu $spec: exit $?"
  # The table; and, for G4_NCU_DETAIL, into $skip_file how many matching
  # kernels come before the step (ncu's --launch-skip counts matches only).
  local skip_file=$work/ncu-skip
  python3 - "$csv" "${G4_NCU_DETAIL:-}" "$skip_file" <<'PY' | tee "$out/ncu-$preset-$quant.txt" | tee -a "$summary"
import csv, re, sys, collections
rows = []
for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')):
    if len(r) > 14 and r[12] == "gpu__time_duration.sum":
        name = re.split(r"[<(]", r[4].replace("(anonymous namespace)::", "").replace("<unnamed>::", ""))[0].split("::")[-1].split()[-1]
        rows.append((name, float(r[14].replace(",", "")), r[4]))
ends = [i for i, (n, _, _) in enumerate(rows) if n == "GreedyKernel"]
first = ends[-2] + 1 if len(ends) >= 2 else max(0, len(rows) - 900)
step = [(n, t) for n, t, _ in rows[first: ends[-1] + 1 if ends else len(rows)]]
if sys.argv[2]:
    open(sys.argv[3], "w").write(str(sum(1 for _, _, full in rows[:first] if re.search(sys.argv[2], full))))
by = collections.OrderedDict()
for n, t in step:
    c, s = by.get(n, (0, 0.0)); by[n] = (c + 1, s + t)
total = sum(t for _, t in step)
print(f"ncu: {len(rows)} kernels profiled; last decode step {len(step)} kernels, {total/1e3:.1f} us of kernel time")
for n, (c, s) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"  {n:34} {c:5d} x {s/c/1e3:8.2f} us = {s/1e3:9.1f} us ({100*s/total:4.1f} %)")
PY
  if [ -n "${G4_NCU_DETAIL:-}" ]; then
    # G4_NCU_SECTIONS: ncu's section arguments (default --set full), e.g.
    # "--section WarpStateStats --section SchedulerStats" where a full set fails.
    # shellcheck disable=SC2086
    G4_CUDA_GRAPHS=0 timeout 200 "$ncu" --clock-control none ${G4_NCU_SECTIONS:---set full} -k "regex:$G4_NCU_DETAIL" \
      --launch-skip "${G4_NCU_SKIP:-$(cat "$skip_file" 2>/dev/null || echo 0)}" \
      --launch-count "${G4_NCU_COUNT:-2}" "$bin/g4" "${args[@]}" >"$out/ncu-detail-$preset-$quant.txt" 2>>"$misc" ||
      note "ncu detail $spec: exit $?"
  fi
  [ -n "${G4_BENCH_KEEP:-}" ] || rm -rf "$dir"
}

# trace PRESET:QUANT: every kernel's device start and end in a short decode
# at batch G4_TRACE_BATCH (default 1) after a prompt of G4_TRACE_PROMPT
# (default 512), CUDA graphs on, through the CUPTI tracer
# (lib/libg4_cupti_trace.so, CUDA_INJECTION64_PATH); the last decode step
# (after the last sampling kernel but one) summed per kernel: launches,
# exclusive time (how far the kernel moved the step's end: end minus the
# later of its start and the previous kernel's end, as dependent launches
# start a kernel before its predecessor ends), busy time (end - start) and
# idle time before it (the device ran nothing of the step). The whole trace
# goes to $OUT (trace-*.tsv.xz).
run_trace() {
  local spec=$1 preset quant kv
  IFS=: read -r preset quant kv <<<"$spec"
  [ -f "$work/lib/libg4_cupti_trace.so" ] || { note "trace: no libg4_cupti_trace.so"; return; }
  G4_BENCH_KEEP=1 G4_BENCH_BATCHES= G4_BENCH_PREFILL= run_bench "$spec" || return
  local dir=/tmp/g4-synth-$preset-$quant b=${G4_TRACE_BATCH:-1} p=${G4_TRACE_PROMPT:-512}
  local tsv=$work/trace-$preset-$quant-b$b-p$p.tsv
  CUDA_INJECTION64_PATH=$work/lib/libg4_cupti_trace.so G4_TRACE_OUT=$tsv \
    "$bin/g4" bench --model "$dir" --backend cuda --kv "${kv:-plain:bf16}" --batch "$b" --prompt "$p" \
    --chunk 512 --gen 8 --memcpy-mib 0 ${G4_BENCH_EXTRA:-} >>"$misc" 2>&1 || note "trace $spec: exit $?"
  python3 - "$tsv" <<'PY' | tee "$out/trace-$preset-$quant-b$b-p$p.txt" | tee -a "$summary"
import re, sys, collections
rows = []
for line in open(sys.argv[1]):
    s, e, g, grid, name = line.rstrip("\n").split("\t", 4)
    short = re.sub(r"\(anonymous namespace\)::", "", name)
    short = re.split(r"[<(]", short)[0].split("::")[-1].split()[-1]
    rows.append((int(s), int(e), short, grid))
ends = [i for i, r in enumerate(rows) if r[2] == "GreedyKernel"]
if len(ends) < 2: sys.exit(print("trace: fewer than two sampling kernels"))
step = rows[ends[-2] + 1: ends[-1] + 1]
prev_end = rows[ends[-2]][1]
span = step[-1][1] - prev_end
by = collections.OrderedDict()
launch = collections.OrderedDict()  # (kernel, grid): which product or layer kind a launch is
for s, e, n, grid in step:
    ex = max(0, e - max(s, prev_end)); idle = max(0, s - prev_end); prev_end = max(prev_end, e)
    c, x, b, i = by.get(n, (0, 0, 0, 0)); by[n] = (c + 1, x + ex, b + e - s, i + idle)
    c, x = launch.get((n, grid), (0, 0)); launch[(n, grid)] = (c + 1, x + ex)
tot = sum(v[1] for v in by.values()); idle = sum(v[3] for v in by.values())
print(f"trace: last decode step {len(step)} kernels, {span/1e3:.1f} us from the previous sampling kernel's end "
      f"(exclusive {tot/1e3:.1f} us, idle {idle/1e3:.1f} us)")
for n, (c, x, b, i) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"  {n:30} {c:4d} x {x/c/1e3:6.2f} us excl = {x/1e3:7.1f} us ({100*x/span:4.1f} %), "
          f"busy {b/c/1e3:6.2f}, idle before {i/c/1e3:5.2f} us")
print("by kernel and grid (the 12 largest):")
for (n, grid), (c, x) in sorted(launch.items(), key=lambda kv: -kv[1][1])[:12]:
    print(f"  {n:30} {grid:14} {c:4d} x {x/c/1e3:7.2f} us excl = {x/1e3:7.1f} us ({100*x/span:4.1f} %)")
PY
  xz -T4 -c "$tsv" >"$out/$(basename "$tsv").xz"
  [ -n "${G4_BENCH_KEEP:-}" ] || rm -rf "$dir"
}

# peers PRESET: the issue's peers on the same weights, in this run: g4 synth
# bf16; from it g4's MLX 4-bit (g4 quantize --bits 4) and llama.cpp's pure
# Q4_0 (gguf_export.py), both 4.5 bits per weight; then, batch 1, prompt
# 512, 64 greedy steps: transformers' generate in bf16
# (bench/transformers_generate.py), llama.cpp's CUDA build (flash-attention
# kernels off, built here once from the snapshot scripts/peer-gpu-prepare.sh
# packs into $G4_PEER_DIR, default the carry's peer/) and g4. One JSON line
# each into $out/peers.jsonl.
run_peers() {
  local preset=$1 peer=${G4_PEER_DIR:-$here/peer} dir=/tmp/g4-peer-$1 llama=$work/llama
  if past_deadline; then note "skipped peers $preset (deadline)"; return; fi
  [ -f "$peer/llama-src.tar.xz" ] || { note "peers: no $peer/llama-src.tar.xz (run scripts/peer-gpu-prepare.sh)"; return; }
  local t0 log=$out/peers.log
  t0=$(date +%s)
  if [ ! -x "$llama/lbc" ]; then
    mkdir -p "$llama" && tar -xJf "$peer/llama-src.tar.xz" -C "$llama"
    (cd "$llama" &&
      cmake -S . -B b -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF -DCMAKE_BUILD_TYPE=Release &&
      cmake --build b -j"$(nproc)" --target llama &&
      cc -O2 -I"$peer" -o lbc "$peer/llama_bench.c" -L b/bin -lllama -lggml -lggml-base -Wl,-rpath,"$llama/b/bin" -ldl) \
      >>"$log" 2>&1 || { note "peers: llama.cpp build failed: $(tail -2 "$log" | tr '\n' ' ')"; return; }
    note "peers: llama.cpp CUDA built in $(( $(date +%s) - t0 )) s"
  fi
  t0=$(date +%s)
  mkdir -p "$dir"
  { "$bin/g4" synth --preset "$preset" --quant bf16 --out "$dir/bf16" &&
    "$bin/g4" quantize "$dir/bf16" "$dir/q4" --bits 4 &&
    python3 "$peer/gguf_export.py" "$dir/bf16" "$dir/q4_0.gguf" --type q4_0 -q; } >>"$log" 2>&1 ||
    { note "peers $preset: weights failed: $(tail -2 "$log" | tr '\n' ' ')"; rm -rf "$dir"; return; }
  note "peers $preset: weights in $(( $(date +%s) - t0 )) s"
  python3 "$repo/bench/transformers_generate.py" "$dir/bf16" --prompt 512 --gen 64 >>"$out/peers.jsonl" 2>>"$log" ||
    note "peers $preset: transformers failed: $(tail -1 "$log")"
  rm -rf "$dir/bf16"
  "$llama/lbc" -m "$dir/q4_0.gguf" -ngl 999 -p 512 -n 64 -r 2 >>"$out/peers.jsonl" 2>>"$log" ||
    note "peers $preset: llama.cpp failed: $(tail -1 "$log")"
  "$bin/g4" bench --model "$dir/q4" --backend cuda --kv plain:bf16 --batch 1 --prompt 512 --gen 64 --memcpy-mib 0 \
    --chunk 512 --json >>"$out/peers.jsonl" 2>>"$log" || note "peers $preset: g4 failed: $(tail -1 "$log")"
  note "peers $preset: $(tail -3 "$out/peers.jsonl" | python3 -c '
import json, sys
for line in sys.stdin:
    try: r = json.loads(line)
    except ValueError: continue
    name = r.get("engine") or ("g4" if "decode_tok_s_per_row" in r else "llama.cpp")
    print(name + ": prefill " + str(r.get("prefill_tok_s")) + " decode " + str(r.get("decode_tok_s")) + ";", end=" ")
')"
  rm -rf "$dir"
}

# ab VAR PRESET:QUANT...: VAR=0 against VAR=1 (e.g. G4_CUDA_ATTN_MMA) in
# the same call: batch-1 decode at 512 and 32768 and a 4096-token prefill,
# q4 or the given quant, KV plain:bf16 unless given; one labeled line each
# into the summary (the JSON lines go to bench.jsonl as usual).
run_ab() {
  local var=$1 spec=$2 preset quant kv dir
  if past_deadline; then note "skipped $spec (deadline)"; return; fi
  IFS=: read -r preset quant kv <<<"$spec"
  kv=${kv:-plain:bf16}
  dir=/tmp/g4-synth-$preset-$quant
  synth_model "$preset" "$quant" || return 1
  local case p chunk gen val j
  for case in ${G4_AB_CASES:-512:512:64 32768:4096:32 4096:4096:2}; do
    IFS=: read -r p chunk gen <<<"$case"
    for val in 0 1; do
      past_deadline && { note "skipped $spec $case (deadline)"; return; }
      j=$(env "$var=$val" "$bin/g4" bench --model "$dir" --backend cuda --kv "$kv" --batch "${G4_AB_BATCH:-1}" --prompt "$p" --gen "$gen" \
          --memcpy-mib "$([ "$gen" = 2 ] && echo 0 || echo 1024)" --chunk "$chunk" --json 2>>"$misc")
      echo "$j" >>"$out/bench.jsonl"
      note "$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print("%-14s %24s prompt %6d: prefill %9.1f decode %8.1f tok/s" % (sys.argv[2], sys.argv[3], j["prompt_tokens"], j["prefill_tok_s"], j["decode_tok_s"]))' \
        "$j" "$preset:$quant" "$var=$val" 2>/dev/null || echo "$spec $var=$val $case failed")"
    done
  done
  [ -n "${G4_BENCH_KEEP:-}" ] || rm -rf "$dir"
}

bench_table() {
  [ -s "$out/bench.jsonl" ] || return
  python3 - "$out/bench.jsonl" <<'PY' | tee -a "$summary"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(f"{'model':16} {'kv':10} {'batch':>5} {'prompt':>6} {'prefill tok/s':>13} {'decode tok/s':>12} {'per row':>8} {'GB/s':>6} {'copy':>5}")
for r in rows:
    m = r["model"].split("g4-synth-")[-1]
    copy = f"{r['copy_gb_s']:5.0f}" if "copy_gb_s" in r else "    -"
    print(f"{m:16} {r['kv']:10} {r['batch']:5d} {r['prompt_tokens']:6d} {r['prefill_tok_s']:13.1f} "
          f"{r['decode_tok_s']:12.1f} {r['decode_tok_s_per_row']:8.1f} {r['decode_gb_s']:6.0f} {copy}")
PY
}

run_micro() {
  [ -x "$bin/cuda_ops_bench" ] || { note "no cuda_ops_bench"; return; }
  "$bin/cuda_ops_bench" --benchmark_min_time=0.2 ${G4_MICRO_FILTER:+--benchmark_filter=$G4_MICRO_FILTER} \
    >"$out/micro.log" 2>&1
  grep -E '^BM_' "$out/micro.log" | sed 's/manual_time//' | tee -a "$summary"
}

mode=
for arg in "$@"; do
  case "$arg" in
    tests) run_tests ;;
    micro) run_micro ;;
    bench) mode=bench ;;
    profile) mode=profile ;;
    peers) mode=peers ;;
    ncu) mode=ncu ;;
    trace) mode=trace ;;
    ab) mode=ab; ab_var= ;;
    *) if [ "$mode" = bench ]; then run_bench "$arg"; elif [ "$mode" = profile ]; then run_profile "$arg";
       elif [ "$mode" = peers ]; then run_peers "$arg"; elif [ "$mode" = ncu ]; then run_ncu "$arg";
       elif [ "$mode" = trace ]; then run_trace "$arg";
       elif [ "$mode" = ab ] && [ -z "$ab_var" ]; then ab_var=$arg;
       elif [ "$mode" = ab ]; then run_ab "$ab_var" "$arg"; fi ;;
  esac
done
bench_table
echo "== summary"
cat "$summary"
