#!/usr/bin/env bash
# One command for a GPU machine: builds flashjit, runs the CPU, GPU and Python GPU test suites, then the
# benchmarks (flashjit alone with host overheads; then flashjit and torch's kernels in one process, with
# plots; then the Python layer's host time per call), writing logs and results into OUTDIR and printing a summary last.
#   tools/gpu_check.sh OUTDIR [--quick] [--tile-sweep] [--steps a,b,...]
# --steps runs only the named steps (build cpu_tests gpu_tests python_gpu_tests bench python_bench
# host_overhead tile_sweep), e.g. to split the whole check over several commands on one machine (the build
# folder and the kernel cache persist between them): `--steps build,cpu_tests,gpu_tests` then
# `--steps python_gpu_tests,bench,python_bench,host_overhead`. A step other than build needs an earlier build.
set -uo pipefail
usage="usage: tools/gpu_check.sh OUTDIR [--quick] [--tile-sweep] [--steps a,b,...]"
out=${1:?$usage}
shift
quick=0 tiles=0 steps=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --tile-sweep) tiles=1 ;;
    --steps) steps=",${2:?$usage},"; shift ;;
    *) echo "unknown option $1"; echo "$usage"; exit 2 ;;
  esac
  shift
done
[ $tiles = 1 ] && [ -n "$steps" ] && steps="${steps}tile_sweep,"
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FLASHJIT_BUILD_DIR:-$root/build-gpu}
export FLASHJIT_CACHE_DIR=${FLASHJIT_CACHE_DIR:-$build/kernel-cache}
summary=()

step() {  # name, command...
  local name=$1; shift
  if [ -n "$steps" ] && [[ $steps != *",$name,"* ]]; then return; fi
  local t0=$SECONDS
  # A kernel that deadlocks must not eat the whole session: every step has a time limit.
  if timeout "${FLASHJIT_STEP_TIMEOUT:-900}" "$@" >"$out/$name.log" 2>&1; then summary+=("$name: ok ($((SECONDS - t0)) s)")
  else summary+=("$name: FAILED ($((SECONDS - t0)) s, see $name.log)"); fi
}

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nvcc --version | tail -1; } >"$out/system.txt" 2>&1
step build bash -c "cmake -S '$root' -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build '$build' -j \$(nproc) --target flashjit_bench flashjit_gpu_tests flashjit_shared"
step cpu_tests bash -c "cmake --build '$build' -j \$(nproc) && '$build/tests/flashjit_tests'"
step gpu_tests bash "$root/tools/gpu_tests.sh" "$build/tests/flashjit_gpu_tests"
step python_gpu_tests env PYTHONPATH="$root/python" FLASHJIT_LIBRARY="$build/libflashjit.so" python3 "$root/python/tests/gpu_checks.py"
bench="$out/bench.jsonl"
if [ -z "$steps" ] || [[ $steps == *",bench,"* ]]; then rm -f "$bench"; fi
if [ $quick = 1 ]; then
  shapes=(--shape 1,4096,4096,32,8,128,none --shape 1,4096,4096,32,8,128,causal
          --shape 1,16384,16384,32,8,128,none --shape 1,16384,16384,32,8,128,causal)
  step bench "$build/flashjit_bench" "${shapes[@]}" --overheads --out "$bench"
else
  step bench "$build/flashjit_bench" --sweep llama3 --sweep llama3_causal --sweep fa3 --sweep fa3_causal --overheads --out "$bench"
fi
if [ $tiles = 1 ]; then
  step tile_sweep "$build/flashjit_bench" --shape 1,8192,8192,32,8,128,none --shape 1,8192,8192,32,8,128,causal \
    --config "algorithm=fa2 block_m=128 warps=8 block_n=64 stages=2" --config "algorithm=fa2 block_m=128 warps=4 block_n=32 stages=2" \
    --config "algorithm=fa2 block_m=128 warps=4 block_n=64 stages=2" --config "algorithm=fa2 block_m=128 warps=8 block_n=64 stages=3" \
    --config "algorithm=fa2 block_m=64 warps=4 block_n=64 stages=2" --config "algorithm=fa2 block_m=128 warps=4 block_n=32 stages=3" \
    --config "algorithm=fa2 block_m=128 warps=8 block_n=32 stages=3" --config "algorithm=fa2 block_m=256 warps=8 block_n=32 stages=2" \
    --out "$out/tiles.jsonl"
fi
# flashjit and torch's kernels on the same tensors in one process, with plots (prefill sweeps, then decode).
pybench=(env PYTHONPATH="$root/python" FLASHJIT_LIBRARY="$build/libflashjit.so" python3 "$root/tools/bench/attention_bench.py"
         --outdir "$out")
if [ $quick = 1 ]; then
  step python_bench "${pybench[@]}" --sweep llama3 --seqlens 2048,4096,16384 --flex-min-seqlen 0 --sweep decode
else
  step python_bench "${pybench[@]}" --sweep llama3 --sweep fa3 --sweep decode --sweep decode-batches --sweep decode-short \
    --flex-min-seqlen 16384
fi
# Host time per call of flashjit's Python functions and of SDPA (what an eager serving loop pays per call).
step host_overhead env PYTHONPATH="$root/python" FLASHJIT_LIBRARY="$build/libflashjit.so" python3 \
  "$root/tools/bench/host_overhead.py" --out "$out/host-overhead.md"
for f in "$out"/*.md; do [ -f "$f" ] && cat "$f"; done
grep -h overheads "$bench" 2>/dev/null
[ -f "$out/tiles.jsonl" ] && python3 -c "
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l); print(r['shape'], r['config'], r.get('tflops'), 'regs', r.get('registers'), 'spill', r.get('spill_bytes'), 'err', r.get('rel_l2'))
" "$out/tiles.jsonl"
echo; printf '%s\n' "${summary[@]}"
tail -1 "$out"/gpu_tests.log 2>/dev/null
grep -E "test cases|All tests passed" "$out"/cpu_tests.log 2>/dev/null | tail -1
tail -1 "$out"/python_gpu_tests.log 2>/dev/null
# Everything in one archive beside the markdown tables and plots (the device tool returns at most 8 files).
(cd "$out" && tar czf logs.tgz --exclude=logs.tgz --exclude='*.md' --exclude='*.png' . && find . -type f ! -name logs.tgz ! -name '*.md' ! -name '*.png' -delete)
