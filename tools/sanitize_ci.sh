#!/usr/bin/env bash
# CI's sanitizer step (issue 29): one build with AddressSanitizer and UndefinedBehaviorSanitizer (-O1, the tests'
# own code -O0; halting on the first report) of the CPU test binary and what it needs (the CLI, which the tests
# run as their compile worker, libflashjit.so, the C ABI tests, the fuzz target); then the CPU suite, the C ABI
# tests and a bounded, seeded fuzz run. Any sanitizer report, crash or hang fails it.
#   FLASHJIT_SANITIZE_BUILD_DIR  build folder (default ./build-sanitize)
#   FLASHJIT_FUZZ_SECONDS        length of the fuzz run (default 60)
#   FLASHJIT_SANITIZE_TESTS      Catch2 test specs for flashjit_tests (default: all but the NVRTC-bound suites,
#                                the compiles of kernel sets and the precompile / autotune / pool runs, whose
#                                time is NVRTC's, which is not instrumented; the plain build runs them, and
#                                their host code runs here through the other tests)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FLASHJIT_SANITIZE_BUILD_DIR:-$root/build-sanitize}
fuzz_seconds=${FLASHJIT_FUZZ_SECONDS:-60}
spec=${FLASHJIT_SANITIZE_TESTS:-"~[precompile] ~[autotune] ~[pool] ~nvrtc*"}
start=$(date +%s)

# The library and the CLI at -O1, each target one unity translation unit (instrumented, file by file they took
# three to four times as long: the same headers' templates instantiated and optimized in every file; the other
# core compiles the tests meanwhile), the CPU tests' own code at -O0 (-O1 more than doubled its compile time; the
# tests' files stay separate units).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE=-O1 \
  -DCMAKE_C_FLAGS_SANITIZE=-O1 -DFLASHJIT_SANITIZE=ON -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 \
  -DFLASHJIT_TEST_COMPILE_OPTIONS=-O0 >/dev/null
cmake --build "$build" -j "$(nproc)" --target flashjit_tests flashjit flashjit_capi_test flashjit_capi_abuse_test \
  flashjit_fuzz
echo "sanitizer build: $(( $(date +%s) - start )) s"

# Leaks are not checked in the suites (NVRTC and the driver keep allocations for the process's life); the fuzz
# run, which never loads NVRTC's compiler, checks them.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=0:detect_stack_use_after_return=0
cd "$build"
t=$(date +%s)
set -f  # the specs are words, not globs
# shellcheck disable=SC2086  # the spec is a list of Catch2 test specs
tests/flashjit_tests $spec
set +f
echo "sanitized CPU suite: $(( $(date +%s) - t )) s"
tests/flashjit_capi_test
tests/flashjit_capi_abuse_test
ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 tests/flashjit_fuzz "$fuzz_seconds" 1
echo "sanitizer step: $(( $(date +%s) - start )) s"
