#!/usr/bin/env bash
# The main job: set up and build, then compile the default llama3-shaped kernel (B1, S 4096, H32/KV8,
# D128, bf16). With a GPU it is verified against the reference kernel and timed; without one it is
# compiled and its registers, spills, compile time and cache location are reported.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FLASHJIT_BUILD_DIR:-$root/build}
"$root/tools/setup.sh"
"$build/flashjit" info
echo
"$build/flashjit" run "$@"
