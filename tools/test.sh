#!/usr/bin/env bash
# Builds flashjit and runs its test suites with CTest: the CPU tests, and the GPU tests (reported as
# skipped when no GPU is present).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FLASHJIT_BUILD_DIR:-$root/build}
"$root/tools/setup.sh"
ctest --test-dir "$build" --output-on-failure
