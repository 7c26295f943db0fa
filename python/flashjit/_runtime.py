"""The process-wide flashjit runtime (created on first use, thread-safe) and the calling conventions of the C
functions: status codes become FlashjitError with this thread's last-error text; text outputs are read
through the length-returning protocol."""
import ctypes
import threading

from . import _library
from ._errors import FlashjitError

_INITIAL_TEXT_BYTES = 16384

_lock = threading.Lock()
_runtime = None


def raise_for(status):
    """FlashjitError for a nonzero status, with the library's description of the failure."""
    lib = _library.load()
    message = (lib.flashjit_last_error() or b"").decode("utf-8", "replace").rstrip("\n")
    name = lib.flashjit_status_string(status).decode()
    raise FlashjitError(message or f"flashjit failed: {name}", status=status, status_name=name)


def check(status):
    if status != 0:
        raise_for(status)


def text(fn, *args):
    """Calls a C function returning text into a caller buffer (length, or minus the status on failure)."""
    size = _INITIAL_TEXT_BYTES
    while True:
        buffer = ctypes.create_string_buffer(size)
        n = fn(*args, buffer, size)
        if n < 0:
            raise_for(-n)
        if n < size:
            return buffer.raw[:n].decode("utf-8", "replace")
        size = n + 1


def handle():
    """The runtime handle, created on first use with the defaults (FLASHJIT_CACHE_DIR, FLASHJIT_JIT, ...) and kept
    for the life of the process."""
    global _runtime
    if _runtime is not None:
        return _runtime
    with _lock:
        if _runtime is None:
            lib = _library.load()
            created = ctypes.c_void_p()
            check(lib.flashjit_runtime_create(None, ctypes.byref(created)))
            _runtime = created
    return _runtime
