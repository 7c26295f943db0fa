#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over one GPU test case per kernel family (issue 29): fa3, fa2 and the
# reference prefill kernels, the varlen fa3 and fa2 kernels, decode (contiguous and paged), decode split into
# several and merged by the combine kernel, merged in thread-block clusters, and the merge kernel. Each case
# first runs once without the sanitizer (it fills the kernel cache OUT/cache, so that the sanitized runs do not
# compile), then under each tool. Logs: OUT/<tool>-<n>.log, a table in OUT/summary.txt; exits 1 when a tool
# reports an error or a case fails.
#   bash tools/soak/sanitize.sh OUT [EXE]        EXE default build/tests/flashjit_gpu_tests
#   SANITIZE_TOOLS="memcheck racecheck"  SANITIZE_TIMEOUT=3600 (seconds per sanitized run)
#   SANITIZE_CASES="5 6" (indices into the list below; default all)
set -uo pipefail
out=${1:?usage: tools/soak/sanitize.sh OUT [EXE]}
root=$(cd "$(dirname "$0")/../.." && pwd)
exe=${2:-$root/build/tests/flashjit_gpu_tests}
tools=${SANITIZE_TOOLS:-memcheck racecheck}
limit=${SANITIZE_TIMEOUT:-3600}
cuda=${CUDA_HOME:-/usr/local/cuda}
sanitizer=$(command -v compute-sanitizer || echo "$cuda/bin/compute-sanitizer")
[ -x "$sanitizer" ] || { echo "no compute-sanitizer (looked on PATH and in $cuda/bin)" >&2; exit 1; }
[ -x "$exe" ] || { echo "no GPU test binary at $exe (bash tools/setup.sh builds it)" >&2; exit 1; }
mkdir -p "$out"
export FLASHJIT_CACHE_DIR="$out/cache"

cases=(
  "sanitizer-sized: the persistent fa3 scheduler over more work tiles than SMs matches float64"
  "non-heuristic fa2 configs (tiles, warps, stages) match float64"
  "sanitizer-sized: the reference kernels match float64"
  "varlen fa3 kernels match float64 on short ragged batches, every mask"
  "varlen fa2 kernels match float64 on short ragged batches, every mask"
  "decode: ragged batches on contiguous and paged caches match float64"
  "decode: forced split counts (1, 2, 7, 32) and the planner's, with caller and runtime workspaces"
  "decode: splits merged in thread-block clusters and by the combine kernel match float64"
  "merge: 2 and 3 states over disjoint key sets match float64 over their union"
  "seqused_k: fa3 packed GQA and the persistent scheduler"
)
escape() { printf '%s' "$1" | sed 's/[][,\\*"~]/\\&/g'; }

failed=0
: >"$out/summary.txt"
for i in ${SANITIZE_CASES:-${!cases[@]}}; do
  [ -n "${cases[$i]:-}" ] || { echo "no sanitizer case $i (0 to $((${#cases[@]} - 1)))" >&2; exit 2; }
  name=${cases[$i]}
  spec=$(escape "$name")
  t0=$SECONDS
  "$exe" "$spec" >"$out/plain-$i.log" 2>&1
  rc=$?
  printf '%-10s %-6s exit %-3s %5s s  %s\n' plain "#$i" "$rc" $((SECONDS - t0)) "$name" | tee -a "$out/summary.txt"
  [ $rc = 0 ] || failed=1
  for tool in $tools; do
    t0=$SECONDS
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    [ "$tool" = racecheck ] && extra=(--racecheck-report all)
    timeout "$limit" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 --target-processes application-only \
      --log-file "$out/$tool-$i.log" "$exe" "$spec" >"$out/$tool-$i.out" 2>&1
    rc=$?
    errors=$(grep -Eo '(ERROR SUMMARY|RACECHECK SUMMARY): [0-9]+' "$out/$tool-$i.log" | tail -1)
    printf '%-10s %-6s exit %-3s %5s s  %s  [%s]\n' "$tool" "#$i" "$rc" $((SECONDS - t0)) "$name" "${errors:-no summary}" |
      tee -a "$out/summary.txt"
    [ $rc = 0 ] || failed=1
  done
done
echo "sanitizer runs: $([ $failed = 0 ] && echo 'all clean' || echo 'FAILURES, see the logs') ($out)" | tee -a "$out/summary.txt"
exit $failed
