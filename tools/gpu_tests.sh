#!/usr/bin/env bash
# The C++ GPU suite with one process per test case, JOBS at a time, all on the one GPU: the suite's time goes
# mostly to NVRTC compiles and float64 references on the CPU cores, which the processes share out (they share
# the kernel cache, FLASHJIT_CACHE_DIR, too). Prints a line as each test case ends, then every test case's
# result, time and Catch2 totals in order and the logs of the failing ones; exits 1 when any failed (or none
# was found), 77 when the executable finds no GPU (CTest's "skipped").
#   tools/gpu_tests.sh EXE [TEST_SPEC]
#   e.g. tools/gpu_tests.sh build-gpu/tests/flashjit_gpu_tests "[decode],[merge]"
# FLASHJIT_GPU_TEST_JOBS: processes at a time (default half the cores, at most 8).
# FLASHJIT_GPU_TEST_TIMEOUT: seconds one test case may run (default 600; then it fails, and says so).
set -uo pipefail
exe=${1:?usage: tools/gpu_tests.sh EXE [TEST_SPEC]}
spec=${2:-}
spec_args=()
[ -n "$spec" ] && spec_args=("$spec")
cores=$(nproc)
jobs=${FLASHJIT_GPU_TEST_JOBS:-$((cores / 2 > 8 ? 8 : cores / 2))}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
limit=${FLASHJIT_GPU_TEST_TIMEOUT:-600}

# Test case names, one per line (Catch2 v3 lists them with --verbosity quiet, v2 with --list-test-names-only).
listing=$(mktemp)
if "$exe" --help 2>/dev/null | grep -q -- --shard-count; then
  "$exe" "${spec_args[@]}" --list-tests --verbosity quiet >"$listing"
else
  "$exe" "${spec_args[@]}" --list-test-names-only >"$listing"
fi
rc=$?
if [ $rc = 77 ]; then cat "$listing"; rm -f "$listing"; exit 77; fi  # no GPU: the executable said why
mapfile -t names < <(sed '/^$/d' "$listing")
rm -f "$listing"
if [ ${#names[@]} -eq 0 ]; then
  echo "no test case matches '${spec}' (listing exit status $rc)"
  exit 1
fi
echo "${#names[@]} test cases, $jobs at a time"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run_one() {  # index, name: a Catch2 test spec matching exactly that name
  local t0=$SECONDS escaped rc
  escaped=$(printf '%s' "$2" | sed 's/[][,\\*"~]/\\&/g')
  timeout "$limit" "$exe" "$escaped" --durations yes >"$dir/$1.log" 2>&1
  rc=$?
  [ $rc = 124 ] && echo "(killed after $limit s)" >>"$dir/$1.log"
  echo "$rc $((SECONDS - t0))" >"$dir/$1.result"
  echo "ended: exit $rc, $((SECONDS - t0)) s: $2"
}
t0=$SECONDS
for i in "${!names[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  run_one "$i" "${names[$i]}" &
done
wait

failed=()
for i in "${!names[@]}"; do
  read -r rc secs <"$dir/$i.result" 2>/dev/null || { rc=?; secs=?; }
  totals=$(grep -E "All tests passed|test cases:" "$dir/$i.log" | tail -1)
  if [ "$rc" = 0 ]; then status=ok; else status="FAILED (exit $rc)"; failed+=("$i"); fi
  printf '%-18s %4s s  %s  [%s]\n' "$status" "$secs" "${names[$i]}" "$totals"
done
for i in "${failed[@]}"; do
  echo
  echo "==== ${names[$i]}"
  cat "$dir/$i.log"
done
echo
echo "${#names[@]} test cases in $((SECONDS - t0)) s: $((${#names[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
