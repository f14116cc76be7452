#!/usr/bin/env bash
# Installs the Debian 12 packages g4 builds and tests with. Skips apt when
# everything is already present.
set -euo pipefail
pkgs=(cmake ninja-build g++ make pkg-config git
      libgtest-dev libgmock-dev googletest libbenchmark-dev
      nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libfmt-dev
      clang libclang-rt-14-dev libomp-dev tmux libedit-dev
      chromium curl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "g4: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The server's client tests (tests/server/js) run on Node.js with npm; a
# machine without them gets Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
