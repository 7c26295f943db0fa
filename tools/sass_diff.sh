#!/usr/bin/env bash
# Proves that a change left every kernel's machine code unchanged: compiles every kernel that the sweep files
# (configs/*.json) and the tuned tables (configs/tuned/*.json) produce with two flashjit CLIs, each into a fresh
# cache, disassembles every cubin (cuobjdump -res-usage / -elf .nv.info / -sass), keys the dumps by the
# kernel's readable name (not the cache key, which moves with the config JSON and the templates), normalizes
# them and diffs base against head kernel by kernel.
#
#   tools/sass_diff.sh --base REV      [--head CLI] [options]   build REV's flashjit in a worktree under /tmp
#   tools/sass_diff.sh --base-cli CLI  [--head CLI] [options]   an already built base CLI
#   tools/sass_diff.sh --base-dump DIR [--head CLI] [options]   reuse an earlier run's base dump folder
#
# Each side reads the sweep files and tuned tables of its own source tree (the worktree of --base REV; the git
# tree holding a CLI, e.g. ./build/flashjit -> ./configs), copied into its dump folder (DIR/inputs) before
# anything runs, so a tree edited meanwhile does not matter and a dump can be reused alone later.
#
# Options:
#   --head PATH         head CLI (default ./build/flashjit)
#   --base-wt DIR       worktree for --base (default /tmp/sass_diff_wt_<commit12>); reused when it exists at REV
#   --base-dump DIR     base dump folder (default OUT/base). With --base/--base-cli it is reused when complete and
#                       made by the same CLI binary from the same inputs, else regenerated; alone it must exist.
#   --head-dump DIR     head dump folder (default OUT/head), same rules
#   --out DIR           summary, per-kernel diffs, default dump folders (default /tmp/sass_diff)
#   --base-configs DIR  the base side's sweep folder (default: see above; else this repository's configs/)
#   --head-configs DIR  the head side's sweep folder
#   --configs DIR       both sides' sweep folder
#   --tuned FILE        tuned table for both sides (repeatable; default: each side's CONFIGS/tuned/*.json)
#   --no-tuned          no tuned table
#   --tuned-fields F    entry fields whose configs are compiled (default best; e.g. best,runner_up,heuristic)
#   --sweep FILE        one more sweep file for both sides (repeatable)
#   --coverage          also a generated sweep past the shipped ones (fp16, every mask, head dims 40-256, MHA,
#                       paged and windowed decode, q_len 4) and the varlen twin of every prefill kernel
#                       (443 kernels in all instead of 45; about 10 minutes per side on 2 idle cores)
#   --all-candidates    precompile --all-candidates: every valid tile of the sweeps' problems (about 600 kernels)
#   --arch A            CUDA target (repeatable; default sm_90a and sm_80)
#   --sms N             SM count for the decode split plans (repeatable; default 132)
#   -j N                compile workers and disassembly jobs (default: nproc)
#   --allow-missing     kernels present on one side only do not fail the check
#   --fresh             regenerate dumps even when a matching one exists
#   --no-reuse          disassemble every head cubin, also those byte-identical to a base cubin (whose dump is
#                       taken otherwise)
#   --cuobjdump PATH    cuobjdump to use (default: $CUOBJDUMP, PATH, $CUDA_HOME/bin, $SASS_DIFF_TOOLS/bin with
#                       SASS_DIFF_TOOLS=/tmp/sass_diff_tools; when none is found, the nvidia-cuda-cuobjdump and
#                       nvidia-cuda-nvdisasm wheels (13.2.51, the oldest 13.x on PyPI) are pip-installed there)
# Exit: 0 every kernel on both sides and identical; 1 a kernel differs, is missing or failed to compile; 2 usage
# or setup error.
set -euo pipefail

die() { echo "sass_diff: $*" >&2; exit 2; }
log() { echo "sass_diff: $*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd))
HELPER="$HERE/sass_dump.py"
TOOLS_DIR=${SASS_DIFF_TOOLS:-/tmp/sass_diff_tools}
SCRIPT_VERSION=2

BASE_REV="" BASE_CLI="" BASE_WT="" BASE_DUMP="" HEAD_CLI="" HEAD_DUMP="" OUT=/tmp/sass_diff
BASE_CONFIGS="" HEAD_CONFIGS="" TUNED=() NO_TUNED=0 TUNED_FIELDS=best ARCHS=() SMS=() JOBS=$(nproc)
ALLOW_MISSING=0 FRESH=0 CUOBJDUMP="${CUOBJDUMP:-}" EXTRA_SWEEPS=() COVERAGE=0 ALL_CANDIDATES=0 NO_REUSE=0

need() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base) need "$@"; BASE_REV=$2; shift 2 ;;
    --base-cli) need "$@"; BASE_CLI=$2; shift 2 ;;
    --base-wt) need "$@"; BASE_WT=$2; shift 2 ;;
    --base-dump) need "$@"; BASE_DUMP=$2; shift 2 ;;
    --head) need "$@"; HEAD_CLI=$2; shift 2 ;;
    --head-dump) need "$@"; HEAD_DUMP=$2; shift 2 ;;
    --out) need "$@"; OUT=$2; shift 2 ;;
    --base-configs) need "$@"; BASE_CONFIGS=$2; shift 2 ;;
    --head-configs) need "$@"; HEAD_CONFIGS=$2; shift 2 ;;
    --configs) need "$@"; BASE_CONFIGS=$2; HEAD_CONFIGS=$2; shift 2 ;;
    --tuned) need "$@"; TUNED+=("$2"); shift 2 ;;
    --no-tuned) NO_TUNED=1; shift ;;
    --tuned-fields) need "$@"; TUNED_FIELDS=$2; shift 2 ;;
    --sweep) need "$@"; EXTRA_SWEEPS+=("$2"); shift 2 ;;
    --coverage) COVERAGE=1; shift ;;
    --all-candidates) ALL_CANDIDATES=1; shift ;;
    --arch) need "$@"; ARCHS+=("$2"); shift 2 ;;
    --sms) need "$@"; SMS+=("$2"); shift 2 ;;
    -j|--jobs) need "$@"; JOBS=$2; shift 2 ;;
    -j*) JOBS=${1#-j}; shift ;;
    --allow-missing) ALLOW_MISSING=1; shift ;;
    --fresh) FRESH=1; shift ;;
    --no-reuse) NO_REUSE=1; shift ;;
    --cuobjdump) need "$@"; CUOBJDUMP=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ ${#ARCHS[@]} -gt 0 ]] || ARCHS=(sm_90a sm_80)
[[ ${#SMS[@]} -gt 0 ]] || SMS=(132)
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "-j needs a positive integer"
[[ -z "$BASE_REV" || -z "$BASE_CLI" ]] || die "give one of --base REV and --base-cli PATH"
[[ -n "$BASE_REV$BASE_CLI$BASE_DUMP" ]] || die "give --base REV, --base-cli PATH or --base-dump DIR (see --help)"
abspath() { [[ "$1" = /* ]] && echo "$1" || echo "$PWD/$1"; }
OUT=$(abspath "$OUT")
[[ -n "$BASE_DUMP" ]] && BASE_DUMP=$(abspath "$BASE_DUMP") || BASE_DUMP="$OUT/base"
# A head dump is taken without a head CLI only when --head-dump names it: OUT/head may be an earlier run's (made
# from another tree), so without --head-dump the head side is always ./build/flashjit's (reused only when the
# same binary made it).
if [[ -z "$HEAD_CLI" && -z "$HEAD_DUMP" ]]; then HEAD_CLI=./build/flashjit; fi
[[ -n "$HEAD_DUMP" ]] && HEAD_DUMP=$(abspath "$HEAD_DUMP") || HEAD_DUMP="$OUT/head"
[[ "$BASE_DUMP" != "$HEAD_DUMP" ]] || die "the base and head dump folders are the same ($BASE_DUMP)"
if [[ -z "$HEAD_CLI" && ! -f "$HEAD_DUMP/complete" ]]; then HEAD_CLI=./build/flashjit; fi
[[ -z "$HEAD_CLI" ]] || { HEAD_CLI=$(abspath "$HEAD_CLI"); [[ -x "$HEAD_CLI" ]] || die "head CLI $HEAD_CLI is not an executable"; }
[[ -z "$BASE_CLI" ]] || { BASE_CLI=$(abspath "$BASE_CLI"); [[ -x "$BASE_CLI" ]] || die "base CLI $BASE_CLI is not an executable"; }
[[ $NO_TUNED -eq 0 ]] || TUNED=()
for i in "${!TUNED[@]}"; do TUNED[$i]=$(abspath "${TUNED[$i]}"); [[ -f "${TUNED[$i]}" ]] || die "no tuned table ${TUNED[$i]}"; done
for i in "${!EXTRA_SWEEPS[@]}"; do
  EXTRA_SWEEPS[$i]=$(abspath "${EXTRA_SWEEPS[$i]}"); [[ -f "${EXTRA_SWEEPS[$i]}" ]] || die "no sweep file ${EXTRA_SWEEPS[$i]}"
done
mkdir -p "$OUT"
T0=$(now)

# ------------------------------------------------------------------------------------------- cuobjdump
find_cuobjdump() {
  local c
  for c in "$CUOBJDUMP" "$(command -v cuobjdump || true)" "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump" \
           "$TOOLS_DIR/bin/cuobjdump"; do
    [[ -n "$c" && -x "$c" ]] && { echo "$c"; return 0; }
  done
  return 1
}
if ! CUOBJDUMP=$(find_cuobjdump); then
  # The toolkit here has no cuobjdump: take NVIDIA's wheels (cuobjdump needs nvdisasm beside it or on PATH).
  log "no cuobjdump found: installing nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm into $TOOLS_DIR"
  ver=${SASS_DIFF_CUOBJDUMP_VERSION:-13.2.51}
  for p in cuobjdump nvdisasm; do
    python3 -m pip install -q --disable-pip-version-check --no-deps --target "$TOOLS_DIR/$p" "nvidia-cuda-$p==$ver" \
      || die "pip could not install nvidia-cuda-$p==$ver; give --cuobjdump PATH"
  done
  mkdir -p "$TOOLS_DIR/bin"
  ln -sf "$TOOLS_DIR"/cuobjdump/nvidia/cu*/bin/cuobjdump "$TOOLS_DIR/bin/cuobjdump"
  ln -sf "$TOOLS_DIR"/nvdisasm/nvidia/cu*/bin/nvdisasm "$TOOLS_DIR/bin/nvdisasm"
  CUOBJDUMP=$TOOLS_DIR/bin/cuobjdump
fi
CUOBJDUMP=$(abspath "$CUOBJDUMP")
# cuobjdump -sass runs nvdisasm, from PATH or NVDISASM_PATH: look beside cuobjdump (and its real location) too.
for d in "$(dirname "$CUOBJDUMP")" "$(dirname "$(readlink -f "$CUOBJDUMP")")" "$TOOLS_DIR/bin" \
         "${CUDA_HOME:-/usr/local/cuda}/bin"; do
  [[ -x "$d/nvdisasm" ]] && { export PATH="$d:$PATH"; break; }
done
command -v nvdisasm >/dev/null || die "cuobjdump -sass needs nvdisasm, found none (PATH, beside $CUOBJDUMP, $TOOLS_DIR/bin)"
CUO_VERSION=$("$CUOBJDUMP" --version | tail -1)
log "cuobjdump: $CUOBJDUMP ($CUO_VERSION)"

# ------------------------------------------------------------------------------------------- base build
if [[ -n "$BASE_REV" ]]; then
  commit=$(git -C "$REPO" rev-parse --verify "$BASE_REV^{commit}") || die "no such revision $BASE_REV"
  BASE_WT=$(abspath "${BASE_WT:-/tmp/sass_diff_wt_${commit:0:12}}")
  case "$BASE_WT/" in "$REPO"/*) die "the base worktree $BASE_WT must be outside the repository" ;; esac
  tb=$(now)
  if [[ -e "$BASE_WT" ]]; then
    at=$(git -C "$BASE_WT" rev-parse HEAD 2>/dev/null) || die "$BASE_WT exists and is not a git worktree"
    [[ "$at" == "$commit" ]] || die "$BASE_WT is at ${at:0:12}, not ${commit:0:12}: remove it (git worktree remove) or pick --base-wt"
    [[ -z "$(git -C "$BASE_WT" status --porcelain --untracked-files=no)" ]] || die "$BASE_WT has local changes"
    log "base: reusing worktree $BASE_WT at ${commit:0:12}"
  else
    log "base: worktree $BASE_WT at ${commit:0:12}"
    git -C "$REPO" worktree add --detach "$BASE_WT" "$commit" >&2
  fi
  mkdir -p "$BASE_WT/build"
  if [[ ! -f "$BASE_WT/build/build.ninja" ]]; then
    cmake -S "$BASE_WT" -B "$BASE_WT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHJIT_BUILD_TESTS=OFF \
      > "$BASE_WT/build/sass_diff_configure.log" 2>&1 \
      || { tail -30 "$BASE_WT/build/sass_diff_configure.log" >&2; die "configure of $BASE_WT failed"; }
  fi
  log "base: building flashjit (log: $BASE_WT/build/sass_diff_build.log)"
  cmake --build "$BASE_WT/build" --target flashjit > "$BASE_WT/build/sass_diff_build.log" 2>&1 \
    || { tail -30 "$BASE_WT/build/sass_diff_build.log" >&2; die "build of $BASE_WT failed"; }
  BASE_CLI="$BASE_WT/build/flashjit"
  [[ -n "$BASE_CONFIGS" ]] || BASE_CONFIGS="$BASE_WT/configs"
  log "base: built $BASE_CLI in $(elapsed "$tb") s"
fi

# ------------------------------------------------------------------------------------------- inputs
# configs_of CLI: the configs/ folder of the git tree that holds CLI, else this repository's.
configs_of() {
  local top
  top=$(git -C "$(dirname "$1")" rev-parse --show-toplevel 2>/dev/null || true)
  if [[ -n "$top" && -d "$top/configs" ]]; then echo "$top/configs"; else echo "$REPO/configs"; fi
}

# stage_inputs CONFIGS DIR: copy the sweep files (and extra sweeps, the coverage sweep) to DIR/sweeps and the
# tuned tables to DIR/tuned; print the inputs' description (options, then each file's hash), whose hash keys reuse.
stage_inputs() {
  local configs=$1 dir=$2 f i=0 tuned=()
  [[ -d "$configs" ]] || die "no configs folder $configs"
  rm -rf "$dir"; mkdir -p "$dir/sweeps" "$dir/tuned"
  local sweeps=()
  mapfile -t sweeps < <(python3 "$HELPER" sweeps "$configs")
  sweeps+=(${EXTRA_SWEEPS[@]+"${EXTRA_SWEEPS[@]}"})
  for f in ${sweeps[@]+"${sweeps[@]}"}; do cp "$f" "$dir/sweeps/$(printf %02d $i)_$(basename "$f")"; i=$((i + 1)); done
  [[ $COVERAGE -eq 1 ]] && python3 "$HELPER" coverage-sweep "$dir/sweeps/$(printf %02d $i)_sass_diff_coverage.json" > /dev/null
  [[ -n "$(ls -A "$dir/sweeps")" ]] || die "no sweep file in $configs"
  if [[ $NO_TUNED -eq 0 ]]; then
    if [[ ${#TUNED[@]} -gt 0 ]]; then tuned=("${TUNED[@]}"); else shopt -s nullglob; tuned=("$configs"/tuned/*.json); shopt -u nullglob; fi
  fi
  for f in ${tuned[@]+"${tuned[@]}"}; do cp "$f" "$dir/tuned/"; done
  echo "script $SCRIPT_VERSION dump-format $(sed -n 's/^DUMP_FORMAT = \([0-9]*\).*/\1/p' "$HELPER")"
  echo "archs ${ARCHS[*]}"; echo "sms ${SMS[*]}"; echo "tuned-fields $TUNED_FIELDS"; echo "cuobjdump $CUO_VERSION"
  echo "coverage $COVERAGE all-candidates $ALL_CANDIDATES"
  (cd "$dir" && for f in sweeps/* tuned/*; do [[ -f "$f" ]] && echo "$f $(sha256sum < "$f" | cut -d' ' -f1)"; done)
  return 0
}

# ------------------------------------------------------------------------------------------- dumps
# run_cli CACHE CMD...: CMD with nothing from the caller's environment steering what flashjit compiles.
run_cli() {
  local cache=$1; shift
  env -u FLASHJIT_TUNED -u FLASHJIT_JIT -u FLASHJIT_CACHE_MAX_MB -u FLASHJIT_WORKER_FAULT -u FLASHJIT_LOG \
    -u FLASHJIT_PDL -u FLASHJIT_CHECK_PAGES FLASHJIT_CACHE_DIR="$cache" "$@"
}

# compile_configs LABEL CLI DIR WHAT FILE...: `flashjit compile` the config files, JOBS processes at once; failures
# go to the caller's `failures`.
compile_configs() {
  local label=$1 cli=$2 dir=$3 what=$4; shift 4
  local cfgs=("$@") pids=() i k rc
  for ((i = 0; i < JOBS; i++)); do
    local part=()
    for ((k = i; k < ${#cfgs[@]}; k += JOBS)); do part+=("${cfgs[$k]}"); done
    [[ ${#part[@]} -gt 0 ]] || continue
    run_cli "$dir/cache" "$cli" compile --json "${part[@]}" > "$dir/logs/compile_${what}_$i.json" 2> "$dir/logs/compile_${what}_$i.log" &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    rc=0; wait "${pids[$i]}" || rc=$?
    if [[ $rc -ne 0 ]]; then
      failures+=("compile of $what configs, part $i (exit $rc, $dir/logs/compile_${what}_$i.log)")
      log "$label: compile of $what configs, part $i, failed (exit $rc): $(head -c 300 "$dir/logs/compile_${what}_$i.log")"
    fi
  done
  log "$label:   $what: ${#cfgs[@]} configs compiled or found"
}

# make_dump LABEL CLI DIR CONFIGS [OTHER_DIR]: compile everything with CLI into DIR/cache and dump it into DIR (or
# reuse DIR). Cubins byte-identical to those of OTHER_DIR (a complete dump) take its disassembly.
make_dump() {
  local label=$1 cli=$2 dir=$3 configs=$4 other=${5:-} td cli_sha fp inputs_text stage="$OUT/staging/$1"
  log "$label: inputs from $configs"
  inputs_text=$(stage_inputs "$configs" "$stage")
  cli_sha=$(sha256sum < "$cli" | cut -d' ' -f1)
  fp="$cli_sha $(sha256sum <<< "$inputs_text" | cut -d' ' -f1)"
  if [[ $FRESH -eq 0 && -f "$dir/complete" && "$(cat "$dir/complete")" == "$fp" ]]; then
    log "$label: reusing the dump in $dir (same CLI binary and inputs)"
    rm -rf "$stage"
    return 0
  fi
  if [[ -e "$dir" ]]; then
    # Only ever delete a folder this script made.
    [[ -f "$dir/sass_diff_dump" || -z "$(ls -A "$dir")" ]] || die "$dir exists and is not a sass_diff dump folder: not touching it"
    rm -rf "$dir"
  fi
  mkdir -p "$dir/logs"
  touch "$dir/sass_diff_dump"
  mv "$stage" "$dir/inputs"
  echo "$inputs_text" > "$dir/inputs.txt"
  mkdir -m 700 "$dir/cache"
  td=$(now)
  local failures=() arch_args=() s sweep rc name sweeps=() tuned=()
  for a in "${ARCHS[@]}"; do arch_args+=(--arch "$a"); done
  [[ $ALL_CANDIDATES -eq 1 ]] && arch_args+=(--all-candidates)
  shopt -s nullglob; sweeps=("$dir"/inputs/sweeps/*.json); tuned=("$dir"/inputs/tuned/*.json); shopt -u nullglob
  log "$label: compiling with $cli into $dir/cache"
  # The heuristics' picks (no tuned table), then with the tuned tables loaded (their picks, nearest entry by
  # problem shape, for every GPU of the arch that the tables name); kernels already in the cache are skipped.
  local tuned_env=""
  [[ ${#tuned[@]} -gt 0 ]] && tuned_env=$(IFS=:; echo "${tuned[*]}")
  for pass in heuristics tuned; do
    [[ $pass == tuned && -z "$tuned_env" ]] && continue
    for sweep in "${sweeps[@]}"; do
      for s in "${SMS[@]}"; do
        name="precompile_${pass}_$(basename "$sweep" .json)_sms$s"
        rc=0
        local pre=()
        [[ $pass == tuned ]] && pre=(env FLASHJIT_TUNED="$tuned_env")
        run_cli "$dir/cache" ${pre[@]+"${pre[@]}"} "$cli" precompile --sweep "$sweep" "${arch_args[@]}" --sms "$s" \
          -j "$JOBS" > "$dir/logs/$name.log" 2>&1 || rc=$?
        if [[ $rc -ne 0 ]]; then failures+=("$name (exit $rc, $dir/logs/$name.log)"); log "$label: $name failed (exit $rc)"; fi
        log "$label:   $name: $(awk '/^  (kernels|compiled|cached|failed) /{ printf "%s %s  ", $1, $2 }' "$dir/logs/$name.log")"
        # A table the CLI refuses is only a warning to precompile; here it fails the step (its kernels would be missed).
        if grep -q 'ignoring tuned table' "$dir/logs/$name.log"; then
          failures+=("$name: $(grep -m1 'ignoring tuned table' "$dir/logs/$name.log")")
          log "$label: $name: $(grep -m1 'ignoring tuned table' "$dir/logs/$name.log")"
        fi
      done
    done
  done
  # Every tuned entry's config, compiled explicitly (also when the tables' stamps do not match this build).
  local cfgs=()
  if [[ ${#tuned[@]} -gt 0 ]]; then
    mapfile -t cfgs < <(python3 "$HELPER" tuned "$dir/tuned_configs" "${tuned[@]}" --fields "$TUNED_FIELDS")
    compile_configs "$label" "$cli" "$dir" "tuned-$TUNED_FIELDS" ${cfgs[@]+"${cfgs[@]}"}
  fi
  # --coverage: the varlen twin of every prefill kernel compiled so far (forward_varlen's kernels).
  if [[ $COVERAGE -eq 1 ]]; then
    mapfile -t cfgs < <(python3 "$HELPER" varlen "$dir/varlen_configs" --cache "$dir/cache")
    compile_configs "$label" "$cli" "$dir" varlen ${cfgs[@]+"${cfgs[@]}"}
  fi
  local tc; tc=$(elapsed "$td")
  log "$label: compiled in $tc s; disassembling"
  local tx; tx=$(now)
  rc=0
  local reuse=()
  [[ $NO_REUSE -eq 0 && -n "$other" && -f "$other/complete" ]] && grep -qxF "cuobjdump $CUO_VERSION" "$other/inputs.txt" \
    && reuse=(--reuse "$other")
  python3 "$HELPER" extract --cache "$dir/cache" --side "$dir" --cuobjdump "$CUOBJDUMP" -j "$JOBS" \
    ${reuse[@]+"${reuse[@]}"} || rc=$?
  [[ $rc -eq 0 ]] || failures+=("disassembly (exit $rc)")
  local version; version=$("$cli" --version 2>/dev/null | head -1 || true)
  local rev=""; rev=$(git -C "$(dirname "$cli")" rev-parse HEAD 2>/dev/null || true)
  [[ -n "$rev" ]] && ! git -C "$(dirname "$cli")" diff --quiet HEAD -- 2>/dev/null && rev="$rev+uncommitted changes"
  python3 - "$dir/info.json" "$label" "$cli" "$cli_sha" "$version" "$rev" "$configs" "$tc" "$(elapsed "$tx")" \
      "$CUO_VERSION" ${failures[@]+"${failures[@]}"} <<'EOF'
import json, sys, time
path, label, cli, sha, version, rev, configs, tc, tx, cuo, *failures = sys.argv[1:]
json.dump({"label": f"{cli} ({version}{', tree at ' + rev[:12] + rev[40:] if rev else ''}; inputs from {configs})",
           "side": label, "cli": cli, "cli_sha256": sha, "version": version, "git_head_of_cli_folder": rev,
           "configs": configs, "compile_s": float(tc), "disassemble_s": float(tx), "cuobjdump": cuo,
           "failures": failures, "created": time.strftime("%Y-%m-%d %H:%M:%S")}, open(path, "w"), indent=1)
EOF
  # Only a dump without failures is reused by a later run.
  [[ ${#failures[@]} -eq 0 ]] && echo "$fp" > "$dir/complete"
  log "$label: dump in $dir ($(ls "$dir/sass" | wc -l) kernels, $(elapsed "$td") s)"
}

check_dump() {  # check_dump LABEL DIR: a dump given alone must be complete
  [[ -f "$2/complete" && -f "$2/manifest.json" && -d "$2/inputs" ]] || die "$1 dump $2 is not complete (give a CLI to make it)"
  grep -qxF "cuobjdump $CUO_VERSION" "$2/inputs.txt" || log "warning: the $1 dump $2 was disassembled by another cuobjdump"
  log "$1: using the dump in $2 ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["label"])' "$2/info.json"))"
}

if [[ -n "$BASE_CLI" ]]; then
  make_dump base "$BASE_CLI" "$BASE_DUMP" "${BASE_CONFIGS:-$(configs_of "$BASE_CLI")}"
else
  check_dump base "$BASE_DUMP"
fi
if [[ -n "$HEAD_CLI" ]]; then
  make_dump head "$HEAD_CLI" "$HEAD_DUMP" "${HEAD_CONFIGS:-$(configs_of "$HEAD_CLI")}" "$BASE_DUMP"
else
  check_dump head "$HEAD_DUMP"
fi

# ------------------------------------------------------------------------------------------- diff
rmdir "$OUT/staging" 2>/dev/null || true
diff_args=("$BASE_DUMP" "$HEAD_DUMP" "$OUT")
[[ $ALLOW_MISSING -eq 1 ]] && diff_args+=(--allow-missing)
rc=0
python3 "$HELPER" diff "${diff_args[@]}" || rc=$?
echo "total: $(elapsed "$T0") s; dumps: $BASE_DUMP/sass, $HEAD_DUMP/sass; diffs: $OUT/diff; summary: $OUT/summary.txt"
exit $rc
