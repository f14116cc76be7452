#!/usr/bin/env bash
# End-to-end tests of `g4 serve` with real clients: the official OpenAI and
# Anthropic SDKs from npm, and headless Chromium (Debian's chromium, driven by
# playwright-core) for the chat page. Installs the npm packages pinned in
# package-lock.json when node_modules lacks them (so it also runs offline once
# they are there), then runs the given test files (default: all).
# Usage: tests/server/js/run.sh PATH/TO/g4 [FILE.test.mjs ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
G4_BIN=$(realpath "$1")
shift
export G4_BIN
export G4_REPLAY=${G4_REPLAY:-$(dirname "$G4_BIN")/g4_sse_replay}
export G4_MODEL=${G4_MODEL:-$(realpath "$here/../../../models/demo")}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cd "$here"
if [ ! -d node_modules/openai ] || [ ! -d node_modules/@anthropic-ai/sdk ] || [ ! -d node_modules/playwright-core ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
if [ $# -eq 0 ]; then set -- *.test.mjs; fi
exec node --test --test-concurrency=1 "$@"
