#!/usr/bin/env bash
# Installs what flashjit needs to build (when missing and apt-get is available), then configures and
# builds it in ./build. Used by tools/run.sh and tools/test.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FLASHJIT_BUILD_DIR:-$root/build}

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
[ -e /usr/include/fmt/format.h ] || need+=(libfmt-dev)
[ -e /usr/include/nlohmann/json.hpp ] || need+=(nlohmann-json3-dev)
[ -e /usr/include/catch2/catch.hpp ] || [ -e /usr/include/catch2/catch_test_macros.hpp ] || need+=(catch2)
[ -e /usr/include/CLI/CLI.hpp ] || need+=(libcli11-dev)
# The Python tests run under the first python3 that has pytest (tests/CMakeLists.txt).
python3 -c 'import pytest' 2>/dev/null || /usr/bin/python3 -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing: ${need[*]}"
    apt-get install -y -qq "${need[@]}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; }
  else
    echo "missing build dependencies: ${need[*]} (install them, e.g. with apt-get)" >&2
    exit 1
  fi
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -e "$cuda/include/nvrtc.h" ] || { echo "no CUDA toolkit at $cuda (set CUDA_HOME): NVRTC and its headers are needed" >&2; exit 1; }

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)"
