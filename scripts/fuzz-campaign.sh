#!/usr/bin/env bash
# A long fuzzing campaign: every fuzz/fuzz_*.cc target (clang, libFuzzer,
# ASan + UBSan) runs for MINUTES on all cores (libFuzzer fork mode), one
# target after another. The grown corpus of each target is kept in
# WORK/<name>/ (seeded from fuzz/corpus/<name>/), so campaigns accumulate;
# findings go to WORK/artifacts/.
#
# Usage: scripts/fuzz-campaign.sh [--bin DIR] [MINUTES_PER_TARGET (default 30)] [TARGET...]
#   --bin DIR   use the prebuilt fuzz_* binaries in DIR instead of building
#               (e.g. build-fuzz's binaries carried to a host without clang).
#               Without TARGETs, every fuzz_* binary in DIR runs. A
#               libomp.so.5 next to them is found (the build copies it
#               there: the targets that use the CPU backend need OpenMP).
#   G4_FUZZ_JOBS            parallel fuzzing processes per target (default: nproc)
#   G4_FUZZ_WORK_DIR        corpora, logs, findings (default build-fuzz/campaign)
#   G4_FUZZ_TARGET_SECONDS  overrides MINUTES with a time in seconds
# Run from a checkout (it reads fuzz/corpus/ and fuzz/*.dict). At the end it
# prints one line per target and the same numbers as rows for the runs table
# of docs/reliability.md (date, target, CPU time, executions, corpus,
# findings); exits 1 if any target found anything or did not run.
#
# On a 16-core host, 30 minutes per target is 8 CPU-hours per target; with
# nine targets the campaign takes 4.5 hours of wall time. Merge a grown corpus
# back into the repository with
#   DIR/fuzz_NAME -merge=1 fuzz/corpus/NAME WORK/NAME
set -euo pipefail
cd "$(dirname "$0")/.."
bin=""
if [ "${1:-}" = "--bin" ]; then
  bin=${2:?--bin needs a directory}
  shift 2
fi
minutes=${1:-30}
shift || true
jobs=${G4_FUZZ_JOBS:-$(nproc)}
work=${G4_FUZZ_WORK_DIR:-build-fuzz/campaign}
seconds=${G4_FUZZ_TARGET_SECONDS:-$((minutes * 60))}
targets=("$@")

if [ -z "$bin" ]; then
  bin=build-fuzz
  [ ${#targets[@]} -eq 0 ] && targets=($(cd fuzz && ls fuzz_*.cc | sed 's/\.cc$//'))
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DG4_FUZZ=ON \
        -DG4_BUILD_TESTS=OFF -DG4_BUILD_BENCH=OFF >/dev/null
  ninja -C build-fuzz -j"$jobs" "${targets[@]}"
  # Carry this with the binaries: hosts without clang have no libomp.so.5.
  omp=$(ldd "build-fuzz/${targets[0]}" 2>/dev/null | awk '/libomp/ {print $3; exit}')
  [ -n "$omp" ] && [ -f "$omp" ] && cp -f "$omp" build-fuzz/
else
  [ -d "$bin" ] || { echo "fuzz-campaign: --bin $bin is not a directory" >&2; exit 2; }
  [ ${#targets[@]} -eq 0 ] && targets=($(cd "$bin" && ls fuzz_* 2>/dev/null | grep -v '\.' || true))
  [ ${#targets[@]} -gt 0 ] || { echo "fuzz-campaign: no fuzz_* binaries in $bin" >&2; exit 2; }
fi
export LD_LIBRARY_PATH="$(cd "$bin" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for name in "${targets[@]}"; do
  [ -x "$bin/$name" ] || { echo "fuzz-campaign: $bin/$name is missing" >&2; exit 2; }
  if ldd "$bin/$name" 2>/dev/null | grep -q 'not found'; then
    echo "fuzz-campaign: $bin/$name lacks libraries:" >&2
    ldd "$bin/$name" | grep 'not found' >&2
    exit 2
  fi
done

commas() { sed -E ':a;s/([0-9])([0-9]{3})($|,)/\1,\2\3/;ta' <<<"$1"; }

mkdir -p "$work/artifacts"
summary=()
rows=()
found=0
day=$(date -u +%F)
for name in "${targets[@]}"; do
  short=${name#fuzz_}
  corpus=$work/$short
  mkdir -p "$corpus"
  [ -d "fuzz/corpus/$short" ] && cp -rn "fuzz/corpus/$short"/. "$corpus"/
  dict=()
  [ -f "fuzz/$short.dict" ] && dict=(-dict="fuzz/$short.dict")
  log=$work/$short.log
  echo "-- $name: $seconds s on $jobs processes (log: $log)"
  start=$(date -u +%FT%TZ)
  before=$(ls "$work/artifacts" | grep -c "^$short-" || true)
  # -ignore_*: keep fuzzing after a finding; every finding is saved as an artifact.
  "$bin/$name" -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 "${dict[@]}" \
      -artifact_prefix="$work/artifacts/$short-" "$corpus" >"$log" 2>&1 || true
  after=$(ls "$work/artifacts" | grep -c "^$short-" || true)
  # Fork mode's status lines: "#EXECS: cov: C ft: F corp: N exec/s R oom/timeout/crash: O/T/X time: S ..."
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true)
  if [ -z "$last" ]; then
    execs=?; corp=?; bad="?/?/?"; found=1
    findings="did not run (see $log)"
  else
    execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
    corp=$(sed -E 's/.* corp: ([0-9]+).*/\1/' <<<"$last")
    bad=$(sed -E 's/.*oom\/timeout\/crash: ([0-9]+\/[0-9]+\/[0-9]+).*/\1/' <<<"$last")
    IFS=/ read -r ooms timeouts crashes <<<"$bad"
    if [ "$bad" = "0/0/0" ] && [ "$after" = "$before" ]; then
      findings=none
    else
      found=1
      findings="$crashes crashes, $timeouts timeouts, $ooms OOMs ($((after - before)) artifacts in $work/artifacts/$short-*)"
    fi
  fi
  summary+=("$(printf '%s  %-24s %6s s x %3s  %12s execs  corpus %6s  oom/timeout/crash %s' \
      "$start" "$name" "$seconds" "$jobs" "$execs" "$corp" "$bad")")
  cpu_min=$((seconds * jobs / 60))
  rows+=("$(printf '| %s | `%s` | %s min (%s processes x %s s) | %s | %s | %s |' "$day" "$name" "$cpu_min" "$jobs" \
      "$seconds" "$(commas "$execs")" "$(commas "$corp")" "$findings")")
done

echo
echo "== campaign summary ($(uname -n), $(nproc) cores, $jobs processes per target)"
printf '%s\n' "${summary[@]}"
echo
echo "Rows for docs/reliability.md (date, target, CPU time, executions, corpus, findings):"
printf '%s\n' "${rows[@]}"
ls "$work/artifacts/" 2>/dev/null | sed 's/^/finding: /'
echo "Keep a grown corpus: $bin/fuzz_NAME -merge=1 fuzz/corpus/NAME $work/NAME"
exit "$found"
