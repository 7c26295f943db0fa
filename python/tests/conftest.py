"""Test session setup: the package importable from python/ without installing it, and a temporary kernel cache
(unless FLASHJIT_CACHE_DIR is set), in place before the process runtime is created."""
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

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


@pytest.fixture
def library_untouched(monkeypatch):
    """Loading the library fails the test: the argument checks must refuse a call before the library is reached.
    The argument-check modules use it for every test (pytestmark) or for those that take it."""
    from flashjit import _library  # not at the top: the package is first imported after pytest_configure

    def refuse():
        raise AssertionError("the library was reached before the arguments were checked")
    monkeypatch.setattr(_library, "load", refuse)
