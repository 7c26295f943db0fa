#!/usr/bin/env bash
# Builds the wheel (pip wheel . : scikit-build-core over CMakeLists.txt), checks what it holds, installs it
# into a fresh venv and imports it there, away from the repository (no PYTHONPATH, no FLASHJIT_LIBRARY).
#   tools/wheel_check.sh [--gpu] [--offline] [--keep DIR]
# --offline  no index: pip wheel --no-build-isolation (scikit-build-core must be importable by python3, or
#            installable from $FLASHJIT_WHEELHOUSE, a folder of wheels, into the venv that builds).
# --gpu      also compile and run a kernel with the installed wheel alone: CUDA_HOME unset, no toolkit on
#            PATH, and (as root) /usr/local/cuda hidden by an empty mount in a private mount namespace, so NVRTC
#            must come from the nvidia-cuda-nvrtc wheel (the venv sees the system site-packages, for torch
#            and that wheel). Needs a GPU, torch, and nvidia-cuda-nvrtc installed for python3.
# --keep DIR build and venv in DIR (default: a temporary folder, removed at the end).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gpu=0 offline=0 work=""
while [ $# -gt 0 ]; do
  case $1 in
    --gpu) gpu=1 ;;
    --offline) offline=1 ;;
    --keep) work=${2:?--keep DIR}; shift ;;
    *) echo "usage: tools/wheel_check.sh [--gpu] [--offline] [--keep DIR]" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$work" ]; then
  work=$(mktemp -d /tmp/flashjit-wheel-XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
python=${FLASHJIT_WHEEL_PYTHON:-python3}
say() { echo "wheel_check: $*"; }
fail() { echo "wheel_check: FAILED: $*" >&2; exit 1; }
t0=$SECONDS

# 1. Build. A venv of its own, so that --offline can install scikit-build-core without touching python3's.
"$python" -m venv "$work/build-venv"
bpip="$work/build-venv/bin/python -m pip -q --disable-pip-version-check"
if [ $offline = 1 ]; then
  links=()
  [ -n "${FLASHJIT_WHEELHOUSE:-}" ] && links=(--no-index --find-links "$FLASHJIT_WHEELHOUSE")
  $bpip install "${links[@]}" scikit-build-core || fail "scikit-build-core is not installable offline (set FLASHJIT_WHEELHOUSE)"
  $bpip wheel "$root" --no-deps --no-build-isolation -w "$work/dist"
else
  $bpip wheel "$root" --no-deps -w "$work/dist"
fi
wheel=$(ls "$work"/dist/flashjit-*.whl)
say "built $(basename "$wheel") in $((SECONDS - t0)) s"

# 2. What it holds: one wheel for every CPython 3, the library, the CLI, py.typed; no libfmt, NVRTC or libcuda
# dependency (NVRTC and the driver are dlopen'ed).
case $(basename "$wheel") in *-py3-none-linux_x86_64.whl) ;; *) fail "unexpected tag: $(basename "$wheel")" ;; esac
"$python" - "$wheel" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = {"flashjit/libflashjit.so", "flashjit/bin/flashjit", "flashjit/py.typed", "flashjit/__init__.py", "flashjit/_cli.py"}
missing = need - names
if missing:
    sys.exit(f"wheel_check: FAILED: the wheel lacks {sorted(missing)}")
PY
mkdir -p "$work/unpacked"
"$python" -m zipfile -e "$wheel" "$work/unpacked"
for f in flashjit/libflashjit.so flashjit/bin/flashjit; do
  needed=$(readelf -d "$work/unpacked/$f" | grep NEEDED || true)
  if echo "$needed" | grep -Eq 'libfmt|libnvrtc|libcuda'; then fail "$f links $(echo "$needed" | grep -Eo 'lib(fmt|nvrtc|cuda)[^]]*')"; fi
done

# 3. A fresh venv, the wheel alone (its dependency, nvidia-cuda-nvrtc, is not fetched here: --no-deps).
venv_flags=()
[ $gpu = 1 ] && venv_flags=(--system-site-packages)
"$python" -m venv "${venv_flags[@]}" "$work/venv"
"$work/venv/bin/python" -m pip -q --disable-pip-version-check install --no-deps "$wheel"
if [ $gpu = 1 ]; then
  # --system-site-packages gives the base interpreter's packages; where python3 is itself a venv (torch in it),
  # its own site-packages come after the fresh venv's through a .pth file, so torch and nvidia-cuda-nvrtc are seen
  # and the wheel's flashjit still comes first.
  outer=$("$python" -c 'import site, sysconfig; print("\n".join(dict.fromkeys(site.getsitepackages() + [sysconfig.get_paths()["purelib"]])))')
  inner=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$outer" > "$inner/_flashjit_wheel_check_outer.pth"
fi
# env takes its -u options before any NAME=VALUE (after one, "-u" would be the command to run)
unset_vars=(-u PYTHONPATH -u FLASHJIT_LIBRARY -u FLASHJIT_CLI -u FLASHJIT_NVRTC)
clean_env=(env "${unset_vars[@]}" "FLASHJIT_CACHE_DIR=$work/cache")
cd /
"${clean_env[@]}" "$work/venv/bin/python" - "$work/venv" <<'PY'
import json, subprocess, sys
from pathlib import Path
import flashjit
from flashjit import _library
assert Path(flashjit.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve()), flashjit.__file__
source = flashjit.emit({"algorithm": "fa2", "head_dim": 64})
assert "__global__" in source
lib = _library.load()
assert lib.flashjit_abi_version() >= 1
cli = Path(sys.argv[1]) / "bin" / "flashjit"
assert subprocess.run([str(cli), "--version"], capture_output=True, text=True, check=True).stdout.strip() == flashjit.__version__
info = json.loads(subprocess.run([str(cli), "info", "--json"], capture_output=True, text=True, check=True).stdout)
print(f"wheel_check: imported flashjit {flashjit.__version__} (C ABI {lib.flashjit_abi_version()}) from the venv; "
      f"emit ok; console script ok; NVRTC: {info['nvrtc'].get('path') or info['nvrtc'].get('error').splitlines()[0]}")
PY

# Runs a command with no toolkit in sight: CUDA_HOME unset, no cuda folder on PATH, and (as root, in a private
# mount namespace) an empty folder over the toolkit's folder, so that neither a path nor ld.so.cache reaches it.
# Returns 3 where the toolkit could not be hidden (not root, or no mount namespace).
no_toolkit() {
  local path_no_cuda
  path_no_cuda=$(echo "$work/venv/bin:$PATH" | tr ':' '\n' | grep -v cuda | paste -sd: -)
  local cmd=(env "${unset_vars[@]}" -u CUDA_HOME -u CUDA_PATH "FLASHJIT_CACHE_DIR=$work/cache" "PATH=$path_no_cuda" "$@")
  [ -e /usr/local/cuda ] || { "${cmd[@]}"; return; }
  { [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; } || return 3
  mkdir -p "$work/empty"
  unshare -m bash -c 'mount --make-rprivate / && mount --bind "$0" "$(readlink -f /usr/local/cuda)" && ls /usr/local/cuda/ | wc -l | grep -qx 0 || exit 3; exec "$@"' \
    "$work/empty" "${cmd[@]}"
}

# 3b. NVRTC from the nvidia-cuda-nvrtc wheel alone (the wheel's dependency, installed here; no GPU needed): the
# console script compiles a kernel with the toolkit hidden, NVRTC and its builtins both from the wheel's folder.
nvrtc_links=()
[ $offline = 1 ] && nvrtc_links=(--no-index --find-links "${FLASHJIT_WHEELHOUSE:-/nonexistent}")
if [ $gpu = 1 ] && "$work/venv/bin/python" -c 'import nvidia' 2>/dev/null; then
  have_nvrtc=1  # the system's nvidia-cuda-nvrtc, seen through the .pth above
elif "$work/venv/bin/python" -m pip -q --disable-pip-version-check install "${nvrtc_links[@]}" "nvidia-cuda-nvrtc>=13.0" 2>"$work/nvrtc-pip.log"; then
  have_nvrtc=1
else
  have_nvrtc=0
  [ $offline = 1 ] || { cat "$work/nvrtc-pip.log" >&2; fail "pip could not install nvidia-cuda-nvrtc, the wheel's dependency"; }
  say "offline without an nvidia-cuda-nvrtc wheel in FLASHJIT_WHEELHOUSE: compile without the toolkit not checked"
fi
if [ $have_nvrtc = 1 ]; then
  rc=0
  no_toolkit "$work/venv/bin/flashjit" compile --json algorithm=fa2 head_dim=64 arch=sm_80 >"$work/nt-compile.json" 2>"$work/nt-compile.err" || rc=$?
  if [ $rc = 3 ]; then
    say "not root or no mount namespace: compile without the toolkit not checked"
  else
    [ $rc = 0 ] || { cat "$work/nt-compile.err" "$work/nt-compile.json" >&2; fail "compile with the toolkit hidden failed"; }
    no_toolkit "$work/venv/bin/flashjit" info --json >"$work/nt-info.json" || fail "info with the toolkit hidden failed"
    "$python" - "$work/nt-compile.json" "$work/nt-info.json" <<'PY'
import json, os, sys
compiled = json.load(open(sys.argv[1]))
nvrtc = json.load(open(sys.argv[2]))["nvrtc"]
assert compiled and all(k.get("ok") for k in compiled), compiled
where = os.path.dirname(nvrtc.get("path") or "")
assert "nvidia" in where and "/usr/local/cuda" not in where, nvrtc
assert nvrtc.get("builtins") and os.path.dirname(nvrtc["builtins"]) == where, nvrtc
print(f"wheel_check: compiled without the toolkit: NVRTC {nvrtc['version']} and its builtins from {where}")
PY
  fi
fi

# 4. --gpu: compile and run a kernel with no toolkit in sight.
if [ $gpu = 1 ]; then
  cat >"$work/gpu_run.py" <<'PY'
import json, os, subprocess, sys
import torch
import flashjit
assert "CUDA_HOME" not in os.environ
q = torch.randn(1, 256, 4, 64, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 256, 4, 64, device="cuda", dtype=torch.bfloat16)
v = torch.randn_like(k)
o = flashjit.attention(q, k, v, causal=True)
ref = torch.nn.functional.scaled_dot_product_attention(
    q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float(), is_causal=True).transpose(1, 2)
err = ((o.float() - ref).norm() / ref.norm()).item()
maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnvrtc" in line})
print(f"wheel_check: GPU kernel ran, rel L2 {err:.2e}; NVRTC mapped from {maps}; FLASHJIT_NVRTC={os.environ.get('FLASHJIT_NVRTC')}")
assert err < 2e-2, err
assert maps and all("/usr/local/cuda" not in m for m in maps), maps
PY
  rc=0
  no_toolkit "$work/venv/bin/python" "$work/gpu_run.py" || rc=$?
  case $rc in
    0) ;;
    3) say "not root: /usr/local/cuda stays visible (the library would take its NVRTC first)"
       env "${unset_vars[@]}" -u CUDA_HOME "FLASHJIT_CACHE_DIR=$work/cache" "$work/venv/bin/python" "$work/gpu_run.py" ||
         fail "the GPU run failed" ;;
    *) fail "the GPU run without the toolkit failed" ;;
  esac
fi
say "ok in $((SECONDS - t0)) s"
