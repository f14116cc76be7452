#!/usr/bin/env bash
# Builds g4 and runs every test: the release suite, the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer, and a short libFuzzer run of
# each parser. Usage: scripts/test.sh [--quick]  (--quick: release suite only)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
# Test binaries run side by side (ctest -j): OpenMP threads that spin while
# waiting would steal each other's cores (measured: 20x slower on 2 cores).
export OMP_WAIT_POLICY=passive

echo "== release build + tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DG4_BUILD_TESTS=ON >/dev/null
ninja -C build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== training scripts (data prep, tokenizer layout)"
python3 -m unittest discover -s training -p 'test_*.py'

[ "${1:-}" = "--quick" ] && exit 0

echo "== sanitizer build (clang: ASan + UBSan, libFuzzer coverage): tests, then fuzzing the parsers"
# One build serves the test suite under the sanitizers and the fuzz targets,
# so the layers both link are compiled once (CI has a time budget: 45
# minutes). -O1 -gline-tables-only: the sanitizers need line numbers, not
# full debug info, and -O2's extra compile time buys nothing here.
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DG4_SANITIZE=ON -DG4_FUZZ=ON \
      -DG4_BUILD_TESTS=ON -DG4_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" >/dev/null
ninja -C build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"

# A smoke run per target, G4_FUZZ_SECONDS each (default 16: the ten
# targets of today fuzz for 2.7 minutes together; lower it when adding
# targets); long campaigns are scripts/fuzz-campaign.sh's job
# (docs/reliability.md).
for src in fuzz/fuzz_*.cc; do
  name=$(basename "$src" .cc)
  corpus=$(mktemp -d)
  seeds="fuzz/corpus/${name#fuzz_}"
  [ -d "$seeds" ] && cp -r "$seeds"/. "$corpus"/
  dict=()
  [ -f "fuzz/${name#fuzz_}.dict" ] && dict=(-dict="fuzz/${name#fuzz_}.dict")
  echo "-- $name (${G4_FUZZ_SECONDS:-16} s)"
  ./build-asan/"$name" -max_total_time="${G4_FUZZ_SECONDS:-16}" -timeout=10 -print_final_stats=0 "${dict[@]}" \
      "$corpus" 2>&1 | tail -n 2
  rm -rf "$corpus"
done
echo "all test stages passed"
