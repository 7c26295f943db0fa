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
clean_env=(env -u PYTHONPATH -u FLASHJIT_LIBRARY -u FLASHJIT_CLI -u FLASHJIT_NVRTC "FLASHJIT_CACHE_DIR=$work/cache")
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
maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnvrtc.so" in line})
print(f"wheel_check: GPU kernel ran, rel L2 {err:.2e}; NVRTC mapped from {maps}; FLASHJIT_NVRTC={os.environ.get('FLASHJIT_NVRTC')}")
assert err < 2e-2, err
assert maps and all("/usr/local/cuda" not in m for m in maps), maps
PY
  path_no_cuda=$(echo "$work/venv/bin:$PATH" | tr ':' '\n' | grep -v cuda | paste -sd: -)
  run_gpu=("${clean_env[@]}" -u CUDA_HOME -u CUDA_PATH "PATH=$path_no_cuda" "$work/venv/bin/python" "$work/gpu_run.py")
  if [ "$(id -u)" = 0 ] && [ -e /usr/local/cuda ]; then
    mkdir -p "$work/empty"
    unshare -m bash -c 'mount --make-rprivate / && mount --bind "$0" "$(readlink -f /usr/local/cuda)" && ls /usr/local/cuda/ | wc -l | grep -qx 0 && exec "$@"' \
      "$work/empty" "${run_gpu[@]}" || fail "the GPU run without the toolkit failed (or /usr/local/cuda could not be hidden)"
  else
    [ -e /usr/local/cuda ] && say "not root: /usr/local/cuda stays visible (the library would take its NVRTC first)"
    "${run_gpu[@]}" || fail "the GPU run failed"
  fi
fi
say "ok in $((SECONDS - t0)) s"
