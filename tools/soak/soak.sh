#!/usr/bin/env bash
# The soak run of issue 29 on a GPU machine: 8 threads x 4 streams for 2 minutes (tools/soak/soak.cpp), in a
# fresh kernel cache so that new shapes are cold compiles.
#   bash tools/soak/soak.sh OUT [extra flashjit_soak options: --seconds S --threads N --streams N --seed N]
set -euo pipefail
out=${1:?usage: tools/soak/soak.sh OUT [options]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
exe=$root/build/tests/flashjit_soak
[ -x "$exe" ] || { echo "no soak binary at $exe (bash tools/setup.sh builds it)" >&2; exit 1; }
mkdir -p "$out"
export FLASHJIT_CACHE_DIR="$out/cache"
rm -rf "$FLASHJIT_CACHE_DIR"
exec "$exe" --out "$out" --seconds 120 --threads 8 --streams 4 "$@"
