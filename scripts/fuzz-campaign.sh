#!/usr/bin/env bash
# A long fuzzing campaign: builds every fuzz/fuzz_*.cc target (clang,
# libFuzzer, ASan + UBSan) and runs each for MINUTES on all cores (libFuzzer
# fork mode), one target after another. The grown corpus of each target is
# kept in build-fuzz/campaign/<name>/ (seeded from fuzz/corpus/<name>/), so
# campaigns accumulate; findings go to build-fuzz/campaign/artifacts/.
#
# Usage: scripts/fuzz-campaign.sh [MINUTES_PER_TARGET (default 30)] [TARGET...]
#   G4_FUZZ_JOBS        parallel fuzzing processes per target (default: nproc)
#   G4_FUZZ_SKIP_BUILD  1: use binaries already built (e.g. copied to a host
#                       without clang; they need libomp.so.5 on LD_LIBRARY_PATH)
#   G4_FUZZ_BIN_DIR     where the binaries are (default build-fuzz)
#   G4_FUZZ_WORK_DIR    corpora, logs, findings (default build-fuzz/campaign)
#   G4_FUZZ_TARGET_SECONDS  overrides MINUTES with a time in seconds
# Prints one line per target with the date, executions, corpus size and
# crash/timeout/OOM counts (the numbers docs/reliability.md records); exits 1
# if any target found anything.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
shift || true
jobs=${G4_FUZZ_JOBS:-$(nproc)}
bin=${G4_FUZZ_BIN_DIR:-build-fuzz}
work=${G4_FUZZ_WORK_DIR:-build-fuzz/campaign}
seconds=${G4_FUZZ_TARGET_SECONDS:-$((minutes * 60))}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=($(cd fuzz && ls fuzz_*.cc | sed 's/\.cc$//'))
fi

if [ "${G4_FUZZ_SKIP_BUILD:-0}" != 1 ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DG4_FUZZ=ON \
        -DG4_BUILD_TESTS=OFF -DG4_BUILD_BENCH=OFF >/dev/null
  ninja -C build-fuzz -j"$jobs" "${targets[@]}"
fi

mkdir -p "$work/artifacts"
summary=()
found=0
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
  # -ignore_*: keep fuzzing after a finding; every finding is saved as an artifact.
  "$bin/$name" -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 "${dict[@]}" \
      -artifact_prefix="$work/artifacts/$short-" "$corpus" >"$log" 2>&1 || true
  # Fork mode's status lines: "#EXECS: cov: C ft: F corp: N exec/s: R oom/timeout/crash: O/T/X time: S ..."
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true)
  execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
  corp=$(sed -E 's/.* corp: ([0-9]+).*/\1/' <<<"$last")
  bad=$(sed -E 's/.*oom\/timeout\/crash: ([0-9]+\/[0-9]+\/[0-9]+).*/\1/' <<<"$last")
  [ -z "$last" ] && { execs=?; corp=?; bad="?/?/? (no status line: see $log)"; found=1; }
  [ -n "$last" ] && [ "$bad" != "0/0/0" ] && found=1
  summary+=("$(printf '%s  %-24s %6s s  %12s execs  corpus %6s  oom/timeout/crash %s' \
      "$start" "$name" "$seconds" "$execs" "$corp" "$bad")")
done

echo
echo "== campaign summary ($(uname -n), $jobs processes per target)"
printf '%s\n' "${summary[@]}"
ls "$work/artifacts/" 2>/dev/null | sed 's/^/finding: /'
echo "Keep a grown corpus: $bin/fuzz_NAME -merge=1 fuzz/corpus/NAME $work/NAME"
exit "$found"
