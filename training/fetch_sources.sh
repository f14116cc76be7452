#!/usr/bin/env bash
# Downloads the Debian packages whose English text trains the demo model and
# unpacks them (without installing) under ROOT; dumps the King James Bible
# with the `bible` program of bible-kjv (its data file is compressed).
#
# Usage: training/fetch_sources.sh ROOT
# Then:  python3 training/prepare_data.py ROOT training/data
# Needs: apt-get (Debian 12), root or a writable apt cache.
set -euo pipefail
root=${1:?usage: fetch_sources.sh ROOT}
mkdir -p "$root/debs"
root=$(cd "$root" && pwd)
cd "$root/debs"

# All are in Debian main; docs/demo-model.md lists their licences.
packages=(bible-kjv bible-kjv-text debian-handbook debian-reference-en
          python3.11-doc perl-doc fortunes jargon-text wordnet-base
          postgresql-doc-15 python-django-doc rust-doc)
apt-get download "${packages[@]}"
for deb in ./*.deb; do dpkg -x "$deb" "$root"; done

# bible-kjv's reader looks for its data in /usr/lib; point it at ours.
"$root/usr/bin/bible" -p "$root/usr/lib" -f "gen1:1-rev22:21" > "$root/kjv.txt"
echo "sources unpacked under $root"
