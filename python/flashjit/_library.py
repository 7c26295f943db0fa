"""Finds and loads libflashjit.so, and declares the C functions' signatures.

Lookup order: $FLASHJIT_LIBRARY (when set, the only place tried), the copy shipped inside this package, then
the repository's build folder (../build/libflashjit.so next to python/).

NVRTC: the library loads it at run time ($FLASHJIT_NVRTC, else $CUDA_HOME's, else /usr/local/cuda's, else by
soname; src/compile/nvrtc_library.hpp). Where no toolkit has one, configure_nvrtc() points FLASHJIT_NVRTC at
the nvidia-cuda-nvrtc wheel's libnvrtc (a dependency of the flashjit wheel), for the library and the CLI.
"""
import ctypes
import os
import sys
import threading
from pathlib import Path

from ._abi import AppendArgs, AttentionArgs, BlockMaskArgs, DecodeArgs, MergeArgs, RuntimeOptions, Target
from ._errors import FlashjitError

LIBRARY = "libflashjit.so"

_lock = threading.Lock()
_library = None


def candidates():
    """(origin, path) pairs in lookup order."""
    explicit = os.environ.get("FLASHJIT_LIBRARY")
    if explicit:
        return [("$FLASHJIT_LIBRARY", Path(explicit))]
    package = Path(__file__).resolve().parent
    return [("inside the package", package / LIBRARY), ("the repository build", package.parent.parent / "build" / LIBRARY)]


_NVRTC_NAMES = ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12")
# Where NVIDIA's wheels put libnvrtc under site-packages: nvidia-cuda-nvrtc (CUDA 13), nvidia-cuda-nvrtc-cu12.
_NVRTC_WHEEL_FILES = ("nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12")


def _toolkit_nvrtc(environ):
    """The toolkit libnvrtc the library would load first ($CUDA_HOME's, then /usr/local/cuda's), or None."""
    roots = [environ["CUDA_HOME"]] if environ.get("CUDA_HOME") else []
    for root in roots + ["/usr/local/cuda"]:
        for lib in ("lib64", "lib"):
            for name in _NVRTC_NAMES:
                path = Path(root, lib, name)
                if path.is_file():
                    return path
    return None


def wheel_nvrtc(paths=None):
    """libnvrtc of an installed nvidia-cuda-nvrtc wheel (the first on sys.path), or None."""
    for entry in sys.path if paths is None else paths:
        for rel in _NVRTC_WHEEL_FILES:
            path = Path(entry or ".", rel)
            if path.is_file():
                return path
    return None


def configure_nvrtc(environ=None):
    """Sets FLASHJIT_NVRTC to the nvidia-cuda-nvrtc wheel's library when neither FLASHJIT_NVRTC is set nor a
    toolkit has one; returns the value set, or None (the library's own search then applies)."""
    environ = os.environ if environ is None else environ
    if environ.get("FLASHJIT_NVRTC") or _toolkit_nvrtc(environ) is not None:
        return None
    path = wheel_nvrtc()
    if path is None:
        return None
    environ["FLASHJIT_NVRTC"] = str(path)
    return str(path)


def _declare(lib):
    c = ctypes
    text_out = [c.POINTER(c.c_char), c.c_size_t]
    signatures = {
        "flashjit_version": (c.c_char_p, []),
        "flashjit_abi_version": (c.c_int, []),
        "flashjit_status_string": (c.c_char_p, [c.c_int]),
        "flashjit_last_error": (c.c_char_p, []),
        "flashjit_runtime_create": (c.c_int, [c.POINTER(RuntimeOptions), c.POINTER(c.c_void_p)]),
        "flashjit_runtime_destroy": (None, [c.c_void_p]),
        "flashjit_forward": (c.c_int, [c.c_void_p, c.POINTER(AttentionArgs)]),
        "flashjit_prepare": (c.c_int64, [c.c_void_p, c.POINTER(AttentionArgs)] + text_out),
        "flashjit_decode": (c.c_int, [c.c_void_p, c.POINTER(DecodeArgs)]),
        "flashjit_prepare_decode": (c.c_int, [c.c_void_p, c.POINTER(DecodeArgs)]),
        "flashjit_decode_workspace_bytes": (c.c_int64, [c.c_void_p, c.POINTER(DecodeArgs)]),
        "flashjit_merge": (c.c_int, [c.c_void_p, c.POINTER(MergeArgs)]),
        "flashjit_append_kv": (c.c_int, [c.c_void_p, c.POINTER(AppendArgs)]),
        "flashjit_prepare_append_kv": (c.c_int, [c.c_void_p, c.POINTER(AppendArgs)]),
        "flashjit_make_block_mask": (c.c_int, [c.c_void_p, c.POINTER(BlockMaskArgs)]),
        "flashjit_select": (c.c_int64, [c.c_void_p, c.POINTER(AttentionArgs)] + text_out),
        "flashjit_select_target": (c.c_int64, [c.c_void_p, c.POINTER(AttentionArgs), c.POINTER(Target)] + text_out),
        "flashjit_select_decode": (c.c_int64, [c.c_void_p, c.POINTER(DecodeArgs), c.POINTER(Target)] + text_out),
        "flashjit_compile": (c.c_int64, [c.c_void_p, c.c_char_p] + text_out),
        "flashjit_emit": (c.c_int64, [c.c_char_p] + text_out),
        "flashjit_cache_info": (c.c_int64, [c.c_void_p] + text_out),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def load():
    """The loaded library (once per process); FlashjitError naming every place tried when there is none."""
    global _library
    if _library is not None:
        return _library
    with _lock:
        if _library is None:
            configure_nvrtc()
            tried = []
            for origin, path in candidates():
                if not path.is_file():
                    tried.append(f"{path} ({origin}): not found")
                    continue
                try:
                    _library = _declare(ctypes.CDLL(str(path)))
                    break
                except (OSError, AttributeError) as e:
                    tried.append(f"{path} ({origin}): {e}")
            else:
                raise FlashjitError(f"cannot load {LIBRARY}; tried:\n  " + "\n  ".join(tried) +
                                    "\nBuild it (bash tools/setup.sh) or set FLASHJIT_LIBRARY to its path.")
    return _library
