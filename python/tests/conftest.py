"""Test session setup: the package importable from python/ without installing it, and a temporary kernel cache
(unless FLASHJIT_CACHE_DIR is set), in place before the process runtime is created."""
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_temporary_cache = None


def pytest_configure(config):
    global _temporary_cache
    if "FLASHJIT_CACHE_DIR" not in os.environ:
        _temporary_cache = tempfile.mkdtemp(prefix="flashjit-pytest-")
        os.environ["FLASHJIT_CACHE_DIR"] = _temporary_cache


def pytest_unconfigure(config):
    if _temporary_cache is not None:
        shutil.rmtree(_temporary_cache, ignore_errors=True)
