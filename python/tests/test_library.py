"""The package over libflashjit.so without a GPU: loading, version, emit, compile into the session's cache,
cache info, and the library's errors surfacing as FlashjitError."""
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import flashjit
from flashjit import _abi, _library
from fakes import FakeTensor, qkv

PYTHON_DIR = str(Path(__file__).resolve().parents[1])
FA2 = {"algorithm": "fa2", "arch": "sm_80", "head_dim": 64}


def run_python(code, **env):
    """Runs code in a fresh interpreter (the library and the runtime are per process)."""
    environment = {**os.environ, "PYTHONPATH": PYTHON_DIR, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", flashjit.version())


def test_emit_from_dict_and_json():
    source = flashjit.emit(FA2)
    assert 'extern "C"' in source
    assert flashjit.emit(json.dumps(FA2)) == source


def test_emit_invalid_config_raises_with_the_library_message():
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.emit({"algorithm": "fa2", "head_dim": 60})
    assert raised.value.status == _abi.ERROR_INVALID_CONFIG
    assert raised.value.status_name == "invalid config"
    assert "head_dim" in str(raised.value)
    assert isinstance(raised.value, RuntimeError)


def test_emit_malformed_json():
    with pytest.raises(flashjit.FlashjitError, match="not valid JSON"):
        flashjit.emit("{algorithm")


def test_precompile_a_config_into_the_cache():
    info = flashjit.precompile(FA2)
    assert info["name"].startswith("fa2_bf16_d64_")
    assert info["config"]["arch"] == "sm_80"
    assert info["registers"] > 0 and info["spill_stores"] >= 0 and info["compile_ms"] > 0
    cache = flashjit.cache_info()
    assert cache["dir"] == os.environ["FLASHJIT_CACHE_DIR"]
    assert cache["writable"] is True
    assert cache["entries"] >= 1 and cache["bytes"] > 0


def test_precompile_in_a_fresh_process_is_a_disk_hit():
    # Both in fresh processes: one that imported torch first may run torch's NVRTC, a different cache key.
    code = "import flashjit, json; print(json.dumps(flashjit.precompile(%r)))" % (FA2,)
    first, second = run_python(code), run_python(code)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert json.loads(second.stdout)["cache_hit"] is True


def test_forward_on_fake_pointers_raises_the_library_error():
    q, k, v = qkv()
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.attention(q, k, v, out=FakeTensor(q.shape), stream=0)
    # No GPU: the driver is missing; with one: these are not device pointers.
    assert raised.value.status in (_abi.ERROR_NO_DEVICE, _abi.ERROR_INVALID_ARGUMENT)
    assert re.search(r"no CUDA driver|cuInit failed|not a CUDA device pointer", str(raised.value))


def test_forward_error_from_the_library_checks():
    # Python's checks pass (strides are multiples of 8), the library's own check rejects the batch count.
    q, k, v = qkv(b=70000, sq=1, sk=1, hq=1, hkv=1, d=8)
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.attention(q, k, v, out=FakeTensor(q.shape), stream=0)
    assert raised.value.status == _abi.ERROR_INVALID_ARGUMENT
    assert "batch and heads_q must be <= 65535" in str(raised.value)


def test_runtime_is_created_once_across_threads():
    results, errors = [], []

    def query():
        try:
            results.append(flashjit.cache_info()["dir"])
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=query) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1


def test_lookup_order(monkeypatch):
    monkeypatch.delenv("FLASHJIT_LIBRARY", raising=False)
    (first, inside), (second, build) = _library.candidates()
    assert inside.parent == Path(flashjit.__file__).resolve().parent
    assert build == Path(PYTHON_DIR).parent / "build" / "libflashjit.so"
    monkeypatch.setenv("FLASHJIT_LIBRARY", "/elsewhere/libflashjit.so")
    assert _library.candidates() == [("$FLASHJIT_LIBRARY", Path("/elsewhere/libflashjit.so"))]


def test_missing_library_names_the_places_tried(tmp_path):
    missing = tmp_path / "libflashjit.so"
    done = run_python("import flashjit; flashjit.version()", FLASHJIT_LIBRARY=str(missing))
    assert done.returncode != 0
    assert "cannot load libflashjit.so" in done.stderr and str(missing) in done.stderr
    assert "FlashjitError" in done.stderr


def test_library_that_is_not_a_shared_object(tmp_path):
    bogus = tmp_path / "libflashjit.so"
    bogus.write_text("not an ELF file")
    done = run_python("import flashjit; flashjit.version()", FLASHJIT_LIBRARY=str(bogus))
    assert done.returncode != 0 and str(bogus) in done.stderr


def test_import_and_cpu_use_do_not_import_torch():
    done = run_python("import sys, flashjit; flashjit.emit(%r); flashjit.cache_info(); print('torch' in sys.modules)" % (FA2,))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
